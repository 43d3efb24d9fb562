"""A Muon run's state files: the second moment v is 0 at every element of the matrices Muon
updates (qkv, attention output, fc and fc projection of every layer) and not all 0 elsewhere (the
tensors AdamW keeps), so the compact second moment was spread back to its tensors' places. A
version 4 file holds the weights and moments of its slice of the parameters: the check takes the
whole v from the files of every rank of the checkpoint (STATE_FILE's siblings), which must
partition the parameters.

With a second state file, the two hold the same moments m and v, bit for bit (a dist_muon rank's
gathered first moment against muon's; the same slice).

usage: check_muon_state.py STATE_FILE [SAME_MOMENTS_AS]   (GPT's block: LayerNorm, GELU, learned
       positions, biases)
"""
import glob
import struct
import sys


def parts(p):
    """The header, the parameter count, the slice (begin, count), and the bytes of m and v."""
    b = open(p, "rb").read()
    h = struct.unpack_from("<256i", b)   # checkpoints/train_state.c's TS_* fields
    n, begin, count = (h[i] | h[i + 1] << 32 for i in (40, 42, 44))
    weights = count if h[1] >= 4 else n   # version 4: the slice's weights alone
    at = 1024 + (h[46] + 7) // 8 * 8 + 24 * h[66] + 4 * weights   # after config, positions, weights
    return h, n, begin, count, b[at:at + 8 * count]


path = sys.argv[1]
h, n, begin, count, _ = parts(path)
if h[1] >= 4:
    files = sorted(glob.glob(path.rsplit("_", 1)[0] + "_*.bin"))
    assert len(files) == h[3], (files, h[3])
else:
    files = [path]
    assert count == n, "a Muon state before version 4 holds every parameter's moments: %d of %d" % (count, n)
v, covered = [None] * n, 0
for f in files:
    _, k, b0, c, mv = parts(f)
    assert k == n and b0 == covered, (f, k, b0, covered)
    v[b0:b0 + c] = struct.unpack_from("<%df" % c, mv, 4 * c)
    covered += c
assert covered == n, (covered, n)
ctx, L, C, Vp, FC = h[10], h[12], h[14], h[15], h[29] or 4 * h[14]
# GPT's tensors in order, with the four Muon matrices marked
sizes = [(Vp * C, 0), (ctx * C, 0), (L * C, 0), (L * C, 0), (L * 3 * C * C, 1), (L * 3 * C, 0),
         (L * C * C, 1), (L * C, 0), (L * C, 0), (L * C, 0), (L * FC * C, 1), (L * FC, 0),
         (L * C * FC, 1), (L * C, 0), (C, 0), (C, 0)]
assert sum(s for s, _ in sizes) == n, (sum(s for s, _ in sizes), n)
at, matrix, other = 0, 0, 0
for size, muon in sizes:
    part = v[at:at + size]
    if muon:
        assert all(x == 0 for x in part), "a Muon matrix at %d has a second moment" % at
        matrix += size
    else:
        other += sum(x != 0 for x in part)
    at += size
assert other > 0, "no second moment anywhere"
print("  ok    %s (%d file(s)): v 0 at all %d matrix elements, nonzero at %d of the %d others"
      % (path.split("/")[-1], len(files), matrix, other, n - matrix))

if len(sys.argv) > 2:
    (_, n, b0, c, mine), (_, k, b1, d, theirs) = parts(path)[:5], parts(sys.argv[2])[:5]
    assert (n, b0, c) == (k, b1, d) and len(mine) == 8 * c, (n, k, b0, b1, c, d, len(mine))
    assert mine == theirs, "the moments differ from %s's" % sys.argv[2]
    print("  ok    %s: m and v of parameters %d..%d (%d bytes) identical to %s's"
          % (path.split("/")[-1], b0, b0 + c, len(mine), sys.argv[2].split("/")[-2]))
