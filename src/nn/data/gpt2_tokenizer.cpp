#include "nn/data/gpt2_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

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

Gpt2Tokenizer::Gpt2Tokenizer(std::vector<std::string> tokens, const std::vector<Gpt2Merge>& merges,
                             std::int32_t end_of_text, const std::string& source)
    : tokens_(std::move(tokens)), end_of_text_(end_of_text) {
  const auto n = static_cast<std::int32_t>(tokens_.size());
  if (end_of_text < 0 || end_of_text >= n) {
    throw std::invalid_argument(fmt::format("{}: end-of-text id {} is outside the vocabulary of {}",
                                            source, end_of_text, n));
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
  for (const Gpt2Merge& m : merges) {
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
}

const std::string& Gpt2Tokenizer::token_bytes(std::int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    throw std::out_of_range(
        fmt::format("token id {} is outside the vocabulary of {}", id, vocab_size()));
  }
  return tokens_[id];
}

std::string Gpt2Tokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string text;
  for (const std::int32_t id : ids)
    text += token_bytes(id);
  return text;
}

std::vector<std::int32_t> Gpt2Tokenizer::encode(std::string_view text) {
  std::vector<std::int32_t> ids;
  encode(text, ids);
  return ids;
}

void Gpt2Tokenizer::encode(std::string_view text, std::vector<std::int32_t>& out,
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

void Gpt2Tokenizer::encode_piece(std::string_view piece, std::vector<std::int32_t>& out) {
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
void Gpt2Tokenizer::merge_piece(std::string_view piece, std::vector<std::int32_t>& ids) const {
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
