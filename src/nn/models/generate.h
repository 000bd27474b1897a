// Autoregressive sampling from a GPT held by one pipeline stage (pp 1), on any TP size.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "nn/models/gpt.h"

namespace mpitron::nn {

struct SamplingOptions {
  double temperature = 1.0;  ///< 0: greedy (argmax, the lowest id on ties)
  std::int64_t top_k = 0;    ///< sample among the k most likely ids only (0: all)
  std::uint64_t seed = 0;
  std::int64_t vocab = 0;  ///< ids >= vocab are never drawn (0: the model's whole vocabulary)
  /// Generation ends after drawing one of these (a tokenizer's end of text or of turn,
  /// nn::generation_stop_ids); none: always `count` ids.
  std::vector<std::int64_t> stop_ids;
};

/// The next-token distribution's choice for `logits` [vocab] (the full vocabulary, on the host):
/// argmax at temperature 0; otherwise softmax(logits / temperature) restricted to the top_k
/// largest logits, inverted at the uniform sample `u` in [0, 1). Pure; the same inputs give the
/// same id on every rank. Throws std::invalid_argument for a negative temperature or top_k.
std::int64_t sample_token(const std::vector<double>& logits, const SamplingOptions& options,
                          double u);

/// What generate throws when a step's logits hold a NaN or an infinity: weights (finite, or they
/// would have been refused) whose values overflow float32 on this prompt. Every rank of the TP
/// group gathers the same logits, so all of them throw it at the same step.
class NonFiniteLogits : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// `prompt` followed by `count` sampled ids, or fewer ending with the first of
/// options.stop_ids drawn: each step runs the model over the last block_size
/// ids, all-gathers the last position's logits over TP, keeps the first min(vocab,
/// options.vocab) of them (never the padding) and samples with the uniform of stream (seed,
/// step), so every rank (and every topology) draws the same ids. `stage` must hold the
/// whole model (pp 1). Throws std::invalid_argument when the prompt is empty, pp > 1 or
/// count < 0, and NonFiniteLogits ("the logits of generated token <n> hold NaN", or "inf" or
/// "-inf": value_text; n from 1) before drawing from such logits. Collective over the TP group.
std::vector<std::int64_t> generate(const GptStage& stage, const comm::Communicator& tp,
                                   std::vector<std::int64_t> prompt, std::int64_t count,
                                   const SamplingOptions& options);

}  // namespace mpitron::nn
