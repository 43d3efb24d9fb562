#!/usr/bin/env python3
"""Checks a Chrome trace written by comm/timeline_trace.c (timeline_merge_parts).

    python3 tools/check_trace.py TRACE [--ranks N] [--bytes FILE]

Loads TRACE (one JSON object with a traceEvents list) and checks: one named process per rank
0..N-1 (N from --ranks, else the number of named processes); every complete event (ph "X") has a
string name, a finite numeric ts, a finite dur >= 0, a pid in 0..N-1 and a tid that a thread_name
event of that pid names; comm-flight events carry integer args.bytes >= 0. Prints one JSON line:
    {"ranks": N, "events": E, "tracks": {"<rank>": named tracks}, "bytes": {"<rank>": comm-flight
     bytes}, "by_kind": {"<cat>": events}}
With --bytes FILE (a JSON object {"<rank>": bytes}) the per-rank comm-flight bytes must equal the
file's exactly (a rank the file leaves out must have 0). Exit 0 on success; 1 with a one-line
message on stderr otherwise. Standard library only.
"""
import argparse
import json
import math
import sys


class CheckError(Exception):
    """A problem with the trace or the arguments: one line for the user."""


class Parser(argparse.ArgumentParser):
    """Argument errors exit 1 with one line, like every other failure here."""

    def error(self, message):
        raise CheckError(message)


def is_number(x):
    # bool is an int in Python, but not a number in a trace.
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def load_json(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise CheckError(f"{path}: cannot read {what}: {e.strerror}")
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckError(f"{path}: not valid JSON: {e}")


def trace_events(trace, path):
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise CheckError(f"{path}: expected an object with a traceEvents list")
    events = trace["traceEvents"]
    for i, e in enumerate(events):
        if not isinstance(e, dict) or not isinstance(e.get("ph"), str):
            raise CheckError(f"{path}: traceEvents[{i}]: expected an object with a string ph")
    return events


def metadata_names(events, kind):
    """{pid: name} for process_name, {(pid, tid): name} for thread_name."""
    names = {}
    for i, e in enumerate(events):
        if e["ph"] != "M" or e.get("name") != kind:
            continue
        name = e["args"].get("name") if isinstance(e.get("args"), dict) else None
        if not isinstance(name, str) or not name or not is_int(e.get("pid")):
            raise CheckError(f"traceEvents[{i}]: {kind} without an integer pid and a name")
        if kind == "thread_name":
            if not is_int(e.get("tid")):
                raise CheckError(f"traceEvents[{i}]: thread_name without an integer tid")
            names[(e["pid"], e["tid"])] = name
        else:
            names[e["pid"]] = name
    return names


def check_processes(processes, ranks):
    if ranks is None:
        ranks = len(processes)
    if ranks < 1:
        raise CheckError("no named process (process_name metadata) in the trace")
    missing = [r for r in range(ranks) if r not in processes]
    if missing:
        raise CheckError(f"rank {missing[0]}: no named process (pid {missing[0]}) of {ranks} ranks")
    extra = sorted(p for p in processes if not 0 <= p < ranks)
    if extra:
        raise CheckError(f"process pid {extra[0]} outside ranks 0..{ranks - 1}")
    return ranks


def check_complete_event(i, e, ranks, threads):
    if not isinstance(e.get("name"), str):
        raise CheckError(f"traceEvents[{i}]: X event without a string name")
    # The name as JSON (escaped), so that a message stays on one line.
    where = f"traceEvents[{i}] {json.dumps(e['name'])}"
    if not is_number(e.get("ts")):
        raise CheckError(f"{where}: ts {e.get('ts')!r} is not a finite number")
    if not is_number(e.get("dur")) or e["dur"] < 0:
        raise CheckError(f"{where}: dur {e.get('dur')!r} is not a number >= 0")
    pid, tid = e.get("pid"), e.get("tid")
    if not is_int(pid) or not 0 <= pid < ranks:
        raise CheckError(f"{where}: pid {pid!r} outside ranks 0..{ranks - 1}")
    if (pid, tid) not in threads:
        raise CheckError(f"{where}: tid {tid!r} of rank {pid} has no thread_name")
    if e.get("cat") == "comm-flight":
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        if not is_int(args.get("bytes")) or args["bytes"] < 0:
            raise CheckError(f"{where}: comm-flight without integer args.bytes >= 0")
        return args["bytes"]
    return 0


def summarize(path, ranks):
    trace = load_json(path, "the trace")
    try:
        return summarize_events(trace_events(trace, path), ranks)
    except CheckError as e:
        message = str(e)
        raise CheckError(message if message.startswith(path + ":") else f"{path}: {message}")


def summarize_events(events, ranks):
    processes = metadata_names(events, "process_name")
    threads = metadata_names(events, "thread_name")
    ranks = check_processes(processes, ranks)
    tracks = {str(r): 0 for r in range(ranks)}
    for pid, _ in threads:
        if 0 <= pid < ranks:
            tracks[str(pid)] += 1
    comm_bytes = {str(r): 0 for r in range(ranks)}
    by_kind = {}
    count = 0
    for i, e in enumerate(events):
        if e["ph"] != "X":
            continue
        nbytes = check_complete_event(i, e, ranks, threads)
        comm_bytes[str(e["pid"])] += nbytes
        cat = e.get("cat") if isinstance(e.get("cat"), str) else ""
        by_kind[cat] = by_kind.get(cat, 0) + 1
        count += 1
    return {"ranks": ranks, "events": count, "tracks": tracks, "bytes": comm_bytes,
            "by_kind": dict(sorted(by_kind.items()))}


def check_bytes(summary, path):
    expected = load_json(path, "the expected bytes")
    if not isinstance(expected, dict):
        raise CheckError(f"{path}: expected a JSON object {{\"<rank>\": bytes}}")
    ranks = summary["ranks"]
    for key, value in expected.items():
        if not key.isdigit() or int(key) >= ranks or not is_int(value):
            raise CheckError(f"{path}: entry {key!r}: {value!r}: expected a rank 0..{ranks - 1} "
                             f"and an integer")
    want = {str(r): 0 for r in range(ranks)}
    want.update({str(int(k)): v for k, v in expected.items()})
    wrong = [r for r in want if want[r] != summary["bytes"][r]]
    if wrong:
        diffs = ", ".join(f"rank {r}: trace {summary['bytes'][r]}, expected {want[r]}"
                          for r in wrong)
        raise CheckError(f"comm bytes differ from {path}: {diffs}")


def main(argv):
    parser = Parser(description="Checks a Chrome trace of comm/timeline_trace.c.")
    parser.add_argument("trace")
    parser.add_argument("--ranks", type=int, help="ranks expected (default: named processes)")
    parser.add_argument("--bytes", metavar="FILE", help='JSON {"<rank>": bytes} to match exactly')
    try:
        args = parser.parse_args(argv)
        if args.ranks is not None and args.ranks < 1:
            raise CheckError(f"--ranks {args.ranks}: expected a positive number")
        summary = summarize(args.trace, args.ranks)
        if args.bytes:
            check_bytes(summary, args.bytes)
    except CheckError as e:
        print(f"check_trace: {e}", file=sys.stderr)
        return 1
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
