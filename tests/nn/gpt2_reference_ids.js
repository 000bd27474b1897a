// Prints the GPT-2 token ids of a UTF-8 file as a JSON array, computed by an independent
// implementation from the npm registry, for the tokenizer tests to compare with.
//   node gpt2_reference_ids.js NODE_MODULES js-tiktoken|gpt-3-encoder FILE
// Exits 1 with one line on stderr for bad arguments, a missing package or a file that is not
// valid UTF-8 (both libraries take JavaScript strings, which cannot hold invalid UTF-8).
"use strict";
const fs = require("fs");
const path = require("path");

const [modules, library, file] = process.argv.slice(2);
if (!modules || !file || !["js-tiktoken", "gpt-3-encoder"].includes(library)) {
  console.error("usage: node gpt2_reference_ids.js NODE_MODULES js-tiktoken|gpt-3-encoder FILE");
  process.exit(1);
}
let text;
try {
  text = new TextDecoder("utf-8", { fatal: true }).decode(fs.readFileSync(file));
} catch (error) {
  console.error(`${file}: ${error.message}`);
  process.exit(1);
}
const encode =
  library === "js-tiktoken"
    ? (t) => require(path.join(modules, "js-tiktoken")).getEncoding("gpt2").encode(t)
    : (t) => require(path.join(modules, "gpt-3-encoder")).encode(t);
process.stdout.write(JSON.stringify(Array.from(encode(text))) + "\n");
