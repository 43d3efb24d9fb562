// The shards build/tokenize --jsonl FIELD should write, written independently: each non-blank
// line parsed by JSON.parse, its FIELD string encoded by the npm package gpt-3-encoder after the
// end-of-text token (empty strings are no document), document i (counting from 0) to validation
// when floor((i + 1) F) > floor(i F), one train shard. tests/suites/tokenizer.list compares them
// byte for byte.
//
// usage: node tests/tokenize_jsonl_node.js IN.jsonl FIELD VAL_FRACTION OUT_DIR NAME
'use strict';
const fs = require('fs');
const path = require('path');

if (process.argv.length !== 7) {
  process.stderr.write('usage: node tests/tokenize_jsonl_node.js IN.jsonl FIELD VAL_FRACTION OUT_DIR NAME\n');
  process.exit(2);
}
const [file, field, fracText, outDir, name] = process.argv.slice(2);
const frac = Number(fracText);
const { encodeLong } = require('./bpe_node_encode.js');   // encode() in chunks: linear time

const train = [];
const val = [];
let doc = 0;
for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
  if (line.trim() === '') continue;
  const text = JSON.parse(line)[field];
  if (typeof text !== 'string') throw new Error(`a line without a string "${field}"`);
  if (text === '') continue;
  const out = Math.floor((doc + 1) * frac) > Math.floor(doc * frac) ? val : train;
  out.push(50256);
  for (const ids of encodeLong(text)) for (const id of ids) out.push(id);
  doc++;
}

function writeShard(p, ids) {
  const header = Buffer.alloc(1024);
  [20240520, 1, ids.length].forEach((v, i) => header.writeInt32LE(v, 4 * i));
  const body = Buffer.alloc(2 * ids.length);
  ids.forEach((id, i) => body.writeUInt16LE(id, 2 * i));
  fs.writeFileSync(p, Buffer.concat([header, body]));
}
fs.mkdirSync(outDir, { recursive: true });
if (train.length) writeShard(path.join(outDir, `${name}_train_000001.bin`), train);
if (val.length) writeShard(path.join(outDir, `${name}_val_000000.bin`), val);
