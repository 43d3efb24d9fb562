"""costmodel --train-tokens with --rampup-batch-tokens against a step-by-step sum.

Walks the ramp as Megatron-LM counts it (a step's batch is START + k INCREMENT tokens, k =
floor(trained n / TOKENS) for the tokens trained before it, n = (full - START) / INCREMENT; the
full batch from TOKENS on) until the run has trained --train-tokens, and sums each step's time as
`costmodel --accum A` predicts it for the step's A micro-batches. The program's steps, ramp-up
steps and tokens must equal the walk's, its hours the sum's; the same run without the ramp must
come out measurably shorter, so the check fails if the ramp is ignored.

usage: check_costmodel_rampup.py COSTMODEL_COMMAND... (the configuration, without --accum)
"""
import re
import subprocess
import sys

B, T, DP, ACCUM = 1, 2048, 8, 16
MICRO = B * T * DP
FULL = MICRO * ACCUM
START, INCREMENT, TOKENS, TRAIN = MICRO, MICRO, 10_000_000_000, 20_000_000_000


def run(extra):
    out = subprocess.run(sys.argv[1:] + ["--batch", str(B), "--seq-len", str(T), "--dp", str(DP)]
                         + extra, check=True, capture_output=True, text=True).stdout
    return out


def step_ms(accum):
    return float(re.search(r"^step +([0-9.]+) ms", run(["--accum", str(accum)]), re.M).group(1))


def parse_run(text):
    m = re.search(r"^run +%d tokens in (\d+) steps of (?:up to )?%d tokens: ([0-9.]+) hours on %d "
                  r"devices, ([0-9.]+) device-hours \(\d+ tokens/s\)$" % (TRAIN, FULL, DP), text,
                  re.M)
    assert m, text
    return int(m.group(1)), float(m.group(2)), float(m.group(3))


n = (FULL - START) // INCREMENT
ms = {a: step_ms(a) for a in range(1, ACCUM + 1)}
trained = steps = ramp_steps = ramp_tokens = 0
total_ms = 0.0
while trained < TRAIN:
    batch = START + (trained * n // TOKENS) * INCREMENT if trained < TOKENS else FULL
    if batch < FULL:
        ramp_steps += 1
        ramp_tokens += batch
    total_ms += ms[batch // MICRO]
    trained += batch
    steps += 1
expected = total_ms / 3.6e6

text = run(["--accum", str(ACCUM), "--train-tokens", str(TRAIN),
            "--rampup-batch-tokens", "%d %d %d" % (START, INCREMENT, TOKENS)])
got_steps, hours, device_hours = parse_run(text)
m = re.search(r"^ramp-up +(\d+) steps of %d to %d tokens, (\d+) tokens in all \((\d+) steps of "
              r"%d tokens\)$" % (START, FULL - INCREMENT, FULL), text, re.M)
assert m, text
assert (got_steps, int(m.group(1)), int(m.group(2))) == (steps, ramp_steps, ramp_tokens), \
    (got_steps, m.groups(), steps, ramp_steps, ramp_tokens)
assert int(m.group(3)) == -(-ramp_tokens // FULL), m.group(3)
# The printed hours have two decimals, the step times three (ms): the sum's own rounding is
# under steps x 0.0005 ms.
tolerance = 0.005 + steps * 0.0005 / 3.6e6
assert abs(hours - expected) < tolerance, (hours, expected)
assert abs(device_hours - DP * hours) < 0.06, (device_hours, hours)
_, flat_hours, _ = parse_run(run(["--accum", str(ACCUM), "--train-tokens", str(TRAIN)]))
assert expected - flat_hours > 4 * tolerance, (expected, flat_hours)
print("ok: %d steps (%d of the ramp-up, %d tokens), %.2f hours against the steps' sum %.4f; "
      "%.2f without the ramp" % (steps, ramp_steps, ramp_tokens, hours, expected, flat_hours))
