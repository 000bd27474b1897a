#include "nn/data/gpt2_tokenizer_files.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <unordered_map>

namespace mpitron::nn {

namespace {

constexpr std::size_t kLlmcHeaderWords = 256;

}  // namespace

std::string read_tokenizer_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error(fmt::format("{}: cannot read", path));
  return bytes;
}

BpeTokenizer load_openai_tokenizer(const std::string& encoder_json, const std::string& vocab_bpe) {
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
    const std::optional<std::string> bytes = byte_level_to_bytes(text);
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
  std::vector<BpeMerge> merges;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (number == 1 && line.starts_with("#version"))) continue;
    const std::size_t space = line.find(' ');
    const auto left = byte_level_to_bytes(line.substr(0, space));
    const auto right =
        space == std::string::npos ? std::nullopt : byte_level_to_bytes(line.substr(space + 1));
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
    return BpeTokenizer(std::move(tokens), merges, end_of_text, encoder_json);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
}

BpeTokenizer load_llmc_tokenizer(const std::string& path) {
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
  std::size_t at = sizeof header;
  for (std::uint32_t id = 0; id < vocab; ++id) {
    const std::size_t length = at < file.size() ? static_cast<unsigned char>(file[at]) : 0;
    if (at >= file.size() || length == 0 || at + 1 + length > file.size()) {
      throw std::runtime_error(
          fmt::format("{}: token {} of {} is truncated or empty", path, id, vocab));
    }
    tokens[id] = file.substr(at + 1, length);
    at += 1 + length;
  }
  if (at != file.size()) {
    throw std::runtime_error(
        fmt::format("{}: {} bytes after the last of {} tokens", path, file.size() - at, vocab));
  }
  const std::vector<BpeMerge> merges =
      merges_from_ranks(tokens, {static_cast<std::int32_t>(end_of_text)});
  try {
    return BpeTokenizer(std::move(tokens), merges, static_cast<std::int32_t>(end_of_text), path);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
}

}  // namespace mpitron::nn
