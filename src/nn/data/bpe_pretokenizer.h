// Byte-level BPE's pre-tokenization: the regular expression that cuts text into the pieces BPE
// then encodes one by one, GPT-2's (Radford et al. 2019, GPT-2's encoder.py) or Llama 3's (Meta's
// tokenizer.py, the pattern of OpenAI's cl100k_base), run by PCRE2.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

namespace mpitron::nn {

/// GPT-2's pre-tokenization pattern, as in its encoder.py: contractions, an optional space then
/// letters, an optional space then digits, an optional space then other non-space characters,
/// whitespace not followed by a non-space (so a space before a word stays with the word), and any
/// other whitespace. encoder.py writes `\s` and `\S` and runs Python's `regex` module, whose `\s`
/// is Unicode's White_Space property; PCRE2's `\s` also matches U+180E, so they are spelled
/// `\p{White_Space}` here. (JavaScript's `\s`, which js-tiktoken and gpt-3-encoder use, differs
/// from both on U+0085 and U+FEFF.)
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+)"
    R"(|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+)";

/// Llama 3's pre-tokenization pattern, as in Meta's tokenizer.py: the contractions 's 't 're 've
/// 'm 'll 'd in any case, letters with at most one leading character that is no letter, digit,
/// CR or LF, numbers of 1 to 3 digits, an optional space then punctuation (anything but
/// whitespace, letters and digits) with the CRs and LFs after it, whitespace ending in CRs or
/// LFs, whitespace not followed by a non-space, and any other whitespace. `\s` and `\S` are
/// spelled `\p{White_Space}` as in kGpt2Pattern (Rust's regex crate, which tiktoken runs, takes
/// `\s` as White_Space too).
inline constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3})"
    R"(| ?[^\p{White_Space}\p{L}\p{N}]+[\r\n]*|\p{White_Space}*[\r\n]+)"
    R"(|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+)";

/// Which pre-tokenization pattern a tokenizer cuts its text with.
enum class PretokenizerPattern { gpt2, llama3 };

/// The pattern's text: kGpt2Pattern or kLlama3Pattern.
std::string_view pattern_text(PretokenizerPattern pattern);

/// A pattern compiled by PCRE2 (UTF, Unicode properties, JIT-compiled where PCRE2 has a
/// JIT). Invalid UTF-8 is allowed (PCRE2_MATCH_INVALID_UTF): no piece matches across it, and a
/// stretch of bytes the pattern does not match becomes a piece of its own, so the pieces always
/// cover the text byte for byte. Holds a PCRE2 match buffer: use one object per thread.
class BpePretokenizer {
 public:
  /// Compiles `pattern`. With `isolate_digits` each digit (`\p{N}`) is a piece of its own and
  /// the pattern cuts each stretch between digits on its own (Hugging Face's Digits step with
  /// individual_digits before ByteLevel: SmolLM's, StarCoder's). Throws std::runtime_error with
  /// PCRE2's message if it cannot compile.
  explicit BpePretokenizer(PretokenizerPattern pattern = PretokenizerPattern::gpt2,
                           bool isolate_digits = false);
  ~BpePretokenizer();
  BpePretokenizer(BpePretokenizer&&) noexcept;
  BpePretokenizer& operator=(BpePretokenizer&&) noexcept;

  /// The end (a byte offset into `text`, > `offset`) of the piece that starts at `offset`
  /// (< text.size()). Pieces are found by calling it again from each end until text.size().
  /// Throws std::runtime_error when PCRE2 fails (e.g. its JIT stack is exhausted).
  std::size_t piece_end(std::string_view text, std::size_t offset);

  /// Whether PCRE2 JIT-compiled the pattern (else its interpreter runs it, several times slower).
  bool jit() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace mpitron::nn
