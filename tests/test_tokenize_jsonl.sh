#!/usr/bin/env bash
# build/tokenize --jsonl FIELD against the same JSON lines parsed by Node's JSON.parse and encoded
# by gpt-3-encoder (tests/tokenize_jsonl_node.js): the same shards byte for byte, on 1 and 3
# threads; and the one-line errors of bad lines.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=${PYTHON:-/usr/bin/python3}
TOK=$BUILD/tokenize
test_name=tokenize-jsonl
mkdir -p $BUILD/tmp
W=$(mktemp -d "$BUILD/tmp/test_tokenize_jsonl.XXXXXX")
. tests/checks.sh

# FineWeb-like lines: escaped and raw UTF-8, other fields of every JSON type, an empty text, a
# blank line, one document of 1.5 MB (two chunks), in two files.
"$PY" - "$W" <<'PYEOF' || exit 1
import glob, json, os, sys
w = sys.argv[1]
fortunes = sorted(f for f in glob.glob("/usr/share/games/fortunes/*") if os.path.isfile(f) and not f.endswith(".dat"))
text = "".join(open(f, encoding="utf-8", errors="replace").read() for f in fortunes)
docs = [t for t in text.split("\n%\n") if t][:300]
big = (text * 2)[:1500000]
lines_a, lines_b = [], []
for i, d in enumerate(docs):
    rec = {"id": f"<urn:uuid:{i}>", "dump": "CC-MAIN-2024-10", "text": d + " caf\u00e9 \u2014 \U0001F600",
           "language_score": 0.93, "token_count": i, "tags": ["a", {"b": None}], "ok": True}
    (lines_a if i % 2 else lines_b).append(json.dumps(rec, ensure_ascii=(i % 3 == 0)))
lines_a.insert(5, json.dumps({"text": "", "id": "empty"}))
lines_a.insert(9, "   ")
lines_b.insert(3, json.dumps({"meta": {"x": [1, 2]}, "text": big}))
open(f"{w}/a.jsonl", "w", encoding="utf-8").write("\n".join(lines_a) + "\n")
open(f"{w}/b.jsonl", "w", encoding="utf-8").write("\n".join(lines_b))   # no final newline
PYEOF
cat "$W/a.jsonl" <(echo) "$W/b.jsonl" > "$W/ab.jsonl"
node tests/tokenize_jsonl_node.js "$W/ab.jsonl" text 0.1 "$W/ref" j || exit 1
for t in 1 3; do
  "$TOK" --jsonl text --val-fraction 0.1 --shard-tokens 1000000000 --threads $t --out-dir "$W/out$t" \
    --name j "$W/a.jsonl" "$W/b.jsonl" > "$W/out$t.log" 2>&1
  check "--threads $t: exit 0 ($(grep -h '^documents' "$W/out$t.log"))" test $? = 0
  check "--threads $t: the shards of JSON.parse and gpt-3-encoder, byte for byte" diff -r "$W/ref" "$W/out$t"
done
check "the configuration names the field" grep -q '^  documents       the "text" string of each JSON line$' "$W/out1.log"

# bad_case NAME LINE EXPECTED: one line in a file, refused with EXPECTED in one line.
bad_case() {
  printf '%s\n' "$2" > "$W/$1.jsonl"
  "$TOK" --jsonl text --out-dir "$W/bad" --name b "$W/$1.jsonl" > /dev/null 2> "$W/$1.err"
  local rc=$?
  check "$1: exit $rc, one line: $(head -c 120 "$W/$1.err")" eval \
    "[ $rc = 1 ] && [ \$(wc -l < '$W/$1.err') = 1 ] && grep -qF -- '$W/$1.jsonl: $3' '$W/$1.err'"
}
bad_case nofield '{"body": "x"}' 'line 1: expected a string field "text" (--jsonl), found none'
bad_case number '{"text": 5}' 'line 1: "text": at byte 9: expected a string'
bad_case broken '{"text": "x"' "line 1: at byte 12: expected"
bad_case array '["text"]' 'line 1: at byte 0: expected'
"$TOK" --jsonl text --doc-sep x "$W/a.jsonl" > /dev/null 2> "$W/sep.err"
check "--jsonl with --doc-sep: refused" grep -q '^error: --doc-sep: with --jsonl every line is a document; drop --doc-sep$' "$W/sep.err"
finish
