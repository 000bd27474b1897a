#include "nn/data/bpe_pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace mpitron::nn {

namespace {

std::string pcre2_message(int code) {
  std::array<PCRE2_UCHAR, 256> text{};
  pcre2_get_error_message(code, text.data(), text.size());
  return reinterpret_cast<const char*>(text.data());
}

// The JIT stack grows up to this size: enough for a piece of millions of bytes (a whitespace run
// backtracks into `\s+(?!\S)`).
constexpr std::size_t kJitStackStart = std::size_t{32} << 10;
constexpr std::size_t kJitStackMax = std::size_t{8} << 20;

}  // namespace

std::string_view pattern_text(PretokenizerPattern pattern) {
  return pattern == PretokenizerPattern::llama3 ? kLlama3Pattern : kGpt2Pattern;
}

// A compiled pattern and its match buffer (named, not in an anonymous namespace: State, a member
// of the public class, holds two).
namespace bpe_pcre2 {

struct Compiled {
  pcre2_code* code = nullptr;
  pcre2_match_data* match = nullptr;

  Compiled() = default;
  Compiled(const Compiled&) = delete;
  Compiled& operator=(const Compiled&) = delete;
  ~Compiled() {
    pcre2_match_data_free(match);
    pcre2_code_free(code);
  }

  // Compiles `text` (UTF, Unicode properties, invalid UTF-8 allowed), JIT-compiled where PCRE2
  // can; returns whether it was.
  bool compile(std::string_view text) {
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                         PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &error_offset,
                         nullptr);
    if (code == nullptr) {
      throw std::runtime_error("pre-tokenization pattern: PCRE2 cannot compile it at offset " +
                               std::to_string(error_offset) + ": " + pcre2_message(error));
    }
    const bool jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    match = pcre2_match_data_create_from_pattern(code, nullptr);
    if (match == nullptr) throw std::runtime_error("pre-tokenization: PCRE2 is out of memory");
    return jit;
  }

  // The [start, end) of the first match in text[offset, size), or nullopt.
  std::optional<std::pair<std::size_t, std::size_t>> find(std::string_view text, std::size_t offset,
                                                          pcre2_match_context* context) {
    const int found = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                                  offset, 0, match, context);
    if (found == PCRE2_ERROR_NOMATCH) return std::nullopt;
    if (found < 0)
      throw std::runtime_error("pre-tokenization: PCRE2 failed: " + pcre2_message(found));
    const PCRE2_SIZE* range = pcre2_get_ovector_pointer(match);
    return std::pair<std::size_t, std::size_t>(range[0], range[1]);
  }
};

}  // namespace bpe_pcre2

struct BpePretokenizer::State {
  bpe_pcre2::Compiled pieces;
  bpe_pcre2::Compiled digits;  // compiled only when digits are isolated
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  bool jit = false;
  // The last match, whose start a gap piece ended at: the next call returns its end unmatched.
  const char* last_text = nullptr;
  std::size_t last_size = 0, last_start = 0, last_end = 0;
  // The next digit at or after digit_from in digit_text: [digit_start, digit_end), or
  // digit_start == its size when there is none.
  const char* digit_text = nullptr;
  std::size_t digit_size = 0, digit_from = 0, digit_start = 0, digit_end = 0;

  ~State() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
  }
};

BpePretokenizer::BpePretokenizer(PretokenizerPattern pattern, bool isolate_digits)
    : state_(std::make_unique<State>()) {
  state_->jit = state_->pieces.compile(pattern_text(pattern));
  if (isolate_digits) state_->digits.compile(R"(\p{N})");
  state_->context = pcre2_match_context_create(nullptr);
  if (state_->context == nullptr)
    throw std::runtime_error("pre-tokenization: PCRE2 is out of memory");
  if (state_->jit) {
    state_->stack = pcre2_jit_stack_create(kJitStackStart, kJitStackMax, nullptr);
    if (state_->stack == nullptr)
      throw std::runtime_error("pre-tokenization: PCRE2 is out of memory");
    pcre2_jit_stack_assign(state_->context, nullptr, state_->stack);
  }
}

BpePretokenizer::~BpePretokenizer() = default;
BpePretokenizer::BpePretokenizer(BpePretokenizer&&) noexcept = default;
BpePretokenizer& BpePretokenizer::operator=(BpePretokenizer&&) noexcept = default;

bool BpePretokenizer::jit() const {
  return state_->jit;
}

std::size_t BpePretokenizer::piece_end(std::string_view text, std::size_t offset) {
  State& s = *state_;
  if (s.digits.code != nullptr) {
    // Each digit is a piece; the pattern cuts the stretch before the next one on its own.
    const bool cached = s.digit_text == text.data() && s.digit_size == text.size() &&
                        s.digit_from <= offset && offset <= s.digit_start;
    if (!cached) {
      const auto digit = s.digits.find(text, offset, s.context);
      s.digit_text = text.data();
      s.digit_size = text.size();
      s.digit_from = offset;
      s.digit_start = digit ? digit->first : text.size();
      s.digit_end = digit ? digit->second : text.size();
    }
    if (s.digit_start == offset) return s.digit_end;
    text = text.substr(0, s.digit_start);
  }
  if (s.last_text == text.data() && s.last_size == text.size() && s.last_start == offset) {
    s.last_text = nullptr;
    return s.last_end;
  }
  const auto range = s.pieces.find(text, offset, s.context);
  if (!range) return text.size();  // invalid UTF-8 up to the end
  if (range->first == offset) return range->second;
  // Bytes the pattern skipped (invalid UTF-8) form a piece; the match follows them.
  s.last_text = text.data();
  s.last_size = text.size();
  s.last_start = range->first;
  s.last_end = range->second;
  return range->first;
}

}  // namespace mpitron::nn
