"""Checks the fastest-variant section of tools/attention_bench.sh's table.txt against its own rows.

usage: check_attention_table.py TABLE N_SHAPES
For every shape (HS, T) of the variant rows, the section must name, in each direction, the
variant with the highest TF/s among the rows whose check is ok, print that TF/s, and its ratio to
the shape's first row; it must have N_SHAPES rows, one per shape, in the order the shapes came.
"""
import re
import sys

table, n_shapes = sys.argv[1], int(sys.argv[2])
row = re.compile(r"^(\S+) +(\d+) +(\d+) +\d+ x \d+ \| +(\S+) .*\| +(\S+) .*\| (\S+)$")
fastest = re.compile(r"^ *(\d+) +(\d+) \| (\S+) +(\S+) +(\S+) .*\| (\S+) +(\S+) +(\S+) ")
shapes, rows, section = [], {}, []
in_section = False
for line in open(table):
    line = line.rstrip("\n")
    if line.startswith("== fastest variant per shape"):
        in_section = True
        continue
    m = (fastest if in_section else row).match(line)
    if not m:
        continue
    if in_section:
        section.append(m.groups())
        continue
    name, hs, t, fwd, bwd, check = m.groups()
    if (hs, t) not in rows:
        shapes.append((hs, t))
        rows[hs, t] = []
    rows[hs, t].append((name, float(fwd), float(bwd), check))

assert len(shapes) == n_shapes, "expected %d shapes in the rows, found %d" % (n_shapes, len(shapes))
assert [s[:2] for s in section] == shapes, "fastest section's shapes %s, rows' %s" % (
    [s[:2] for s in section], shapes)
for (hs, t, fname, ftf, fbase, bname, btf, bbase) in section:
    first, ok = rows[hs, t][0], [r for r in rows[hs, t] if r[3] == "ok"]
    for d, name, tf, base in ((1, fname, ftf, fbase), (2, bname, btf, bbase)):
        best = max(ok, key=lambda r: r[d])
        # rows equal in their printed digits are a tie the section may break either way
        tied = [r[0] for r in ok if r[d] == best[d]]
        assert name in tied, "HS %s T %s: fastest %s, the rows say %s" % (hs, t, name, " or ".join(tied))
        assert abs(float(tf) - best[d]) <= 1e-9 + 1e-3 * best[d], (hs, t, tf, best)
        want = best[d] / first[d]
        # the rows print 3 significant digits below 10 TF/s, the ratio comes from the CSV's full values
        assert abs(float(base) - want) <= 0.006 + 1e-2 * want, "HS %s T %s: x base %s, expected %.3f" % (hs, t, base, want)
print("fastest variant per shape: %d shapes, names, TF/s and x base agree with the rows" % len(section))
