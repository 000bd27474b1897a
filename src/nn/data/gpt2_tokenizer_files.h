// Loading GPT-2's tokenizer from the files it is published in: OpenAI's encoder.json and
// vocab.bpe (GPT-2's release, Radford et al. 2019), or llm.c's gpt2_tokenizer.bin (Karpathy's
// llm.c, written by its train_gpt2.py). tokenizer_files.h recognizes them among other kinds.
#pragma once

#include <cstdint>
#include <string>

#include "nn/data/bpe_tokenizer.h"

namespace mpitron::nn {

/// The first uint32 of llm.c's gpt2_tokenizer.bin.
inline constexpr std::uint32_t kLlmcTokenizerMagic = 20240328;

/// The bytes of the file `path`. Throws std::runtime_error "<path>: cannot read: <reason>".
std::string read_tokenizer_file(const std::string& path);

/// The tokenizer of OpenAI's encoder.json (a JSON object from token text, in
/// gpt2_byte_to_unicode()'s characters, to id; ids 0..n-1 once each, "<|endoftext|>" among them)
/// and vocab.bpe ("#version" line, then one merge "left right" per line, the rank being its
/// position). Throws std::runtime_error "<file>: <what>" (with the line for vocab.bpe) for an
/// unreadable or malformed file.
BpeTokenizer load_openai_tokenizer(const std::string& encoder_json, const std::string& vocab_bpe);

/// The tokenizer of llm.c's gpt2_tokenizer.bin: a header of 256 uint32 (little-endian: magic
/// 20240328, version 1 or 2, vocabulary size, and for version 2 the end-of-text id; version 1
/// means kGpt2EndOfText), then per token id a uint8 length and that many bytes. The file has no
/// merges: as in tiktoken, any two tokens whose bytes concatenate to token t merge with rank t
/// (the end-of-text token excepted), which encodes as GPT-2's merges do because GPT-2's ids
/// follow its merge order. Throws std::runtime_error "<path>: <what>" for an unreadable, short,
/// or otherwise malformed file (bad magic, unknown version, truncated token, bytes after the
/// last token).
BpeTokenizer load_llmc_tokenizer(const std::string& path);

}  // namespace mpitron::nn
