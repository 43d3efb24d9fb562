"""A Muon run's state files: the second moment v is 0 at every element of the matrices Muon
updates (qkv, attention output, fc and fc projection of every layer) and not all 0 elsewhere (the
tensors AdamW keeps), so the compact second moment was spread back to its tensors' places.

With a second state file, the two hold the same moments m and v, bit for bit (a dist_muon rank's
gathered first moment against muon's).

usage: check_muon_state.py STATE_FILE [SAME_MOMENTS_AS]   (GPT's block: LayerNorm, GELU, learned
       positions, biases)
"""
import struct
import sys

path = sys.argv[1]
b = open(path, "rb").read()
h = struct.unpack_from("<256i", b)   # checkpoints/train_state.c's TS_* fields
config_bytes, n, count = h[46], h[40] | h[41] << 32, h[44] | h[45] << 32
body = 1024 + (config_bytes + 7) // 8 * 8 + 24 * h[66]   # after the config and set positions
ctx, L, C, Vp, FC = h[10], h[12], h[14], h[15], h[29] or 4 * h[14]
assert count == n, "a Muon state holds every parameter's moments: %d of %d" % (count, n)
v = struct.unpack_from("<%df" % n, b, body + 8 * n)
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
print("  ok    %s: v 0 at all %d matrix elements, nonzero at %d of the %d others"
      % (path.split("/")[-1], matrix, other, n - matrix))

def moments(p):
    b = open(p, "rb").read()
    h = struct.unpack_from("<256i", b)
    n, at = h[40] | h[41] << 32, 1024 + (h[46] + 7) // 8 * 8 + 24 * h[66]
    return b[at + 4 * n:at + 12 * n], n

if len(sys.argv) > 2:
    (mine, n), (theirs, k) = moments(path), moments(sys.argv[2])
    assert n == k and len(mine) == 8 * n, (n, k, len(mine))
    assert mine == theirs, "the moments differ from %s's" % sys.argv[2]
    print("  ok    %s: m and v (%d bytes) identical to %s's" % (path.split("/")[-1], len(mine),
                                                             sys.argv[2].split("/")[-2]))
