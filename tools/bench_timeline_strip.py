#!/usr/bin/env python3
"""One training step of a Chrome trace (the trainer's --trace FILE) as a per-rank timeline strip.

    python3 tools/bench_timeline_strip.py TRACE OUT.png [--step N] [--title TEXT]

Per rank one horizontal strip, time in ms from the step's earliest event on any rank (the trace's
time stamps are wall-clock, so ranks of one machine line up and their skew shows). The upper half
of a strip is the compute track: compute spans (green), with the waits (red: compute blocked on a
communication) and communication issue spans (orange: host time posting a collective) drawn over
them; the lower half is every communication track of the rank merged: transfers in flight (blue,
translucent, so overlapping transfers look darker). Step N (default: the last step every rank
has in the trace). Writes OUT.png with gnuplot; exit 1 with one "error: ..." line otherwise.
"""
import argparse
import json
import os
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_sweep import Fail, report_failures, run_gnuplot  # noqa: E402

# Drawing order (later on top): cat, lane offset from the rank's centre, colour, legend.
KINDS = (("compute", -0.2, "#228833", "compute"),
         ("comm-issue", -0.2, "#ee7733", "comm issue (host)"),
         ("wait", -0.2, "#cc3311", "wait"),
         ("comm-flight", 0.2, "#4477aa", "comm in flight"))
HALF = 0.18   # half the height of a lane


def load_step(path, step):
    """(step, ranks, {rank: [events of the step]}) of a trace."""
    try:
        with open(path, encoding="utf-8") as f:
            events = json.load(f)["traceEvents"]
    except OSError as e:
        raise Fail(f"{path}: cannot read the trace: {e.strerror}")
    except (ValueError, KeyError, TypeError) as e:
        raise Fail(f"{path}: not a Chrome trace with traceEvents: {e}")
    spans = [e for e in events if e.get("ph") == "X" and isinstance(e.get("args"), dict)]
    ranks = sorted({e["pid"] for e in events if e.get("name") == "process_name"})
    if not spans or not ranks:
        raise Fail(f"{path}: no ranks or no spans")
    steps_of = {r: {e["args"].get("step") for e in spans if e["pid"] == r} for r in ranks}
    common = set.intersection(*steps_of.values()) - {None}
    if step is None:
        if not common:
            raise Fail(f"{path}: no step that every rank has in the trace")
        step = max(common)
    elif step not in common:
        raise Fail(f"{path}: step {step} is not in the trace on every rank "
                   f"(steps: {sorted(common)})")
    return step, ranks, {r: [e for e in spans if e["pid"] == r and e["args"].get("step") == step]
                         for r in ranks}


def draw(args):
    step, ranks, by_rank = load_step(args.trace, args.step)
    t0 = min(e["ts"] for evs in by_rank.values() for e in evs)
    t1 = max(e["ts"] + e["dur"] for evs in by_rank.values() for e in evs)
    with tempfile.TemporaryDirectory() as tmp:
        clauses = []
        for cat, dy, colour, legend in KINDS:
            dat = os.path.join(tmp, cat + ".dat")
            with open(dat, "w", encoding="utf-8") as f:
                for r in ranks:   # boxxyerror: x y dx dy (centre and half sizes)
                    f.writelines("%.6f %.3f %.6f %.3f\n" % (
                        (e["ts"] + e["dur"] / 2 - t0) / 1e3, r + dy, e["dur"] / 2e3, HALF)
                        for e in by_rank[r] if e.get("cat") == cat)
            if os.path.getsize(dat):
                alpha = "transparent solid 0.45" if cat == "comm-flight" else "solid 1.0"
                clauses.append(f"'{dat}' using 1:2:3:4 with boxxyerror fs {alpha} noborder "
                               f"lc rgb '{colour}' title '{legend}'")
        if not clauses:
            raise Fail(f"{args.trace}: step {step} has no spans")
        title = f"timeline of step {step}, {len(ranks)} ranks" + (
            f": {args.title}" if args.title else "")
        run_gnuplot("\n".join([
            f"set terminal pngcairo size 1200,{140 + 34 * len(ranks)} font ',10' noenhanced",
            f"set output '{args.png}'",
            f"set title '{title}'",
            "set xlabel 'ms from the step start (earliest rank)'",
            "set ytics (%s)" % ", ".join(f"'rank {r}' {r}" for r in ranks),
            "set yrange [%g:%g]" % (ranks[-1] + 0.6, ranks[0] - 0.6),
            "set xrange [0:%g]" % ((t1 - t0) / 1e3 * 1.01),
            "set key outside top center horizontal",
            "set grid xtics",
            "plot " + ", ".join(clauses)]) + "\n")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("png")
    ap.add_argument("--step", type=int)
    ap.add_argument("--title", default="")
    return report_failures(draw, ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
