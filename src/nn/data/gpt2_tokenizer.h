// GPT-2's byte-level BPE tokenizer (Radford et al. 2019, GPT-2's encoder.py): text is cut into
// pieces by GPT-2's pattern (gpt2_pretokenizer.h), and each piece's bytes are merged pair by
// pair, lowest merge rank first, into token ids. Any bytes encode, and decoding gives them back.
// The files it is loaded from: gpt2_tokenizer_files.h.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "nn/data/gpt2_pretokenizer.h"

namespace mpitron::nn {

/// GPT-2's end-of-text token id, "<|endoftext|>" (the last of its 50257 tokens).
inline constexpr std::int32_t kGpt2EndOfText = 50256;

/// GPT-2's printable stand-in for each byte (encoder.py's bytes_to_unicode): the bytes '!'..'~',
/// 0xA1..0xAC and 0xAE..0xFF stand for themselves, the 68 others for U+0100 onwards in byte
/// order. encoder.json and vocab.bpe spell tokens with these characters.
std::array<char32_t, 256> gpt2_byte_to_unicode();

/// One BPE merge: the adjacent tokens `left`, `right` become `merged` (whose bytes are theirs
/// concatenated); among the merges possible in a piece, the lowest `rank` is applied first.
struct Gpt2Merge {
  std::int32_t left = 0, right = 0, merged = 0, rank = 0;
};

/// A byte-level BPE tokenizer: token ids, their bytes, the merges and the end-of-text id.
class Gpt2Tokenizer {
 public:
  /// `tokens[id]` is the bytes of token id; every single byte must be a token. Throws
  /// std::invalid_argument (naming `source`, the file it came from) when a byte has no token,
  /// a merge names an id outside `tokens` or one whose bytes are not left's + right's, or
  /// `end_of_text` is not an id.
  Gpt2Tokenizer(std::vector<std::string> tokens, const std::vector<Gpt2Merge>& merges,
                std::int32_t end_of_text, const std::string& source);

  /// The ids of `text` (any bytes; UTF-8 is what GPT-2 was trained on), appended to `out`.
  /// "<|endoftext|>" in the text is ordinary text here (tiktoken's encode_ordinary); add
  /// end_of_text() yourself between documents. `progress`, when given, is called with the bytes
  /// encoded so far about every MiB. Caches the ids of each piece (up to a bounded number of
  /// pieces), so it is not const: use one tokenizer per thread.
  void encode(std::string_view text, std::vector<std::int32_t>& out,
              const std::function<void(std::size_t)>& progress = {});

  /// The ids of `text` (see above).
  std::vector<std::int32_t> encode(std::string_view text);

  /// The bytes of `ids` concatenated: decode(encode(x)) == x for any bytes x. Throws
  /// std::out_of_range "token id X is outside the vocabulary of N" for a bad id.
  std::string decode(std::span<const std::int32_t> ids) const;

  /// The bytes of token `id`. Throws std::out_of_range for an id outside [0, vocab_size()).
  const std::string& token_bytes(std::int32_t id) const;

  /// The number of tokens (50257 for GPT-2).
  std::int32_t vocab_size() const { return static_cast<std::int32_t>(tokens_.size()); }

  /// The end-of-text id (kGpt2EndOfText for GPT-2).
  std::int32_t end_of_text() const { return end_of_text_; }

  /// The number of merges (50000 for GPT-2's vocab.bpe).
  std::size_t merge_count() const { return merges_.size(); }

 private:
  struct MergeResult {
    std::int32_t rank, merged;
  };
  // Transparent hashing, so a piece (string_view) is looked up without a copy.
  struct PieceHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  void encode_piece(std::string_view piece, std::vector<std::int32_t>& out);
  void merge_piece(std::string_view piece, std::vector<std::int32_t>& ids) const;

  std::vector<std::string> tokens_;
  std::array<std::int32_t, 256> byte_token_{};
  std::unordered_map<std::uint64_t, MergeResult> merges_;  // key: left << 32 | right
  std::int32_t end_of_text_ = 0;
  Gpt2Pretokenizer pretokenizer_;
  std::unordered_map<std::string, std::vector<std::int32_t>, PieceHash, std::equal_to<>> cache_;
};

}  // namespace mpitron::nn
