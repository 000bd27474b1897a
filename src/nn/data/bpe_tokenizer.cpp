#include "nn/data/bpe_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

namespace mpitron::nn {

namespace {

// Pieces longer than this are merged every time (runs of spaces, long numbers, binary data).
constexpr std::size_t kMaxCachedPiece = 64;
// The cache is emptied when it holds this many pieces (about 100 MB at most).
constexpr std::size_t kMaxCachedPieces = std::size_t{1} << 20;
constexpr std::size_t kProgressBytes = std::size_t{1} << 20;

std::uint64_t merge_key(std::int32_t left, std::int32_t right) {
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32 |
         static_cast<std::uint32_t>(right);
}

}  // namespace

std::array<char32_t, 256> gpt2_byte_to_unicode() {
  std::array<char32_t, 256> map{};
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    map[b] = printable ? static_cast<char32_t>(b) : next++;
  }
  return map;
}

std::optional<std::string> byte_level_to_bytes(std::string_view text) {
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

std::vector<BpeMerge> merges_from_ranks(const std::vector<std::string>& tokens,
                                        const std::vector<std::int32_t>& skipped) {
  std::vector<bool> skip(tokens.size());
  for (const std::int32_t id : skipped) {
    if (id >= 0 && static_cast<std::size_t>(id) < tokens.size()) skip[id] = true;
  }
  std::unordered_map<std::string_view, std::int32_t> id_of;
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    if (!skip[id]) id_of.emplace(tokens[id], static_cast<std::int32_t>(id));
  }
  std::vector<BpeMerge> merges;
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    const std::string_view bytes = tokens[id];
    if (skip[id] || bytes.size() < 2) continue;
    const auto rank = static_cast<std::int32_t>(id);
    for (std::size_t cut = 1; cut < bytes.size(); ++cut) {
      const auto left = id_of.find(bytes.substr(0, cut));
      const auto right = id_of.find(bytes.substr(cut));
      if (left != id_of.end() && right != id_of.end())
        merges.push_back({left->second, right->second, rank, rank});
    }
  }
  return merges;
}

BpeTokenizer::BpeTokenizer(std::vector<std::string> tokens, const std::vector<BpeMerge>& merges,
                           std::int32_t document_start, const std::string& source, BpeRules rules)
    : tokens_(std::move(tokens)),
      document_start_(document_start),
      rules_(std::move(rules)),
      pretokenizer_(rules_.pattern, rules_.isolate_digits) {
  const auto n = static_cast<std::int32_t>(tokens_.size());
  if (document_start < 0 || document_start >= n) {
    throw std::invalid_argument(fmt::format(
        "{}: document start id {} is outside the vocabulary of {}", source, document_start, n));
  }
  for (const std::int32_t id : rules_.special_ids) {
    if (id < 0 || id >= n) {
      throw std::invalid_argument(
          fmt::format("{}: special token id {} is outside the vocabulary of {}", source, id, n));
    }
  }
  byte_token_.fill(-1);
  for (std::int32_t id = n - 1; id >= 0; --id) {
    if (tokens_[id].size() == 1) byte_token_[static_cast<std::uint8_t>(tokens_[id][0])] = id;
  }
  const auto missing = std::find(byte_token_.begin(), byte_token_.end(), -1);
  if (missing != byte_token_.end()) {
    throw std::invalid_argument(
        fmt::format("{}: byte 0x{:02x} has no token", source, missing - byte_token_.begin()));
  }
  merges_.reserve(merges.size());
  for (const BpeMerge& m : merges) {
    const auto valid = [n](std::int32_t id) { return id >= 0 && id < n; };
    if (!valid(m.left) || !valid(m.right) || !valid(m.merged) ||
        tokens_[m.merged] != tokens_[m.left] + tokens_[m.right]) {
      throw std::invalid_argument(
          fmt::format("{}: merge of rank {} ({} {} -> {}) is not a merge of "
                      "two tokens of the vocabulary of {}",
                      source, m.rank, m.left, m.right, m.merged, n));
    }
    const auto [at, added] = merges_.try_emplace(merge_key(m.left, m.right), m.rank, m.merged);
    if (!added && m.rank < at->second.rank) at->second = {m.rank, m.merged};
  }
  if (rules_.whole_piece_first) {
    std::vector<bool> special(tokens_.size());
    for (const std::int32_t id : rules_.special_ids)
      special[id] = true;
    whole_.reserve(tokens_.size());
    for (std::int32_t id = n - 1; id >= 0; --id) {
      if (!special[id]) whole_[tokens_[id]] = id;
    }
  }
}

const std::string& BpeTokenizer::token_bytes(std::int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    throw std::out_of_range(
        fmt::format("token id {} is outside the vocabulary of {}", id, vocab_size()));
  }
  return tokens_[id];
}

std::vector<std::int32_t> BpeTokenizer::stop_ids() const {
  static const std::array<std::string_view, 5> kEnds = {"<|endoftext|>", "<|end_of_text|>",
                                                        "<|eot_id|>", "</s>", "<|im_end|>"};
  std::vector<std::int32_t> candidates = rules_.special_ids;
  candidates.push_back(document_start_);
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  std::vector<std::int32_t> stops;
  for (const std::int32_t id : candidates) {
    if (std::find(kEnds.begin(), kEnds.end(), token_bytes(id)) != kEnds.end()) stops.push_back(id);
  }
  return stops;
}

bool BpeTokenizer::prompt_starts_with_document_start() const {
  const std::vector<std::int32_t> stops = stop_ids();
  return std::find(stops.begin(), stops.end(), document_start_) == stops.end();
}

std::string BpeTokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string text;
  for (const std::int32_t id : ids)
    text += token_bytes(id);
  return text;
}

std::vector<std::int32_t> BpeTokenizer::encode(std::string_view text) {
  std::vector<std::int32_t> ids;
  encode(text, ids);
  return ids;
}

std::vector<std::int32_t> BpeTokenizer::encode_with_special(std::string_view text) {
  std::vector<std::int32_t> ids;
  std::size_t done = 0;
  while (done < text.size()) {
    std::size_t next = text.size(), length = 0;
    std::int32_t special = -1;
    for (const std::int32_t id : rules_.special_ids) {
      const std::string& name = tokens_[id];
      const std::size_t at = name.empty() ? std::string_view::npos : text.find(name, done);
      if (at != std::string_view::npos && (at < next || (at == next && name.size() > length))) {
        next = at;
        length = name.size();
        special = id;
      }
    }
    encode(text.substr(done, next - done), ids);
    if (special >= 0) ids.push_back(special);
    done = next + length;
  }
  return ids;
}

void BpeTokenizer::encode(std::string_view text, std::vector<std::int32_t>& out,
                          const std::function<void(std::size_t)>& progress) {
  std::size_t offset = 0, reported = 0;
  while (offset < text.size()) {
    const std::size_t end = pretokenizer_.piece_end(text, offset);
    encode_piece(text.substr(offset, end - offset), out);
    offset = end;
    if (progress && offset - reported >= kProgressBytes) {
      reported = offset;
      progress(offset);
    }
  }
  if (progress && reported != text.size()) progress(text.size());
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<std::int32_t>& out) {
  if (piece.size() == 1) {
    out.push_back(byte_token_[static_cast<std::uint8_t>(piece[0])]);
    return;
  }
  if (piece.size() > kMaxCachedPiece) {
    merge_piece(piece, out);
    return;
  }
  auto found = cache_.find(piece);
  if (found == cache_.end()) {
    if (cache_.size() >= kMaxCachedPieces) cache_.clear();
    std::vector<std::int32_t> ids;
    merge_piece(piece, ids);
    found = cache_.emplace(std::string(piece), std::move(ids)).first;
  }
  out.insert(out.end(), found->second.begin(), found->second.end());
}

// The bytes of `piece` start as one token each; the adjacent pair with the lowest merge rank
// (the leftmost among equal ranks) is merged until no pair has a merge. The pairs wait in a
// min-heap; an entry whose tokens have since changed is stale and skipped. O(n log n).
void BpeTokenizer::merge_piece(std::string_view piece, std::vector<std::int32_t>& ids) const {
  if (rules_.whole_piece_first) {
    if (const auto whole = whole_.find(piece); whole != whole_.end()) {
      ids.push_back(whole->second);
      return;
    }
  }
  const auto n = static_cast<std::int32_t>(piece.size());
  std::vector<std::int32_t> id(n), prev(n), next(n);  // id -1: merged into its left neighbour
  for (std::int32_t i = 0; i < n; ++i) {
    id[i] = byte_token_[static_cast<std::uint8_t>(piece[i])];
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    std::int32_t rank, position, left, right, merged;
  };
  const auto later = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.position > b.position;
  };
  std::vector<Candidate> heap;
  const auto offer = [&](std::int32_t i) {
    if (i < 0 || next[i] < 0) return;
    const auto merge = merges_.find(merge_key(id[i], id[next[i]]));
    if (merge == merges_.end()) return;
    heap.push_back({merge->second.rank, i, id[i], id[next[i]], merge->second.merged});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (std::int32_t i = 0; i + 1 < n; ++i)
    offer(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Candidate c = heap.back();
    heap.pop_back();
    const std::int32_t i = c.position, j = next[i];
    if (id[i] != c.left || j < 0 || id[j] != c.right) continue;
    id[i] = c.merged;
    id[j] = -1;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    offer(prev[i]);
    offer(i);
  }
  for (std::int32_t i = 0; i >= 0 && i < n; i = next[i])
    ids.push_back(id[i]);
}

}  // namespace mpitron::nn
