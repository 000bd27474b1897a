#include "nn/data/bpe_pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <stdexcept>
#include <string>

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

struct BpePretokenizer::State {
  pcre2_code* code = nullptr;
  pcre2_match_data* match = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  bool jit = false;
  // The last match, whose start a gap piece ended at: the next call returns its end unmatched.
  const char* last_text = nullptr;
  std::size_t last_size = 0, last_start = 0, last_end = 0;

  ~State() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(match);
    pcre2_code_free(code);
  }
};

BpePretokenizer::BpePretokenizer(PretokenizerPattern pattern) : state_(std::make_unique<State>()) {
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  const std::string_view text = pattern_text(pattern);
  state_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                               PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error,
                               &error_offset, nullptr);
  if (state_->code == nullptr) {
    throw std::runtime_error("pre-tokenization pattern: PCRE2 cannot compile it at offset " +
                             std::to_string(error_offset) + ": " + pcre2_message(error));
  }
  state_->jit = pcre2_jit_compile(state_->code, PCRE2_JIT_COMPLETE) == 0;
  state_->match = pcre2_match_data_create_from_pattern(state_->code, nullptr);
  state_->context = pcre2_match_context_create(nullptr);
  if (state_->match == nullptr || state_->context == nullptr)
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
  if (s.last_text == text.data() && s.last_size == text.size() && s.last_start == offset) {
    s.last_text = nullptr;
    return s.last_end;
  }
  const int found = pcre2_match(s.code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                                offset, 0, s.match, s.context);
  if (found == PCRE2_ERROR_NOMATCH) return text.size();  // invalid UTF-8 up to the end
  if (found < 0)
    throw std::runtime_error("pre-tokenization: PCRE2 failed: " + pcre2_message(found));
  const PCRE2_SIZE* range = pcre2_get_ovector_pointer(s.match);
  if (range[0] == offset) return range[1];
  // Bytes the pattern skipped (invalid UTF-8) form a piece; the match follows them.
  s.last_text = text.data();
  s.last_size = text.size();
  s.last_start = range[0];
  s.last_end = range[1];
  return range[0];
}

}  // namespace mpitron::nn
