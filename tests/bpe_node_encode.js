// Encodes a UTF-8 text file with the npm package gpt-3-encoder and prints the token ids, one per
// line, for tests/test_bpe.c to compare against the C encoder. Required as a module, it gives
// encodeLong(text, encoderDir) to the other Node references (tests/tokenize_jsonl_node.js).
//
// usage: node tests/bpe_node_encode.js FILE [ENCODER_DIR]
//
// gpt-3-encoder's encode() appends to its result with Array.concat, which is quadratic in the
// length of the text, so the text is encoded in chunks. A chunk ends only where a non-whitespace
// character is followed by a whitespace character: no match of GPT-2's pattern spans that point
// and no match before it looks past it, so the concatenated ids equal those of one encode() call.
'use strict';
const fs = require('fs');
const path = require('path');

const defaultEncoderDir = path.join(__dirname, '..', 'tools', 'node', 'node_modules', 'gpt-3-encoder');

// The ids of text, in chunks of about 4096 characters; an array of arrays of ids.
function encodeLong(text, encoderDir) {
  const { encode } = require(path.resolve(encoderDir || defaultEncoderDir));
  const isSpace = /\s/;
  const targetChunk = 4096;
  const out = [];
  let start = 0;
  while (start < text.length) {
    let end = Math.min(start + targetChunk, text.length);
    while (end < text.length && !(isSpace.test(text[end]) && !isSpace.test(text[end - 1]))) end++;
    const ids = encode(text.slice(start, end));
    for (const id of ids) {
      if (typeof id !== 'number') throw new Error(`gpt-3-encoder produced a non-numeric id near offset ${start}`);
    }
    out.push(ids);
    start = end;
  }
  return out;
}
module.exports = { encodeLong };

if (require.main === module) {
  if (process.argv.length < 3 || process.argv.length > 4) {
    process.stderr.write('usage: node tests/bpe_node_encode.js FILE [ENCODER_DIR]\n');
    process.exit(2);
  }
  const file = process.argv[2];
  let chunks;
  try {
    chunks = encodeLong(fs.readFileSync(file, 'utf8'), process.argv[3]);
  } catch (e) {
    process.stderr.write(`${file}: ${e.message}\n`);
    process.exit(1);
  }
  process.stdout.write(chunks.map((ids) => ids.join('\n')).filter((s) => s.length > 0).join('\n') + '\n');
}
