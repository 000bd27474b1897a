#include "nn/data/gpt2_tokenizer_files.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <unordered_map>

namespace mpitron::nn {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kLlmcHeaderWords = 256;

std::string read_tokenizer_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error(fmt::format("{}: cannot read", path));
  return bytes;
}

std::runtime_error not_a_tokenizer(const std::string& path) {
  return std::runtime_error(
      fmt::format("{}: not a GPT-2 tokenizer (expected encoder.json + vocab.bpe or llm.c's "
                  "gpt2_tokenizer.bin with magic {})",
                  path, kLlmcTokenizerMagic));
}

// Token text in gpt2_byte_to_unicode()'s characters (UTF-8) back to its bytes; nullopt when the
// text is not valid UTF-8 or holds a character that stands for no byte.
std::optional<std::string> unicode_to_bytes(std::string_view text) {
  static const std::unordered_map<char32_t, char> byte_of = [] {
    std::unordered_map<char32_t, char> map;
    const auto unicode = gpt2_byte_to_unicode();
    for (int b = 0; b < 256; ++b)
      map[unicode[b]] = static_cast<char>(b);
    return map;
  }();
  std::string bytes;
  for (std::size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    char32_t c = lead;
    std::size_t length = 1;
    if (lead >= 0xC0 && lead < 0xE0 && i + 1 < text.size()) {
      c = (lead & 0x1Fu) << 6 | (static_cast<unsigned char>(text[i + 1]) & 0x3Fu);
      length = 2;
    } else if (lead >= 0x80) {
      return std::nullopt;  // the stand-ins are all below U+0800
    }
    const auto found = byte_of.find(c);
    if (found == byte_of.end()) return std::nullopt;
    bytes += found->second;
    i += length;
  }
  return bytes;
}

// The content a file starts with, for recognizing it.
enum class TokenizerFileKind { llmc, encoder_json, vocab_bpe, other };

TokenizerFileKind tokenizer_file_kind(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<char, 64> head{};
  in.read(head.data(), head.size());
  const std::string_view text(head.data(), static_cast<std::size_t>(in.gcount()));
  std::uint32_t magic = 0;
  if (text.size() >= sizeof magic) std::memcpy(&magic, text.data(), sizeof magic);
  if (magic == kLlmcTokenizerMagic) return TokenizerFileKind::llmc;
  const std::size_t start = text.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos) return TokenizerFileKind::other;
  if (text[start] == '{') return TokenizerFileKind::encoder_json;
  if (text.substr(start).starts_with("#version")) return TokenizerFileKind::vocab_bpe;
  return TokenizerFileKind::other;
}

Gpt2Tokenizer load_pair_beside(const std::string& path, const std::string& other_name,
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

}  // namespace

Gpt2Tokenizer load_tokenizer(const std::string& path) {
  std::error_code error;
  if (fs::is_directory(path, error)) {
    const fs::path folder(path);
    if (fs::is_regular_file(folder / "encoder.json") && fs::is_regular_file(folder / "vocab.bpe"))
      return load_openai_tokenizer((folder / "encoder.json").string(),
                                   (folder / "vocab.bpe").string());
    if (fs::is_regular_file(folder / "gpt2_tokenizer.bin"))
      return load_llmc_tokenizer((folder / "gpt2_tokenizer.bin").string());
    throw not_a_tokenizer(path);
  }
  if (!fs::exists(path, error))
    throw std::runtime_error(fmt::format("{}: no such file or folder", path));
  switch (tokenizer_file_kind(path)) {
    case TokenizerFileKind::llmc:
      return load_llmc_tokenizer(path);
    case TokenizerFileKind::encoder_json:
      return load_pair_beside(path, "vocab.bpe", true);
    case TokenizerFileKind::vocab_bpe:
      return load_pair_beside(path, "encoder.json", false);
    case TokenizerFileKind::other:
      break;
  }
  throw not_a_tokenizer(path);
}

Gpt2Tokenizer load_openai_tokenizer(const std::string& encoder_json, const std::string& vocab_bpe) {
  const nlohmann::json encoder =
      nlohmann::json::parse(read_tokenizer_file(encoder_json), nullptr, false);
  if (!encoder.is_object() || encoder.empty())
    throw std::runtime_error(fmt::format("{}: not a JSON object of token ids", encoder_json));
  std::vector<std::string> tokens(encoder.size());
  std::vector<bool> seen(encoder.size());
  std::unordered_map<std::string, std::int32_t> id_of;
  std::int32_t end_of_text = -1;
  for (const auto& [text, value] : encoder.items()) {
    const auto id = value.is_number_integer() ? value.get<std::int64_t>() : -1;
    if (id < 0 || id >= static_cast<std::int64_t>(tokens.size()) || seen[id]) {
      throw std::runtime_error(fmt::format("{}: token {} has id {}, not one of 0..{} used once",
                                           encoder_json, nlohmann::json(text).dump(), value.dump(),
                                           tokens.size() - 1));
    }
    seen[id] = true;
    if (text == "<|endoftext|>") {
      end_of_text = static_cast<std::int32_t>(id);
      tokens[id] = text;
      continue;
    }
    const std::optional<std::string> bytes = unicode_to_bytes(text);
    if (!bytes) {
      throw std::runtime_error(fmt::format("{}: token {} is not spelled in GPT-2's byte characters",
                                           encoder_json, nlohmann::json(text).dump()));
    }
    tokens[id] = *bytes;
    id_of.emplace(*bytes, static_cast<std::int32_t>(id));
  }
  if (end_of_text < 0)
    throw std::runtime_error(fmt::format("{}: has no \"<|endoftext|>\" token", encoder_json));

  std::ifstream in(vocab_bpe, std::ios::binary);
  if (!in) {
    throw std::runtime_error(fmt::format("{}: cannot read: {}", vocab_bpe, std::strerror(errno)));
  }
  std::vector<Gpt2Merge> merges;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (number == 1 && line.starts_with("#version"))) continue;
    const std::size_t space = line.find(' ');
    const auto left = unicode_to_bytes(line.substr(0, space));
    const auto right =
        space == std::string::npos ? std::nullopt : unicode_to_bytes(line.substr(space + 1));
    const auto left_id = left ? id_of.find(*left) : id_of.end();
    const auto right_id = right ? id_of.find(*right) : id_of.end();
    const auto merged_id = left && right ? id_of.find(*left + *right) : id_of.end();
    if (left_id == id_of.end() || right_id == id_of.end() || merged_id == id_of.end()) {
      throw std::runtime_error(
          fmt::format("{}:{}: not a merge of two tokens of {} into a third: {}", vocab_bpe, number,
                      encoder_json, line.substr(0, 80)));
    }
    merges.push_back({left_id->second, right_id->second, merged_id->second,
                      static_cast<std::int32_t>(merges.size())});
  }
  if (in.bad()) throw std::runtime_error(fmt::format("{}: cannot read", vocab_bpe));
  try {
    return Gpt2Tokenizer(std::move(tokens), merges, end_of_text, encoder_json);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
}

Gpt2Tokenizer load_llmc_tokenizer(const std::string& path) {
  const std::string file = read_tokenizer_file(path);
  std::array<std::uint32_t, kLlmcHeaderWords> header{};
  if (file.size() < sizeof header) {
    throw std::runtime_error(fmt::format("{}: {} bytes, shorter than llm.c's {}-byte header", path,
                                         file.size(), sizeof header));
  }
  std::memcpy(header.data(), file.data(), sizeof header);
  if (header[0] != kLlmcTokenizerMagic) {
    throw std::runtime_error(fmt::format("{}: magic {}, expected {} (llm.c's gpt2_tokenizer.bin)",
                                         path, header[0], kLlmcTokenizerMagic));
  }
  if (header[1] != 1 && header[1] != 2) {
    throw std::runtime_error(
        fmt::format("{}: llm.c tokenizer version {}, expected 1 or 2", path, header[1]));
  }
  const std::uint32_t vocab = header[2];
  const std::int64_t end_of_text = header[1] == 2 ? header[3] : kGpt2EndOfText;
  if (vocab == 0 || vocab > (1u << 24) || end_of_text >= vocab) {
    throw std::runtime_error(
        fmt::format("{}: vocabulary of {} with end-of-text id {}", path, vocab, end_of_text));
  }
  std::vector<std::string> tokens(vocab);
  std::unordered_map<std::string, std::int32_t> id_of;
  std::size_t at = sizeof header;
  for (std::uint32_t id = 0; id < vocab; ++id) {
    const std::size_t length = at < file.size() ? static_cast<unsigned char>(file[at]) : 0;
    if (at >= file.size() || length == 0 || at + 1 + length > file.size()) {
      throw std::runtime_error(
          fmt::format("{}: token {} of {} is truncated or empty", path, id, vocab));
    }
    tokens[id] = file.substr(at + 1, length);
    at += 1 + length;
    if (static_cast<std::int64_t>(id) != end_of_text) id_of.emplace(tokens[id], id);
  }
  if (at != file.size()) {
    throw std::runtime_error(
        fmt::format("{}: {} bytes after the last of {} tokens", path, file.size() - at, vocab));
  }
  std::vector<Gpt2Merge> merges;
  for (std::int32_t id = 0; id < static_cast<std::int32_t>(vocab); ++id) {
    const std::string& bytes = tokens[id];
    if (id == end_of_text || bytes.size() < 2) continue;
    for (std::size_t cut = 1; cut < bytes.size(); ++cut) {
      const auto left = id_of.find(bytes.substr(0, cut));
      const auto right = id_of.find(bytes.substr(cut));
      if (left != id_of.end() && right != id_of.end())
        merges.push_back({left->second, right->second, id, id});
    }
  }
  try {
    return Gpt2Tokenizer(std::move(tokens), merges, static_cast<std::int32_t>(end_of_text), path);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
}

}  // namespace mpitron::nn
