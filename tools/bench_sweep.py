#!/usr/bin/env python3
"""The parsing, aggregation and plotting half of tools/bench_sweep.sh (standard library + gnuplot).

    bench_sweep.py points FILE              validate a points file; print one tab-separated line
                                            per point (see POINT_FIELDS), or "error: FILE:LINE: ..."
    bench_sweep.py shard OUT --points FILE --steps N
                                            a Markov-chain token shard (llm.c format, uint16) with
                                            tokens enough for N steps of every point, every id
                                            below the smallest vocabulary of the points
    bench_sweep.py peak LOG                 the peak GFLOP/s per rank of a trainer's log.jsonl
    bench_sweep.py row LOG --point LINE --warm W --out DIR [--trace FILE]
                                            one point's row appended to DIR/sweep.csv and
                                            DIR/sweep.jsonl (CSV header written if missing)
    bench_sweep.py plot DIR                 DIR/throughput.png, exposed_comm.png, bytes_per_rank.png
    bench_sweep.py check DIR --points FILE  every point of FILE in DIR/sweep.jsonl with finite
                                            positive numbers, every PNG present and non-empty

Points file: one point per line, `preset layers channels heads vocab seq_len batch dp pq pkv
algorithm [window=W] [trace]`, '#' starts a comment. ranks = dp * pq * pkv; algorithm is one of
ALGORITHMS (ulysses: pq * pkv must divide heads; usp: pq must). `window=W` runs the point with the
trainer's --attention-window W in every layer (0, the default: causal).
The word `trace` marks the point whose run writes a Chrome trace (at most one); unmarked, the
first point with the most ranks is traced.

A row (CSV columns COLUMNS; the JSONL has the same keys and a few more):
    ms_per_step        mean host step time ("ms" of the log's step records) over the steps after
                       the first `warm` ones; the last record of a step counts (resumed logs)
    tokens_per_s, mfu  the same steps' tokens and FLOPs over their mean time
    compute_ms, exposed_comm_ms, wait_ms
                       ms_per_step x the mean of the step records' compute_frac,
                       exposed_comm_frac and wait_frac over the same steps (rank 0's timeline)
    comm_bytes_per_rank
                       bytes received per step by the busiest rank: the max over ranks of the
                       timeline record's step_comm_bytes_per_rank (a sum over all the run's
                       steps) divided by its step count
    peak_gflops        peak GFLOP/s per rank that the trainer's MFU used (summary.peak_flops)
    overlap            the trainer's --overlap (from the config record)
Exit status: 0, or 1 with one "error: ..." line on stderr.
"""
import argparse
import csv
import json
import math
import os
import random
import struct
import subprocess
import sys
import tempfile

ALGORITHMS = ("2d", "2d-overlap", "ring", "striped", "zigzag", "ulysses", "usp")
COLUMNS = ("preset", "layers", "channels", "heads", "vocab", "seq_len", "batch", "dp", "pq", "pkv",
           "ranks", "algorithm", "overlap", "steps_timed", "ms_per_step", "tokens_per_s", "mfu",
           "compute_ms", "exposed_comm_ms", "wait_ms", "comm_bytes_per_rank", "peak_gflops",
           "window")
# What `points` prints per point, tab-separated, in this order (bench_sweep.sh reads it).
POINT_FIELDS = ("index", "preset", "layers", "channels", "heads", "vocab", "seq_len", "batch", "dp",
                "pq", "pkv", "ranks", "algorithm", "trace", "window")
INT_FIELDS = POINT_FIELDS[2:12] + ("window",)
SHAPE = ("preset", "layers", "channels", "heads", "vocab", "seq_len", "batch", "window")
KEY = SHAPE + ("dp", "pq", "pkv", "algorithm")
PNGS = ("throughput.png", "exposed_comm.png", "bytes_per_rank.png")
COLOURS = {"2d": "#4477aa", "2d-overlap": "#66ccee", "ring": "#cc3311", "striped": "#ee7733",
           "zigzag": "#aa3377", "ulysses": "#228833", "usp": "#bbbbbb"}


class Fail(Exception):
    """One line for the user."""


# ---------------------------------------------------------------------------------- points


def read_points(path):
    """The points of a points file as dicts (POINT_FIELDS), the traced one marked."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise Fail(f"{path}: cannot read the points file: {e.strerror}")
    points = []
    for number, line in enumerate(lines, 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        where = f"{path}:{number}"
        extra = words[11:]
        trace = extra.count("trace")
        windows = [w for w in extra if w.startswith("window=")]
        if len(words) < 11 or trace > 1 or len(windows) > 1 or trace + len(windows) != len(extra):
            raise Fail(f"{where}: expected 'preset layers channels heads vocab seq_len batch dp pq "
                       f"pkv algorithm [window=W] [trace]', got {len(words)} fields: "
                       f"{line.strip()}")
        window = windows[0][len("window="):] if windows else "0"
        if not window.isdigit():
            raise Fail(f"{where}: window must be a whole number of tokens, got '{window}'")
        p = {"index": len(points) + 1, "preset": words[0], "algorithm": words[10],
             "trace": int(trace), "window": int(window), "line": where}
        for name, word in zip(INT_FIELDS[:-1], words[1:10]):
            if not word.isdigit() or int(word) < 1:
                raise Fail(f"{where}: {name} must be a positive integer, got '{word}'")
            p[name] = int(word)
        if p["algorithm"] not in ALGORITHMS:
            raise Fail(f"{where}: algorithm must be one of {', '.join(ALGORITHMS)}, "
                       f"got '{p['algorithm']}'")
        p["ranks"] = p["dp"] * p["pq"] * p["pkv"]
        if p["algorithm"] == "ulysses" and p["heads"] % (p["pq"] * p["pkv"]) != 0:
            raise Fail(f"{where}: ulysses splits the heads over pq x pkv = {p['pq'] * p['pkv']} "
                       f"ranks; expected it to divide heads = {p['heads']}")
        if p["algorithm"] == "usp" and p["heads"] % p["pq"] != 0:
            raise Fail(f"{where}: usp splits the heads over the pq = {p['pq']} ranks of a column; "
                       f"expected pq to divide heads = {p['heads']}")
        points.append(p)
    if not points:
        raise Fail(f"{path}: no points")
    traced = [p for p in points if p["trace"]]
    if len(traced) > 1:
        raise Fail(f"{traced[1]['line']}: a second point marked 'trace' (the first is "
                   f"{traced[0]['line']})")
    if not traced:
        max(points, key=lambda p: (p["ranks"], -p["index"]))["trace"] = 1
    return points


def cmd_points(args):
    for p in read_points(args.file):
        print("\t".join(str(p[k]) for k in POINT_FIELDS))


# ----------------------------------------------------------------------------------- shard


def cmd_shard(args):
    """A token stream that is mostly a deterministic chain (something to learn)."""
    points = read_points(args.points)
    n = max(200000, max(p["batch"] * p["seq_len"] * p["dp"] for p in points) * (args.steps + 1))
    vocab = min(min(p["vocab"] for p in points), 65535)
    rng, toks, prev = random.Random(7), [], 0
    for _ in range(n):
        prev = (prev * 7 + 3) % vocab if rng.random() < 0.7 else rng.randrange(vocab)
        toks.append(prev)
    with open(args.out, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
        f.write(struct.pack("<%dH" % n, *toks))


# ------------------------------------------------------------------------------------- log


def read_log(path):
    """{type: records} of a log.jsonl; "step" holds the last record of each step, in step order."""
    try:
        with open(path, encoding="utf-8") as f:
            records = [json.loads(line) for line in f if line.strip()]
    except OSError as e:
        raise Fail(f"{path}: cannot read the trainer's log: {e.strerror}")
    except ValueError as e:
        raise Fail(f"{path}: not JSON lines: {e}")
    by_type, steps = {}, {}
    for r in records:
        by_type.setdefault(r.get("type"), []).append(r)
        if r.get("type") == "step":
            steps[r["step"]] = r
    by_type["step"] = [steps[s] for s in sorted(steps)]
    return by_type


def last(log, kind, path):
    if not log.get(kind):
        raise Fail(f"{path}: no '{kind}' record (did the run finish?)")
    return log[kind][-1]


def peak_gflops(log, path):
    return last(log, "summary", path)["peak_flops"] / 1e9


def cmd_peak(args):
    print("%.6g" % peak_gflops(read_log(args.log), args.log))


def measure(log, path, warm):
    """The row's measured numbers from a trainer's log (see the module comment)."""
    steps = log["step"]
    timed = steps[warm:]
    if not timed:
        raise Fail(f"{path}: {len(steps)} steps logged, none left after {warm} warm steps")
    for r in timed:
        for k in ("compute_frac", "exposed_comm_frac", "wait_frac"):
            if k not in r:
                raise Fail(f"{path}: step {r['step']} has no {k} (run with the timeline on)")
    n = len(timed)
    ms = sum(r["ms"] for r in timed) / n
    tokens = sum(r["tokens_per_s"] * r["ms"] for r in timed) / n / 1e3
    flop_frac_ms = sum(r["mfu"] * r["ms"] for r in timed) / n   # mfu x ms: FLOPs / peak
    frac = {k: sum(r[k] for r in timed) / n
            for k in ("compute_frac", "exposed_comm_frac", "wait_frac")}
    timeline = last(log, "timeline", path)
    per_step = [b / timeline["steps"] for b in timeline["step_comm_bytes_per_rank"]]
    options = last(log, "config", path)["options"]
    return dict(overlap=int(options["overlap"]), steps_timed=n, ms_per_step=ms,
                tokens_per_s=tokens * 1e3 / ms, mfu=flop_frac_ms / ms,
                compute_ms=ms * frac["compute_frac"],
                exposed_comm_ms=ms * frac["exposed_comm_frac"], wait_ms=ms * frac["wait_frac"],
                comm_bytes_per_rank=round(max(per_step)), peak_gflops=peak_gflops(log, path),
                tokens_per_step=round(tokens), steps_logged=len(steps),
                comm_bytes_per_rank_all=[round(b) for b in per_step], **frac)


def csv_value(v):
    return ("%.6g" % v) if isinstance(v, float) else str(v)


def cmd_row(args):
    point = dict(zip(POINT_FIELDS, args.point.split("\t")))
    if len(point) != len(POINT_FIELDS):
        raise Fail(f"--point: expected {len(POINT_FIELDS)} tab-separated fields")
    for k in INT_FIELDS:
        point[k] = int(point[k])
    row = {k: point[k] for k in KEY + ("ranks",)}
    row.update(measure(read_log(args.log), args.log, args.warm))
    row["log"] = args.log
    if args.trace:
        row["trace"] = args.trace
    csv_path = os.path.join(args.out, "sweep.csv")
    new = not os.path.exists(csv_path)
    with open(csv_path, "a", encoding="utf-8") as f:
        if new:
            f.write(",".join(COLUMNS) + "\n")
        f.write(",".join(csv_value(row[k]) for k in COLUMNS) + "\n")
    with open(os.path.join(args.out, "sweep.jsonl"), "a", encoding="utf-8") as f:
        ordered = {k: row[k] for k in COLUMNS} | {k: v for k, v in row.items() if k not in COLUMNS}
        f.write(json.dumps({k: float("%.6g" % v) if isinstance(v, float) else v
                            for k, v in ordered.items()}) + "\n")
    print("  %9.1f ms/step %10.0f tokens/s  MFU %5.2f%%  compute %5.1f%%  exposed comm %5.1f%%  "
          "wait %5.1f%%  %s B/rank/step" %
          (row["ms_per_step"], row["tokens_per_s"], 100 * row["mfu"], 100 * row["compute_frac"],
           100 * row["exposed_comm_frac"], 100 * row["wait_frac"],
           format(row["comm_bytes_per_rank"], ",")))


def read_rows(out):
    path = os.path.join(out, "sweep.jsonl")
    try:
        with open(path, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except OSError as e:
        raise Fail(f"{path}: cannot read: {e.strerror}")
    for r in rows:   # sweeps written before the window column ran causal
        r.setdefault("window", 0)
    return rows


# ------------------------------------------------------------------------------------ plot


def run_gnuplot(script):
    """Runs a gnuplot script; a failure is an error with gnuplot's own message."""
    done = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    if done.returncode != 0:
        why = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        raise Fail(f"gnuplot failed: {why[-1]}")


def panel_title(shape):
    title = "%s L=%d C=%d H=%d V=%d, T=%d, B=%d" % tuple(shape[:7])
    return title + (", window %d" % shape[7] if shape[7] else "")


def series_of(rows):
    """Per algorithm the best mesh (most tokens/s) at each P, the other meshes, and the points
    without sequence parallelism (pq = pkv = 1: the algorithm plays no part), as
    [(name, style, rows)]."""
    series, no_sp = [], sorted((r for r in rows if r["pq"] * r["pkv"] == 1),
                               key=lambda r: r["ranks"])
    if no_sp:
        series.append(("no seq. parallelism",
                       "linespoints pt 5 lc rgb 'black'", no_sp))
    for algo in ALGORITHMS:
        mine = [r for r in rows if r["algorithm"] == algo and r["pq"] * r["pkv"] > 1]
        best = {}
        for r in mine:
            if r["ranks"] not in best or r["tokens_per_s"] > best[r["ranks"]]["tokens_per_s"]:
                best[r["ranks"]] = r
        if not best:
            continue
        c = COLOURS[algo]
        series.append((algo, f"linespoints pt 7 lw 2 lc rgb '{c}'",
                       [best[p] for p in sorted(best)]))
        others = [r for r in mine if r is not best[r["ranks"]]]
        if others:
            series.append((None, f"points pt 6 ps 1.3 lc rgb '{c}'", others))
    return series


# Figures: (file, y label, value of a row, log y).
FIGURES = (
    ("throughput.png", "tokens/s", lambda r: r["tokens_per_s"], True),
    ("exposed_comm.png", "exposed communication (% of step, rank 0)",
     lambda r: 100 * r["exposed_comm_ms"] / r["ms_per_step"], False),
    ("bytes_per_rank.png", "bytes received per step, busiest rank (measured)",
     lambda r: r["comm_bytes_per_rank"], True),
)


def cmd_plot(args):
    rows = read_rows(args.dir)
    shapes = sorted({tuple(r[k] for k in SHAPE) for r in rows},
                    key=lambda s: (s[0], s[1], s[2], s[5], s[6], s[3], s[4], s[7]))
    ranks = sorted({r["ranks"] for r in rows})
    cols = 1 if len(shapes) == 1 else 2
    nrows = (len(shapes) + cols - 1) // cols
    with tempfile.TemporaryDirectory() as tmp:
        for png, ylabel, value, logy in FIGURES:
            if png == "bytes_per_rank.png":   # nothing to draw on a log scale at 0 bytes
                keep = [r for r in rows if r["comm_bytes_per_rank"] > 0]
            else:
                keep = rows
            gp = [f"set terminal pngcairo size {760 * cols},{420 * nrows + 60} font ',10' "
                  "noenhanced",
                  f"set output '{os.path.join(args.dir, png)}'",
                  f"set multiplot layout {nrows},{cols} title '{ylabel} against ranks P = dp x "
                  "pq x pkv; lines: the best mesh per P, open circles: other meshes "
                  "(sweep.csv)'",
                  "set logscale x 2", "set grid",
                  "set key outside right top Left reverse samplen 2 width -5 font ',8'",
                  "set xlabel 'ranks P'", f"set ylabel '{ylabel}'",
                  "set xtics (%s)" % ", ".join(str(p) for p in ranks),
                  "set xrange [%g:%g]" % (ranks[0] / 1.3, ranks[-1] * 1.3),
                  "set logscale y" if logy else "unset logscale y; set yrange [0:100]"]
            for i, shape in enumerate(shapes):
                mine = [r for r in keep if tuple(r[k] for k in SHAPE) == shape]
                clauses = []
                for j, (name, style, srows) in enumerate(series_of(mine)):
                    dat = os.path.join(tmp, f"{png}.{i}.{j}.dat")
                    with open(dat, "w", encoding="utf-8") as f:
                        f.writelines("%d %.6g\n" % (r["ranks"], value(r)) for r in srows)
                    title = f"title '{name}'" if name else "notitle"
                    clauses.append(f"'{dat}' using 1:2 with {style} {title}")
                gp.append(f"set title '{panel_title(shape)}'")
                gp.append("plot " + ", ".join(clauses) if clauses else
                          "set label 1 'no data' at graph 0.5,0.5 center; plot 1/0 notitle; "
                          "unset label 1")
            gp.append("unset multiplot")
            run_gnuplot("\n".join(gp) + "\n")


# ----------------------------------------------------------------------------------- check


def cmd_check(args):
    rows = read_rows(args.dir)
    have = {tuple(r[k] for k in KEY): r for r in rows}
    for p in read_points(args.points):
        r = have.get(tuple(p[k] for k in KEY))
        if r is None:
            raise Fail(f"{p['line']}: point missing from {args.dir}/sweep.jsonl")
        for k in ("ms_per_step", "tokens_per_s", "mfu", "compute_ms", "peak_gflops"):
            if not (isinstance(r[k], (int, float)) and math.isfinite(r[k]) and r[k] > 0):
                raise Fail(f"{p['line']}: {k} = {r[k]} (expected finite and positive)")
        for k in ("exposed_comm_ms", "wait_ms", "comm_bytes_per_rank"):
            if not (math.isfinite(r[k]) and r[k] >= 0):
                raise Fail(f"{p['line']}: {k} = {r[k]} (expected finite and >= 0)")
        if p["pq"] * p["pkv"] * p["dp"] > 1 and r["comm_bytes_per_rank"] <= 0:
            raise Fail(f"{p['line']}: {p['ranks']} ranks but no bytes communicated")
    with open(os.path.join(args.dir, "sweep.csv"), encoding="utf-8") as f:
        table = list(csv.reader(f))
    if tuple(table[0]) != COLUMNS or len(table) != len(rows) + 1:
        raise Fail(f"{args.dir}/sweep.csv: header or row count differs from sweep.jsonl")
    for png in PNGS + ("timeline_strip.png",):
        path = os.path.join(args.dir, png)
        if not os.path.isfile(path) or os.path.getsize(path) == 0:
            raise Fail(f"{path}: missing or empty")
    print(f"check: {len(rows)} points, {len(PNGS) + 1} PNGs in {args.dir}: ok")


def report_failures(fn, *args):
    """Runs fn(*args); a Fail becomes one "error: ..." line on stderr and exit status 1."""
    try:
        fn(*args)
    except Fail as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)

    def command(name, *positional, **options):   # options: --NAME of a type, required but --trace
        s = sub.add_parser(name)
        for arg in positional:
            s.add_argument(arg)
        for opt, kind in options.items():
            s.add_argument("--" + opt, type=kind, required=opt != "trace", default="")

    command("points", "file")
    command("shard", "out", points=str, steps=int)
    command("peak", "log")
    command("row", "log", point=str, warm=int, out=str, trace=str)
    command("plot", "dir")
    command("check", "dir", points=str)
    args = ap.parse_args(argv)
    return report_failures(globals()["cmd_" + args.cmd], args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
