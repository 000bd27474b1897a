// Loading GPT-2's tokenizer from the files it is published in: OpenAI's encoder.json and
// vocab.bpe (GPT-2's release, Radford et al. 2019), or llm.c's gpt2_tokenizer.bin (Karpathy's
// llm.c, written by its train_gpt2.py).
#pragma once

#include <cstdint>
#include <string>

#include "nn/data/gpt2_tokenizer.h"

namespace mpitron::nn {

/// The first uint32 of llm.c's gpt2_tokenizer.bin.
inline constexpr std::uint32_t kLlmcTokenizerMagic = 20240328;

/// The tokenizer of `path`, whatever its form: a folder holding encoder.json and vocab.bpe (or,
/// failing those, gpt2_tokenizer.bin), either of encoder.json and vocab.bpe (the other must sit
/// beside it under its usual name; files are recognized by content, not name), or an llm.c
/// gpt2_tokenizer.bin (recognized by its magic). Throws std::runtime_error, one line naming
/// `path`: "<path>: not a GPT-2 tokenizer (expected encoder.json + vocab.bpe or llm.c's
/// gpt2_tokenizer.bin with magic 20240328)" for anything else, "<path>: no such file or folder",
/// and the errors of the two loaders below.
Gpt2Tokenizer load_tokenizer(const std::string& path);

/// The tokenizer of OpenAI's encoder.json (a JSON object from token text, in
/// gpt2_byte_to_unicode()'s characters, to id; ids 0..n-1 once each, "<|endoftext|>" among them)
/// and vocab.bpe ("#version" line, then one merge "left right" per line, the rank being its
/// position). Throws std::runtime_error "<file>: <what>" (with the line for vocab.bpe) for an
/// unreadable or malformed file.
Gpt2Tokenizer load_openai_tokenizer(const std::string& encoder_json, const std::string& vocab_bpe);

/// The tokenizer of llm.c's gpt2_tokenizer.bin: a header of 256 uint32 (little-endian: magic
/// 20240328, version 1 or 2, vocabulary size, and for version 2 the end-of-text id; version 1
/// means kGpt2EndOfText), then per token id a uint8 length and that many bytes. The file has no
/// merges: as in tiktoken, any two tokens whose bytes concatenate to token t merge with rank t
/// (the end-of-text token excepted), which encodes as GPT-2's merges do because GPT-2's ids
/// follow its merge order. Throws std::runtime_error "<path>: <what>" for an unreadable, short,
/// or otherwise malformed file (bad magic, unknown version, truncated token, bytes after the
/// last token).
Gpt2Tokenizer load_llmc_tokenizer(const std::string& path);

}  // namespace mpitron::nn
