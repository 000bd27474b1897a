// Loading byte-level BPE tokenizers from the files beyond GPT-2's own: Llama 3's tiktoken rank
// file (Meta's tokenizer.model: one "base64-bytes rank" line per token) and Hugging Face's
// tokenizer.json (a BPE model with byte-level pre-tokenization: GPT-2's, SmolLM's, Llama 3's).
// tokenizer_files.h recognizes them among other kinds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/data/bpe_tokenizer.h"

namespace mpitron::nn {

/// The number of ordinary (BPE) tokens of Llama 3; its special tokens follow them.
inline constexpr std::int32_t kLlama3BpeTokens = 128000;
/// Llama 3's "<|begin_of_text|>", the id llm.c's data scripts write before each document.
inline constexpr std::int32_t kLlama3BeginOfText = 128000;
/// Llama 3's "<|end_of_text|>".
inline constexpr std::int32_t kLlama3EndOfText = 128001;
/// Llama 3's "<|eot_id|>" (end of a chat turn).
inline constexpr std::int32_t kLlama3EndOfTurn = 128009;

/// The texts of Llama 3's 256 special tokens, ids 128000..128255 (Meta's tokenizer.py):
/// "<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>" .. "_3|>",
/// "<|start_header_id|>", "<|end_header_id|>", "<|reserved_special_token_4|>", "<|eot_id|>",
/// then "<|reserved_special_token_5|>" .. "<|reserved_special_token_250|>".
std::vector<std::string> llama3_special_tokens();

/// Whether `head` (a file's first bytes) starts like a tiktoken rank file: a base64 token, one
/// space, a decimal rank, a newline.
bool looks_like_tiktoken_ranks(std::string_view head);

/// Llama 3's tokenizer from its tiktoken rank file `path` (tokenizer.model): line r holds the
/// base64 bytes of token r and the rank r. The file must hold 128000 ranks (Llama 3's; other rank
/// files do not say which special tokens follow them); llama3_special_tokens() are added after
/// them, the pattern is kLlama3Pattern, and whole pieces encode first (tiktoken's rule). Throws
/// std::runtime_error "<path>:<line>: <what>" for a malformed line or a rank out of order, and
/// "<path>: <what>" for a count other than 128000 or a byte without a token.
BpeTokenizer load_tiktoken_tokenizer(const std::string& path);

/// The tokenizer of Hugging Face's tokenizer.json `path`, already parsed as `json`: model type
/// "BPE" with "vocab" (token text in gpt2_byte_to_unicode()'s characters -> id) and "merges"
/// ("left right" strings or [left, right] pairs, the rank being the position), "added_tokens"
/// (their "content" taken as bytes), no normalizer, and a pre_tokenizer that is byte-level with
/// GPT-2's pattern (ByteLevel, use_regex true), the same after individual digits (Digits with
/// individual_digits true, then ByteLevel: SmolLM's) or Llama 3's (a Split by Llama 3's regex,
/// then ByteLevel without regex); "ignore_merges" true makes whole pieces encode first. The
/// document start is "<|begin_of_text|>" if there is one, else "<|endoftext|>". Throws
/// std::runtime_error, one line starting "<path>: ", for anything else (another model type,
/// normalizer or pre_tokenizer, a token not in byte characters, a merge of unknown tokens, no
/// document start token).
BpeTokenizer load_hf_tokenizer(const nlohmann::json& json, const std::string& path);

/// The same, reading and parsing `path` first.
BpeTokenizer load_hf_tokenizer(const std::string& path);

}  // namespace mpitron::nn
