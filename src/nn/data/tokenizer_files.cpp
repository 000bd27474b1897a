#include "nn/data/tokenizer_files.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "nn/data/gpt2_tokenizer_files.h"
#include "nn/data/hf_tokenizer_files.h"

namespace mpitron::nn {

namespace fs = std::filesystem;

namespace {

std::runtime_error not_a_tokenizer(const std::string& path) {
  return std::runtime_error(
      fmt::format("{}: not a tokenizer (expected GPT-2's encoder.json + vocab.bpe, llm.c's "
                  "gpt2_tokenizer.bin, a tiktoken rank file such as Llama 3's tokenizer.model, "
                  "or Hugging Face's tokenizer.json)",
                  path));
}

// The content a file starts with, for recognizing it.
enum class TokenizerFileKind { llmc, json, vocab_bpe, tiktoken, other };

TokenizerFileKind tokenizer_file_kind(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<char, 256> head{};
  in.read(head.data(), head.size());
  const std::string_view text(head.data(), static_cast<std::size_t>(in.gcount()));
  std::uint32_t magic = 0;
  if (text.size() >= sizeof magic) std::memcpy(&magic, text.data(), sizeof magic);
  if (magic == kLlmcTokenizerMagic) return TokenizerFileKind::llmc;
  if (looks_like_tiktoken_ranks(text)) return TokenizerFileKind::tiktoken;
  const std::size_t start = text.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos) return TokenizerFileKind::other;
  if (text[start] == '{') return TokenizerFileKind::json;
  if (text.substr(start).starts_with("#version")) return TokenizerFileKind::vocab_bpe;
  return TokenizerFileKind::other;
}

BpeTokenizer load_pair_beside(const std::string& path, const std::string& other_name,
                              bool path_is_encoder) {
  const fs::path parent = fs::path(path).parent_path();
  const std::string other = (parent.empty() ? fs::path(other_name) : parent / other_name).string();
  if (!fs::is_regular_file(other)) {
    throw std::runtime_error(fmt::format("{}: is {}, but {} is missing beside it (both are needed)",
                                         path, path_is_encoder ? "encoder.json" : "vocab.bpe",
                                         other));
  }
  return path_is_encoder ? load_openai_tokenizer(path, other) : load_openai_tokenizer(other, path);
}

// A JSON file: Hugging Face's tokenizer.json when it has a "model", GPT-2's encoder.json when it
// maps text to integers.
BpeTokenizer load_json(const std::string& path) {
  const nlohmann::json json = nlohmann::json::parse(read_tokenizer_file(path), nullptr, false);
  if (json.is_object() && json.contains("model") && json["model"].is_object())
    return load_hf_tokenizer(json, path);
  if (!json.is_object() || json.empty() || !json.begin()->is_number_integer())
    throw not_a_tokenizer(path);
  return load_pair_beside(path, "vocab.bpe", true);
}

}  // namespace

BpeTokenizer load_tokenizer(const std::string& path) {
  std::error_code error;
  if (fs::is_directory(path, error)) {
    const fs::path folder(path);
    const auto has = [&](const char* name) { return fs::is_regular_file(folder / name, error); };
    if (has("tokenizer.json")) return load_tokenizer((folder / "tokenizer.json").string());
    if (has("encoder.json") && has("vocab.bpe"))
      return load_openai_tokenizer((folder / "encoder.json").string(),
                                   (folder / "vocab.bpe").string());
    if (has("gpt2_tokenizer.bin"))
      return load_llmc_tokenizer((folder / "gpt2_tokenizer.bin").string());
    if (has("tokenizer.model")) return load_tokenizer((folder / "tokenizer.model").string());
    throw not_a_tokenizer(path);
  }
  if (!fs::exists(path, error))
    throw std::runtime_error(fmt::format("{}: no such file or folder", path));
  switch (tokenizer_file_kind(path)) {
    case TokenizerFileKind::llmc:
      return load_llmc_tokenizer(path);
    case TokenizerFileKind::json:
      return load_json(path);
    case TokenizerFileKind::vocab_bpe:
      return load_pair_beside(path, "encoder.json", false);
    case TokenizerFileKind::tiktoken:
      return load_tiktoken_tokenizer(path);
    case TokenizerFileKind::other:
      break;
  }
  throw not_a_tokenizer(path);
}

}  // namespace mpitron::nn
