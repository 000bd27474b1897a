// The small GPT-2 of tools/make_llmc_sample.py (maxT 32, V 70, Vp 128, L 2, NH 2, C 16) and
// comparisons of canonical weights, for the tests of src/nn/checkpoint/'s GPT-2 formats.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "nn/checkpoint/gpt2_weights.h"
#include "nn/checkpoint/safetensors.h"

namespace mpitron::test {

inline const std::string kGpt2Data = MPITRON_TEST_DATA_DIR;

/// The sample's sizes as llm.c's header records them.
inline nn::Gpt2Sizes sample_sizes() {
  return {.max_t = 32, .vocab = 70, .padded_vocab = 128, .layers = 2, .heads = 2, .hidden = 16};
}

/// The sample's weights under canonical names, as Python wrote them
/// (llmc_sample_expected.safetensors).
inline nn::Gpt2Weights sample_weights() {
  nn::SafetensorsReader reader(kGpt2Data + "/llmc_sample_expected.safetensors");
  nn::Gpt2Weights weights{sample_sizes(), {}};
  for (const nn::SafetensorsEntry& e : reader.entries()) {
    weights.tensors[e.name] = reader.read_tensor(e.name);
  }
  return weights;
}

/// Expects the same names, shapes and values (exactly).
inline void expect_same_tensors(const std::map<std::string, autograd::Tensor>& actual,
                                const std::map<std::string, autograd::Tensor>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (const auto& [name, tensor] : expected) {
    const auto it = actual.find(name);
    ASSERT_NE(it, actual.end()) << name;
    EXPECT_EQ(it->second.dtype(), autograd::DType::f32) << name;
    EXPECT_EQ(it->second.shape(), tensor.shape()) << name;
    EXPECT_EQ(it->second.to_vector(), tensor.to_vector()) << name;
  }
}

}  // namespace mpitron::test
