// Writes HellaSwag's JSON lines as an llm.c multiple-choice eval file the way llm.c's
// dev/data/hellaswag.py and data_common.py's write_evalfile do (the context encoded alone, each
// ending as " " + ending; a 256 x int32 header, then per example 65535, bytes, index, label,
// completions, the context and each ending as a length and tokens, all uint16), with the npm
// package gpt-3-encoder: the reference build/tokenize_mc is compared with byte for byte.
//
// usage: node tests/mc_eval_node.js IN.jsonl OUT.bin
'use strict';
const fs = require('fs');
const path = require('path');

if (process.argv.length !== 4) {
  process.stderr.write('usage: node tests/mc_eval_node.js IN.jsonl OUT.bin\n');
  process.exit(2);
}
const { encode } = require(path.join(__dirname, '..', 'tools', 'node', 'node_modules', 'gpt-3-encoder'));

const lines = fs.readFileSync(process.argv[2], 'utf8').split('\n').filter((l) => l.trim() !== '');
const words = [];
let longest = 0;
lines.forEach((line, idx) => {
  const ex = JSON.parse(line);
  const ctx = encode(ex.ctx);
  const stream = [65535, 0, idx, ex.label, ex.endings.length, ctx.length, ...ctx];
  for (const e of ex.endings) {
    const t = encode(' ' + e);
    stream.push(t.length, ...t);
  }
  stream[1] = 2 * stream.length;
  longest = Math.max(longest, stream[1]);
  words.push(...stream);
});
const header = Buffer.alloc(1024);
[20240522, 1, lines.length, longest].forEach((v, i) => header.writeInt32LE(v, 4 * i));
const body = Buffer.alloc(2 * words.length);
words.forEach((w, i) => body.writeUInt16LE(w, 2 * i));
fs.writeFileSync(process.argv[3], Buffer.concat([header, body]));
