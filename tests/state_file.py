"""Forging training state files (checkpoints/train_state.h) for the trainer's tests: each edit
recomputes the checksum (header int 50, u64: the 64-bit word hash of checkpoints/train_state.c
over the file with that field zero), so that the forged file passes it and only what was changed
is wrong.

usage: state_file.py forge FILE OFFSET HEX     the bytes HEX at OFFSET
       state_file.py version3 FILE MODEL_FILE  a version 4 file as version 3 wrote it: every
                                               weight (the fp32 model file's) in place of the slice
       state_file.py behead FILE               a version 4 file without the first parameter of
                                               its slice (its weight and moments)
"""
import struct
import sys


def rechecksum(b):
    """Puts the checksum of bytearray b (a whole state file) into its header."""
    b[200:208] = bytes(8)
    h, mask = 0xcbf29ce484222325, (1 << 64) - 1
    for (w,) in struct.iter_unpack("<Q", bytes(b) + bytes(-len(b) % 8)):
        h = ((h ^ w) * 0x100000001b3) & mask
        h ^= h >> 29
    b[200:208] = struct.pack("<Q", h)


def forge(path, offset, hexbytes):
    b = bytearray(open(path, "rb").read())
    x = bytes.fromhex(hexbytes)
    b[offset:offset + len(x)] = x
    rechecksum(b)
    open(path, "wb").write(b)


def version3(path, model_path):
    b = bytearray(open(path, "rb").read())
    h = struct.unpack_from("<256i", b)
    assert h[1] == 4, "%s: version %d, expected 4" % (path, h[1])
    n, count = (h[i] | h[i + 1] << 32 for i in (40, 44))
    at = 1024 + h[46] + 24 * h[66]   # the weights, after the configuration and set positions
    model = open(model_path, "rb").read()
    assert struct.unpack_from("<2i", model) == (20240326, 3), "%s: not an fp32 model file" % model_path
    b[at:at + 4 * count] = model[1024:1024 + 4 * n]
    struct.pack_into("<i", b, 4, 3)
    rechecksum(b)
    open(path, "wb").write(b)


def behead(path):
    b = bytearray(open(path, "rb").read())
    h = struct.unpack_from("<256i", b)
    assert h[1] == 4, "%s: version %d, expected 4" % (path, h[1])
    begin, count = (h[i] | h[i + 1] << 32 for i in (42, 44))
    assert count > 0, "%s: an empty slice" % path
    at = 1024 + h[46] + 24 * h[66]   # the weights, then m and v: 4 count bytes each
    for k in (2, 1, 0):   # from the back, so that the earlier offsets hold
        del b[at + 4 * count * k:at + 4 * count * k + 4]
    struct.pack_into("<QQ", b, 4 * 42, begin + 1, count - 1)
    rechecksum(b)
    open(path, "wb").write(b)


if __name__ == "__main__":
    if sys.argv[1:2] == ["forge"] and len(sys.argv) == 5:
        forge(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif sys.argv[1:2] == ["version3"] and len(sys.argv) == 4:
        version3(sys.argv[2], sys.argv[3])
    elif sys.argv[1:2] == ["behead"] and len(sys.argv) == 3:
        behead(sys.argv[2])
    else:
        sys.exit(__doc__)
