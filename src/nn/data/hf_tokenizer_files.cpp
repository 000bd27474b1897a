#include "nn/data/hf_tokenizer_files.h"

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include "nn/data/gpt2_tokenizer_files.h"

namespace mpitron::nn {

namespace {

// Llama 3's split pattern as tokenizer.json spells it (its `\s` is kLlama3Pattern's White_Space).
constexpr std::string_view kLlama3JsonRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*)"
    R"(|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The value of a base64 character, or -1.
int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// The bytes of standard base64 text (padded to a multiple of 4), or nullopt.
std::optional<std::string> base64_bytes(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) return std::nullopt;
  std::string bytes;
  for (std::size_t i = 0; i < text.size(); i += 4) {
    std::uint32_t group = 0;
    int padding = 0;
    for (std::size_t j = 0; j < 4; ++j) {
      const char c = text[i + j];
      const bool last_group = i + 4 == text.size();
      if (c == '=' && last_group && j >= 2 && (j == 3 || text[i + 3] == '=')) {
        ++padding;
        group <<= 6;
        continue;
      }
      const int value = base64_value(c);
      if (value < 0 || padding > 0) return std::nullopt;
      group = group << 6 | static_cast<std::uint32_t>(value);
    }
    for (int k = 0; k < 3 - padding; ++k)
      bytes += static_cast<char>(group >> (16 - 8 * k) & 0xFF);
  }
  return bytes;
}

std::runtime_error file_error(const std::string& path, const std::string& what) {
  return std::runtime_error(fmt::format("{}: {}", path, what));
}

// The tokenizer, with std::invalid_argument (a vocabulary without some byte, ...) as
// std::runtime_error.
BpeTokenizer make_tokenizer(std::vector<std::string> tokens, const std::vector<BpeMerge>& merges,
                            std::int32_t document_start, const std::string& path, BpeRules rules) {
  try {
    return BpeTokenizer(std::move(tokens), merges, document_start, path, std::move(rules));
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
}

// Sets the pre-tokenization rules of a tokenizer.json "pre_tokenizer" in `rules`; throws for one
// not known here.
void set_hf_pretokenizer(const nlohmann::json& pre, const std::string& path, BpeRules& rules) {
  const auto is_byte_level = [](const nlohmann::json& p, bool regex) {
    return p.is_object() && p.value("type", "") == "ByteLevel" &&
           !p.value("add_prefix_space", false) && p.value("use_regex", true) == regex;
  };
  if (is_byte_level(pre, true)) {
    rules.pattern = PretokenizerPattern::gpt2;
    return;
  }
  if (pre.is_object() && pre.value("type", "") == "Sequence" && pre.contains("pretokenizers")) {
    const nlohmann::json& steps = pre["pretokenizers"];
    const bool two = steps.is_array() && steps.size() == 2 && steps[0].is_object();
    if (two && is_byte_level(steps[1], false) && steps[0].value("type", "") == "Split" &&
        steps[0].value("behavior", "") == "Isolated" && !steps[0].value("invert", false) &&
        steps[0].contains("pattern") && steps[0]["pattern"].is_object() &&
        steps[0]["pattern"].value("Regex", "") == kLlama3JsonRegex) {
      rules.pattern = PretokenizerPattern::llama3;
      return;
    }
    if (two && is_byte_level(steps[1], true) && steps[0].value("type", "") == "Digits" &&
        steps[0].value("individual_digits", false)) {
      rules.pattern = PretokenizerPattern::gpt2;
      rules.isolate_digits = true;
      return;
    }
  }
  throw file_error(path, fmt::format("pre_tokenizer {} is not one mpitron knows (byte-level with "
                                     "GPT-2's pattern, individual digits then that, or Llama 3's "
                                     "split then byte-level)",
                                     pre.dump().substr(0, 120)));
}

}  // namespace

std::vector<std::string> llama3_special_tokens() {
  std::vector<std::string> names = {"<|begin_of_text|>",
                                    "<|end_of_text|>",
                                    "<|reserved_special_token_0|>",
                                    "<|reserved_special_token_1|>",
                                    "<|reserved_special_token_2|>",
                                    "<|reserved_special_token_3|>",
                                    "<|start_header_id|>",
                                    "<|end_header_id|>",
                                    "<|reserved_special_token_4|>",
                                    "<|eot_id|>"};
  for (int i = 5; names.size() < 256; ++i)
    names.push_back(fmt::format("<|reserved_special_token_{}|>", i));
  return names;
}

bool looks_like_tiktoken_ranks(std::string_view head) {
  const std::size_t space = head.find(' ');
  if (space == std::string_view::npos || space == 0) return false;
  for (std::size_t i = 0; i < space; ++i) {
    if (base64_value(head[i]) < 0 && head[i] != '=') return false;
  }
  std::size_t i = space + 1;
  const std::size_t digits = i;
  while (i < head.size() && head[i] >= '0' && head[i] <= '9')
    ++i;
  return i > digits && i < head.size() && (head[i] == '\n' || head[i] == '\r');
}

BpeTokenizer load_tiktoken_tokenizer(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw file_error(path, fmt::format("cannot read: {}", std::strerror(errno)));
  std::vector<std::string> tokens;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::size_t space = line.find(' ');
    const auto bytes = space == std::string::npos
                           ? std::nullopt
                           : base64_bytes(std::string_view(line).substr(0, space));
    std::int64_t rank = -1;
    const char* end = line.data() + line.size();
    const bool number_ok = bytes && std::from_chars(line.data() + space + 1, end, rank).ptr == end;
    if (!number_ok) {
      throw file_error(fmt::format("{}:{}", path, number),
                       fmt::format("not a line \"base64-bytes rank\": {}", line.substr(0, 80)));
    }
    if (rank != static_cast<std::int64_t>(tokens.size())) {
      throw file_error(
          fmt::format("{}:{}", path, number),
          fmt::format("rank {} where {} was due (ranks count up from 0)", rank, tokens.size()));
    }
    tokens.push_back(*bytes);
  }
  if (in.bad()) throw file_error(path, "cannot read");
  if (tokens.size() != static_cast<std::size_t>(kLlama3BpeTokens)) {
    throw file_error(path, fmt::format("a tiktoken rank file of {} ranks; only Llama 3's ({}) is "
                                       "known, with the special tokens that follow them",
                                       tokens.size(), kLlama3BpeTokens));
  }
  std::vector<BpeMerge> merges = merges_from_ranks(tokens, {});
  BpeRules rules{
      .pattern = PretokenizerPattern::llama3, .whole_piece_first = true, .special_ids = {}};
  for (std::string& special : llama3_special_tokens()) {
    rules.special_ids.push_back(static_cast<std::int32_t>(tokens.size()));
    tokens.push_back(std::move(special));
  }
  return make_tokenizer(std::move(tokens), merges, kLlama3BeginOfText, path, std::move(rules));
}

namespace {

BpeTokenizer build_hf_tokenizer(const nlohmann::json& json, const std::string& path) {
  if (!json.is_object() || !json.contains("model"))
    throw file_error(path, "not a tokenizer.json (no \"model\" object)");
  const nlohmann::json& model = json["model"];
  if (!model.is_object() || model.value("type", "BPE") != "BPE" || !model.contains("vocab") ||
      !model["vocab"].is_object() || !model.contains("merges") || !model["merges"].is_array()) {
    throw file_error(path,
                     "not a BPE tokenizer.json (expected model.type \"BPE\" with a vocab "
                     "object and a merges list)");
  }
  if (json.contains("normalizer") && !json["normalizer"].is_null())
    throw file_error(path, "has a normalizer, which mpitron does not apply");
  BpeRules rules;
  set_hf_pretokenizer(json.value("pre_tokenizer", nlohmann::json()), path, rules);
  rules.whole_piece_first = model.value("ignore_merges", false);

  // Added tokens first: their content is their bytes, also where the vocab spells them too.
  std::unordered_map<std::int64_t, std::string> added;
  for (const nlohmann::json& token : json.value("added_tokens", nlohmann::json::array())) {
    const auto id = token.value("id", std::int64_t{-1});
    if (id < 0 || id >= (std::int64_t{1} << 24) || !token.contains("content")) {
      throw file_error(path, fmt::format("added token {} has no id in 0..2^24 or no content",
                                         token.dump().substr(0, 80)));
    }
    added[id] = token["content"].get<std::string>();
    if (token.value("special", false)) rules.special_ids.push_back(static_cast<std::int32_t>(id));
  }
  std::int64_t size = 0;
  for (const auto& [text, value] : model["vocab"].items()) {
    const std::int64_t id = value.is_number_integer() ? value.get<std::int64_t>() : -1;
    if (id < 0 || id >= (std::int64_t{1} << 24))
      throw file_error(path, fmt::format("token {} has id {}", nlohmann::json(text).dump(), id));
    size = std::max(size, id + 1);
  }
  for (const auto& [id, content] : added)
    size = std::max(size, id + 1);
  std::vector<std::string> tokens(static_cast<std::size_t>(size));
  std::vector<bool> seen(tokens.size());
  for (const auto& [id, content] : added) {
    tokens[id] = content;
    seen[id] = true;
  }
  std::unordered_map<std::string, std::int32_t> id_of;
  for (const auto& [text, value] : model["vocab"].items()) {
    const auto id = value.get<std::int64_t>();
    if (added.contains(id)) continue;
    const std::optional<std::string> bytes = byte_level_to_bytes(text);
    if (!bytes || seen[id]) {
      throw file_error(path, fmt::format("token {} (id {}) is {}", nlohmann::json(text).dump(), id,
                                         bytes ? "a second token of that id"
                                               : "not spelled in byte-level characters"));
    }
    tokens[id] = *bytes;
    seen[id] = true;
    id_of.emplace(*bytes, static_cast<std::int32_t>(id));
  }
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    if (!seen[id]) throw file_error(path, fmt::format("no token has id {}", id));
  }

  std::vector<BpeMerge> merges;
  for (const nlohmann::json& merge : model["merges"]) {
    std::optional<std::string> left, right;
    if (merge.is_string()) {
      const std::string text = merge.get<std::string>();
      const std::size_t space = text.find(' ');
      if (space != std::string::npos) {
        left = byte_level_to_bytes(std::string_view(text).substr(0, space));
        right = byte_level_to_bytes(std::string_view(text).substr(space + 1));
      }
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      left = byte_level_to_bytes(merge[0].get<std::string>());
      right = byte_level_to_bytes(merge[1].get<std::string>());
    }
    const auto left_id = left ? id_of.find(*left) : id_of.end();
    const auto right_id = right ? id_of.find(*right) : id_of.end();
    const auto merged_id = left && right ? id_of.find(*left + *right) : id_of.end();
    if (left_id == id_of.end() || right_id == id_of.end() || merged_id == id_of.end()) {
      throw file_error(path, fmt::format("merge {} of rank {} is not a merge of two tokens into a "
                                         "third",
                                         merge.dump().substr(0, 80), merges.size()));
    }
    merges.push_back({left_id->second, right_id->second, merged_id->second,
                      static_cast<std::int32_t>(merges.size())});
  }

  std::int32_t document_start = -1;
  for (const char* name : {"<|begin_of_text|>", "<|endoftext|>"}) {
    for (const auto& [id, content] : added) {
      if (document_start < 0 && content == name) document_start = static_cast<std::int32_t>(id);
    }
  }
  if (document_start < 0) {
    throw file_error(path,
                     "has no \"<|begin_of_text|>\" or \"<|endoftext|>\" added token to "
                     "start documents with");
  }
  return make_tokenizer(std::move(tokens), merges, document_start, path, std::move(rules));
}

}  // namespace

BpeTokenizer load_hf_tokenizer(const nlohmann::json& json, const std::string& path) {
  try {
    return build_hf_tokenizer(json, path);
  } catch (const nlohmann::json::exception& e) {
    // A field of the wrong JSON type (an id that is a string, content that is a number).
    throw file_error(path, fmt::format("malformed tokenizer.json: {}", e.what()));
  }
}

BpeTokenizer load_hf_tokenizer(const std::string& path) {
  return load_hf_tokenizer(nlohmann::json::parse(read_tokenizer_file(path), nullptr, false), path);
}

}  // namespace mpitron::nn
