// llm.c's model file: the files tools/make_llmc_sample.py wrote with Python's struct (float32 and
// bfloat16) read to the weights it lists under canonical names, written back byte for byte,
// bfloat16 rounding, each bad file's one-line error; and the canonical layout against
// gpt_parameter_specs.
#include "nn/checkpoint/llmc_file.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "gpt2_weights_test_support.h"
#include "nn/models/gpt_config.h"
#include "scratch_dir_test_support.h"
#include "support/error_message.h"

namespace mpitron::nn {
namespace {

using autograd::Tensor;
using test::kGpt2Data;
using test::message_of;
using test::names;

const std::string kF32 = kGpt2Data + "/llmc_sample_f32.bin";
const std::string kBf16 = kGpt2Data + "/llmc_sample_bf16.bin";

void expect_sizes(const Gpt2Sizes& actual, const Gpt2Sizes& expected) {
  EXPECT_EQ(actual.max_t, expected.max_t);
  EXPECT_EQ(actual.vocab, expected.vocab);
  EXPECT_EQ(actual.padded_vocab, expected.padded_vocab);
  EXPECT_EQ(actual.layers, expected.layers);
  EXPECT_EQ(actual.heads, expected.heads);
  EXPECT_EQ(actual.hidden, expected.hidden);
}

TEST(Gpt2WeightLayout, IsGptParameterSpecs) {
  const Gpt2Sizes s = test::sample_sizes();
  const auto layout = gpt2_weight_layout(s);
  const auto specs = gpt_parameter_specs({.vocab = s.vocab,
                                          .block_size = s.max_t,
                                          .layers = s.layers,
                                          .hidden = s.hidden,
                                          .heads = s.heads,
                                          .padded_vocab = s.padded_vocab});
  ASSERT_EQ(layout.size(), specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(layout[i].first, specs[i].name);
    EXPECT_EQ(layout[i].second, specs[i].full_shape) << specs[i].name;
  }
}

TEST(LlmcFile, ReadsTheFloat32FilePythonWrote) {
  const Gpt2Weights read = read_llmc_file(kF32);
  expect_sizes(read.sizes, test::sample_sizes());
  test::expect_same_tensors(read.tensors, test::sample_weights().tensors);
}

TEST(LlmcFile, ReadsTheBfloat16FilePythonWrote) {
  const Gpt2Weights read = read_llmc_file(kBf16);
  expect_sizes(read.sizes, test::sample_sizes());
  test::expect_same_tensors(read.tensors, test::sample_weights().tensors);
}

class LlmcWrite : public test::ScratchDirTest {};

TEST_F(LlmcWrite, WritesBackTheBytesItRead) {
  write_llmc_file(dir / "f32.bin", read_llmc_file(kF32));
  EXPECT_EQ(test::file_bytes(dir / "f32.bin"), test::file_bytes(kF32));
  write_llmc_file(dir / "bf16.bin", read_llmc_file(kBf16), LlmcPrecision::bfloat16);
  EXPECT_EQ(test::file_bytes(dir / "bf16.bin"), test::file_bytes(kBf16));
  // Canonical weights from elsewhere (float64 here) are stored as float32.
  Gpt2Weights wide = test::sample_weights();
  for (auto& [name, tensor] : wide.tensors) {
    tensor = Tensor::from_vector(tensor.to_vector(), tensor.shape(), autograd::DType::f64);
  }
  write_llmc_file(dir / "wide.bin", wide);
  EXPECT_EQ(test::file_bytes(dir / "wide.bin"), test::file_bytes(kF32));
}

TEST_F(LlmcWrite, Bfloat16RoundsToNearestTiesToEven) {
  Gpt2Weights weights = test::sample_weights();
  const double ulp = std::ldexp(1.0, -7);  // of bfloat16 in [1, 2)
  const std::vector<std::pair<double, double>> cases = {
      {1.0 + ulp / 2, 1.0},                               // tie, to the even 1.0
      {1.0 + 1.5 * ulp, 1.0 + 2 * ulp},                   // tie, to the even 1 + 2 ulp
      {1.0 + ulp / 2 + std::ldexp(1.0, -20), 1.0 + ulp},  // above the tie
      {-(1.0 + ulp / 2 - std::ldexp(1.0, -20)), -1.0},    // below the tie
      {3.4e38, INFINITY}};                                // past bfloat16's largest finite value
  std::vector<double> values = weights.tensors["transformer.ln_f.bias"].to_vector();
  for (std::size_t i = 0; i < cases.size(); ++i)
    values[i] = cases[i].first;
  weights.tensors["transformer.ln_f.bias"] = Tensor::from_vector(values, {16});
  write_llmc_file(dir / "bf16.bin", weights, LlmcPrecision::bfloat16);
  const std::vector<double> read =
      read_llmc_file(dir / "bf16.bin").tensors.at("transformer.ln_f.bias").to_vector();
  for (std::size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(read[i], cases[i].second) << "case " << i;
  }
}

TEST_F(LlmcWrite, RejectsBadSizesAndMissingOrMisshapenTensors) {
  const auto message = [&](const Gpt2Weights& weights) {
    return message_of<std::runtime_error>([&] { write_llmc_file(dir / "out.bin", weights); });
  };
  const std::string path = (dir / "out.bin").string();
  Gpt2Weights missing = test::sample_weights();
  missing.tensors.erase("transformer.h.1.attn.v.bias");
  EXPECT_THAT(message(missing), names(path, ": missing tensor 'transformer.h.1.attn.v.bias'"));
  Gpt2Weights extra = test::sample_weights();
  extra.tensors["lm_head.weight"] = Tensor::zeros({128, 16});
  EXPECT_THAT(message(extra), names(path, ": unexpected tensor 'lm_head.weight'"));
  Gpt2Weights misshapen = test::sample_weights();
  misshapen.tensors["transformer.wpe.weight"] = Tensor::zeros({16, 16});
  EXPECT_THAT(message(misshapen), names(path,
                                        ": tensor 'transformer.wpe.weight' has shape "
                                        "[16, 16], expected [32, 16]"));
  Gpt2Weights heads = test::sample_weights();
  heads.sizes.heads = 3;
  EXPECT_THAT(message(heads), names(path, ": hidden C 16 is not divisible by heads NH 3"));
  Gpt2Weights vocab = test::sample_weights();
  vocab.sizes.vocab = 129;
  EXPECT_THAT(message(vocab), names(path, ": padded vocab Vp 128 is smaller than vocab V 129"));
  EXPECT_FALSE(std::filesystem::exists(dir / "out.bin"));
}

class LlmcRead : public test::ScratchDirTest {
 protected:
  /// The one-line error of reading the sample's float32 bytes changed by `change`.
  std::string error_of(const std::function<void(std::string&)>& change) {
    std::string bytes = test::file_bytes(kF32);
    change(bytes);
    test::put_file_bytes(dir / "model.bin", bytes);
    const std::string message =
        message_of<CheckpointError>([&] { read_llmc_file(dir / "model.bin"); });
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_EQ(message.rfind((dir / "model.bin").string() + ": ", 0), 0u) << message;
    return message;
  }

  static void set_int(std::string& bytes, std::size_t index, std::int32_t value) {
    std::memcpy(bytes.data() + 4 * index, &value, sizeof(value));
  }
};

TEST_F(LlmcRead, NamesEachBadFileInOneLine) {
  EXPECT_THAT(error_of([](std::string& b) { set_int(b, 0, 20240520); }),
              names("not an llm.c model file (magic 20240520, expected 20240326)"));
  EXPECT_THAT(error_of([](std::string& b) { set_int(b, 1, 4); }),
              names("llm.c model version 4 is not 3 (float32) or 5 (bfloat16)"));
  EXPECT_THAT(error_of([](std::string& b) { set_int(b, 7, 64); }),
              names("bad header: padded vocab Vp 64 is smaller than vocab V 70"));
  EXPECT_THAT(error_of([](std::string& b) { set_int(b, 5, 0); }),
              names("bad header: size NH is 0"));
  EXPECT_THAT(error_of([](std::string& b) { b.resize(b.size() - 2); }),
              names("truncated: 37630 bytes, but its header (maxT 32, V 70, L 2, NH 2, C 16, "
                    "Vp 128, float32) needs 37632"));
  EXPECT_THAT(error_of([](std::string& b) { b.resize(100); }),
              names("truncated: 100 bytes, fewer than the 1024-byte header"));
  EXPECT_THAT(error_of([](std::string& b) { set_int(b, 1, 5); }),
              names("18304 bytes after the last tensor: 37632 bytes, but its header (",
                    "bfloat16) needs 19328"));
  EXPECT_THAT(error_of([](std::string& b) { b += "tail"; }),
              names("4 bytes after the last tensor"));
  EXPECT_THAT(error_of([](std::string& b) { b.clear(); }), names("not an llm.c model file"));
  EXPECT_THAT(message_of<CheckpointError>([&] { read_llmc_file(dir / "absent.bin"); }),
              names((dir / "absent.bin").string(), ": cannot open the file"));
}

}  // namespace
}  // namespace mpitron::nn
