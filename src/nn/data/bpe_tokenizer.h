// Byte-level BPE tokenizers, GPT-2's (Radford et al. 2019, GPT-2's encoder.py), Llama 3's and
// those of Hugging Face's tokenizer.json: text is cut into pieces by a pre-tokenization pattern
// (bpe_pretokenizer.h), and each piece's bytes are merged pair by pair, lowest merge rank first,
// into token ids. Any bytes encode, and decoding gives them back. The files they are loaded
// from: tokenizer_files.h.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "nn/data/bpe_pretokenizer.h"

namespace mpitron::nn {

/// GPT-2's end-of-text token id, "<|endoftext|>" (the last of its 50257 tokens).
inline constexpr std::int32_t kGpt2EndOfText = 50256;

/// GPT-2's printable stand-in for each byte (encoder.py's bytes_to_unicode): the bytes '!'..'~',
/// 0xA1..0xAC and 0xAE..0xFF stand for themselves, the 68 others for U+0100 onwards in byte
/// order. encoder.json and vocab.bpe spell tokens with these characters.
std::array<char32_t, 256> gpt2_byte_to_unicode();

/// Text in gpt2_byte_to_unicode()'s characters (UTF-8), as encoder.json, vocab.bpe and
/// tokenizer.json spell tokens, back to its bytes; nullopt when the text is not valid UTF-8 or
/// holds a character that stands for no byte.
std::optional<std::string> byte_level_to_bytes(std::string_view text);

/// One BPE merge: the adjacent tokens `left`, `right` become `merged` (whose bytes are theirs
/// concatenated); among the merges possible in a piece, the lowest `rank` is applied first.
struct BpeMerge {
  std::int32_t left = 0, right = 0, merged = 0, rank = 0;
};

/// The merges of a vocabulary that has ranks but no merge list (tiktoken's rank files, llm.c's
/// gpt2_tokenizer.bin): any two tokens whose bytes concatenate to token t merge into t with rank
/// t, which is how tiktoken encodes. Ids in `skipped` (special tokens) neither merge nor result.
std::vector<BpeMerge> merges_from_ranks(const std::vector<std::string>& tokens,
                                        const std::vector<std::int32_t>& skipped);

/// How a tokenizer cuts and merges, beyond its vocabulary and merges.
struct BpeRules {
  /// The pre-tokenization pattern.
  PretokenizerPattern pattern = PretokenizerPattern::gpt2;
  /// Whether each digit is a piece of its own before the pattern cuts the rest (a tokenizer.json
  /// whose pre_tokenizer starts with Digits, individual_digits true: SmolLM's).
  bool isolate_digits = false;
  /// Whether a piece that is a token as a whole encodes as that token before any merge
  /// (tiktoken's rule, and tokenizer.json's "ignore_merges": Llama 3's).
  bool whole_piece_first = false;
  /// Special tokens (their bytes are their text, e.g. "<|eot_id|>"): never a whole piece.
  std::vector<std::int32_t> special_ids;
};

/// A byte-level BPE tokenizer: token ids, their bytes, the merges and the id that starts a
/// document.
class BpeTokenizer {
 public:
  /// `tokens[id]` is the bytes of token id; every single byte must be a token. `document_start`
  /// is the id written before each document (GPT-2's end-of-text 50256, Llama 3's
  /// <|begin_of_text|> 128000, as llm.c's data scripts do). Throws std::invalid_argument (naming
  /// `source`, the file it came from) when a byte has no token, a merge names an id outside
  /// `tokens` or one whose bytes are not left's + right's, or `document_start` or a special id
  /// is not an id.
  BpeTokenizer(std::vector<std::string> tokens, const std::vector<BpeMerge>& merges,
               std::int32_t document_start, const std::string& source, BpeRules rules = {});

  /// The ids of `text` (any bytes; UTF-8 is what the models were trained on), appended to
  /// `out`. A special token's text ("<|endoftext|>", "<|eot_id|>") is ordinary text here
  /// (tiktoken's encode_ordinary); add document_start() yourself between documents. `progress`,
  /// when given, is called with the bytes encoded so far about every MiB. Caches the ids of each
  /// piece (up to a bounded number of pieces), so it is not const: use one tokenizer per thread.
  void encode(std::string_view text, std::vector<std::int32_t>& out,
              const std::function<void(std::size_t)>& progress = {});

  /// The ids of `text` (see above).
  std::vector<std::int32_t> encode(std::string_view text);

  /// The ids of `text` where the text of a special token (rules().special_ids, e.g. "<|eot_id|>")
  /// is that token, the longest where two start at the same byte (tiktoken's encode with every
  /// special allowed, Hugging Face's default); the text between them encodes as encode() does.
  std::vector<std::int32_t> encode_with_special(std::string_view text);

  /// The bytes of `ids` concatenated: decode(encode(x)) == x for any bytes x. Throws
  /// std::out_of_range "token id X is outside the vocabulary of N" for a bad id.
  std::string decode(std::span<const std::int32_t> ids) const;

  /// The bytes of token `id`. Throws std::out_of_range for an id outside [0, vocab_size()).
  const std::string& token_bytes(std::int32_t id) const;

  /// The number of tokens (50257 for GPT-2, 128256 for Llama 3).
  std::int32_t vocab_size() const { return static_cast<std::int32_t>(tokens_.size()); }

  /// The id written before each document (kGpt2EndOfText for GPT-2, 128000 for Llama 3).
  std::int32_t document_start() const { return document_start_; }

  /// The rules it was built with (pattern, whole pieces first, special ids).
  const BpeRules& rules() const { return rules_; }

  /// The special tokens (rules().special_ids, and document_start) whose text ends a document or
  /// a turn: "<|endoftext|>" (GPT-2, SmolLM), "<|end_of_text|>" and "<|eot_id|>" (Llama 3),
  /// "</s>" and "<|im_end|>": where a generation stops (Hugging Face's eos_token_id list).
  std::vector<std::int32_t> stop_ids() const;

  /// Whether a prompt starts with document_start(): where it opens a document and ends none
  /// (Llama 3's <|begin_of_text|>, as Hugging Face's tokenizer adds its BOS), not where it also
  /// ends documents (GPT-2's <|endoftext|>, which Hugging Face's GPT-2 tokenizer does not add).
  bool prompt_starts_with_document_start() const;

  /// The number of distinct merge pairs (50000 for GPT-2's vocab.bpe).
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
  std::int32_t document_start_ = 0;
  BpeRules rules_;
  // The ids of whole tokens by their bytes, when rules_.whole_piece_first (specials left out).
  std::unordered_map<std::string, std::int32_t, PieceHash, std::equal_to<>> whole_;
  BpePretokenizer pretokenizer_;
  std::unordered_map<std::string, std::vector<std::int32_t>, PieceHash, std::equal_to<>> cache_;
};

}  // namespace mpitron::nn
