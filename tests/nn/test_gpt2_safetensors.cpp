// GPT-2 weights in safetensors files: Hugging Face's names and Conv1D layout (the file
// tools/make_llmc_sample.py wrote with Python's struct), mpitron export's nanoGPT names (with
// and without the "transformer." prefix), the Hugging Face writer's round trip, the tied LM head,
// each bad file's one-line error, and load_pretrained's sniffing of the format.
#include "nn/checkpoint/gpt2_safetensors.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "autograd/ops.h"
#include "gpt2_weights_test_support.h"
#include "nn/checkpoint/pretrained.h"
#include "nn/models/gpt_names.h"
#include "nn/models/gpt_pretrained.h"
#include "scratch_dir_test_support.h"
#include "support/error_message.h"

namespace mpitron::nn {
namespace {

using autograd::Tensor;
using test::kGpt2Data;
using test::message_of;
using test::names;

const std::string kHf = kGpt2Data + "/hf_gpt2_sample.safetensors";

/// The sample's weights with wte cut to its V real rows, as a Hugging Face file holds them.
Gpt2Weights unpadded_sample() {
  Gpt2Weights weights = test::sample_weights();
  Tensor& wte = weights.tensors["transformer.wte.weight"];
  wte = autograd::narrow(wte, 0, 0, weights.sizes.vocab);
  weights.sizes.padded_vocab = weights.sizes.vocab;
  return weights;
}

void expect_sizes(const Gpt2Sizes& s, std::int64_t max_t, std::int64_t vocab,
                  std::int64_t padded_vocab, std::int64_t layers, std::int64_t heads,
                  std::int64_t hidden) {
  EXPECT_EQ(s.max_t, max_t);
  EXPECT_EQ(s.vocab, vocab);
  EXPECT_EQ(s.padded_vocab, padded_vocab);
  EXPECT_EQ(s.layers, layers);
  EXPECT_EQ(s.heads, heads);
  EXPECT_EQ(s.hidden, hidden);
}

class Gpt2Safetensors : public test::ScratchDirTest {
 protected:
  /// Writes `tensors` to a file in `dir` and returns its path.
  std::filesystem::path write(const std::vector<NamedTensor>& tensors,
                              const std::string& file = "model.safetensors") {
    write_safetensors(dir / file, tensors);
    return dir / file;
  }

  /// The Python-written Hugging Face file's tensors, changed by `change`, rewritten.
  std::filesystem::path hf_file_with(const std::function<void(std::vector<NamedTensor>&)>& change) {
    std::vector<NamedTensor> tensors = SafetensorsReader(kHf).read_all();
    change(tensors);
    return write(tensors);
  }

  /// The one-line error of reading `path` with `heads`.
  static std::string error_of(const std::filesystem::path& path, std::int64_t heads = 2) {
    const std::string message =
        message_of<CheckpointError>([&] { read_gpt2_safetensors(path, heads); });
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_EQ(message.rfind(path.string() + ": ", 0), 0u) << message;
    return message;
  }
};

TEST_F(Gpt2Safetensors, ReadsTheHuggingFaceFilePythonWrote) {
  const Gpt2Weights read = read_gpt2_safetensors(kHf, 2);
  expect_sizes(read.sizes, 32, 70, 70, 2, 2, 16);
  test::expect_same_tensors(read.tensors, unpadded_sample().tensors);
}

TEST_F(Gpt2Safetensors, ReadsTheNanoGptExportWithAndWithoutPrefix) {
  std::vector<NamedTensor> exported = gpt_export_tensors(test::sample_weights().tensors);
  const Gpt2Weights read = read_gpt2_safetensors(write(exported), 4);
  expect_sizes(read.sizes, 32, 128, 128, 2, 4, 16);
  test::expect_same_tensors(read.tensors, test::sample_weights().tensors);
  for (NamedTensor& named : exported)
    named.name.erase(0, std::string("transformer.").size());
  test::expect_same_tensors(read_gpt2_safetensors(write(exported, "bare.safetensors"), 2).tensors,
                            test::sample_weights().tensors);
}

TEST_F(Gpt2Safetensors, HuggingFaceExportIsPythonsLayoutAndReadsBack) {
  const std::vector<NamedTensor> exported =
      gpt_hf_export_tensors(test::sample_weights().tensors, 70);
  SafetensorsReader python(kHf);
  std::size_t compared = 0;
  for (const NamedTensor& named : exported) {
    EXPECT_EQ(std::get<Tensor>(named.value).to_vector(), python.read_tensor(named.name).to_vector())
        << named.name;
    ++compared;
  }
  EXPECT_EQ(compared + 2, python.entries().size());  // all but the two h.{i}.attn.bias masks
  const std::filesystem::path first = write(exported);
  const Gpt2Weights read = read_gpt2_safetensors(first, 2);
  test::expect_same_tensors(read.tensors, unpadded_sample().tensors);
  const std::filesystem::path second =
      write(gpt_hf_export_tensors(read.tensors, 70), "again.safetensors");
  EXPECT_EQ(test::file_bytes(first), test::file_bytes(second));
  EXPECT_THAT(message_of<std::invalid_argument>(
                  [] { gpt_hf_export_tensors(test::sample_weights().tensors, 129); }),
              names("gpt export: vocab 129 is not in [1, 128] (the rows of wte)"));
}

TEST_F(Gpt2Safetensors, TiedLmHeadIsIgnoredAnUntiedOneIsAnError) {
  const Tensor wte = SafetensorsReader(kHf).read_tensor("wte.weight");
  const auto tied = hf_file_with([&](auto& t) { t.push_back({"lm_head.weight", wte.clone()}); });
  test::expect_same_tensors(read_gpt2_safetensors(tied, 2).tensors, unpadded_sample().tensors);
  const auto untied = hf_file_with([&](auto& t) {
    t.push_back({"lm_head.weight", autograd::scale(wte, 2.0)});
  });
  EXPECT_THAT(error_of(untied), names("lm_head.weight differs from wte.weight (mpitron ties the "
                                      "LM head to the token embedding)"));
}

TEST_F(Gpt2Safetensors, NamesEachBadFileInOneLine) {
  const auto without = [&](const std::string& name) {
    return hf_file_with(
        [&](auto& t) { std::erase_if(t, [&](const NamedTensor& n) { return n.name == name; }); });
  };
  const auto with = [&](const std::string& name, Tensor value) {
    return hf_file_with([&](auto& t) {
      std::erase_if(t, [&](const NamedTensor& n) { return n.name == name; });
      t.push_back({name, value});
    });
  };
  EXPECT_THAT(error_of(without("h.1.mlp.c_fc.bias")),
              names("missing tensor 'h.1.mlp.c_fc.bias' (or 'transformer.h.1.mlp.c_fc.bias')"));
  EXPECT_THAT(error_of(with("h.0.attn.c_attn.weight", Tensor::zeros({16, 16}))),
              names("tensor 'h.0.attn.c_attn.weight' has shape [16, 16], expected [3C, C] = "
                    "[48, 16] (nanoGPT) or [C, 3C] = [16, 48] (Hugging Face Conv1D)"));
  EXPECT_THAT(error_of(with("h.1.mlp.c_fc.weight", Tensor::zeros({64, 16}))),
              names("tensor 'h.1.mlp.c_fc.weight' has shape [64, 16], expected [16, 64]"));
  EXPECT_THAT(error_of(with("h.0.mlp.gate.weight", Tensor::zeros({16}))),
              names("unexpected tensor 'h.0.mlp.gate.weight'"));
  EXPECT_THAT(error_of(with("transformer.wpe.weight", Tensor::zeros({32, 16}))),
              names("tensors 'wpe.weight' and 'transformer.wpe.weight' are the same tensor"));
  EXPECT_THAT(error_of(with("ln_f.bias", Tensor::zeros({16}, autograd::DType::i32))),
              names("tensor 'ln_f.bias' is I32, not a floating dtype (F32, F64, BF16 or F16)"));
  EXPECT_THAT(
      error_of(kHf, 0),
      names("a safetensors file does not record the number of attention heads: give --heads"));
  EXPECT_THAT(error_of(kHf, 3), names("hidden C 16 is not divisible by heads NH 3"));
}

TEST_F(Gpt2Safetensors, Float64FilesReadAsFloat32) {
  const auto wide = hf_file_with([](auto& t) {
    for (NamedTensor& n : t) {
      const Tensor& x = std::get<Tensor>(n.value);
      n.value = Tensor::from_vector(x.to_vector(), x.shape(), autograd::DType::f64);
    }
  });
  test::expect_same_tensors(read_gpt2_safetensors(wide, 2).tensors, unpadded_sample().tensors);
}

TEST_F(Gpt2Safetensors, LoadPretrainedSniffsTheFormat) {
  const Gpt2Weights llmc = load_pretrained(kGpt2Data + "/llmc_sample_bf16.bin", 5);
  expect_sizes(llmc.sizes, 32, 70, 128, 2, 2, 16);  // NH from the header
  test::expect_same_tensors(llmc.tensors, test::sample_weights().tensors);
  const Gpt2Weights hf = load_pretrained(kHf, 4);
  expect_sizes(hf.sizes, 32, 70, 70, 2, 4, 16);
  test::expect_same_tensors(hf.tensors, unpadded_sample().tensors);

  test::put_file_bytes(dir / "notes.txt", "GPT-2 weights, honestly\n");
  EXPECT_THAT(message_of<CheckpointError>([&] { load_pretrained(dir / "notes.txt", 2); }),
              names((dir / "notes.txt").string(),
                    ": not an llm.c model file (magic 760500295, expected "
                    "20240326) or a safetensors file"));
  test::put_file_bytes(dir / "empty.bin", "");
  EXPECT_THAT(message_of<CheckpointError>([&] { load_pretrained(dir / "empty.bin", 2); }),
              names("empty.bin: empty file (0 bytes), not an llm.c model file or a safetensors "
                    "file"));
  EXPECT_THAT(message_of<CheckpointError>([&] { load_pretrained(dir / "absent.bin", 2); }),
              names("absent.bin: cannot open the file"));
  // A safetensors file that is damaged is named by the safetensors reader.
  std::string bytes = test::file_bytes(kHf);
  bytes.resize(bytes.size() - 4);
  test::put_file_bytes(dir / "short.safetensors", bytes);
  EXPECT_THAT(message_of<CheckpointError>([&] { load_pretrained(dir / "short.safetensors", 2); }),
              names("short.safetensors: short data"));
  // One cut inside its header is a truncated safetensors file, not an unknown format.
  std::uint64_t header = 0;
  std::memcpy(&header, bytes.data(), sizeof(header));
  bytes.resize(100);
  test::put_file_bytes(dir / "cut.safetensors", bytes);
  EXPECT_THAT(message_of<CheckpointError>([&] { load_pretrained(dir / "cut.safetensors", 2); }),
              names(fmt::format("cut.safetensors: truncated safetensors file: its header is {} "
                                "bytes, the file holds 92 after the 8-byte length",
                                header)));
}

TEST(PretrainedInit, GivesEveryParameterWithTheEmbeddingRefitted) {
  const Gpt2Weights hf = read_gpt2_safetensors(kHf, 2);  // wte [70, 16]
  const GptConfig config{
      .vocab = 70, .block_size = 32, .layers = 2, .hidden = 16, .heads = 2, .padded_vocab = 128};
  const MasterInit init = pretrained_init(hf, autograd::DType::f64, autograd::Device::cpu);
  const std::map<std::string, Tensor> padded = test::sample_weights().tensors;  // wte [128, 16]
  for (const ParameterSpec& spec : gpt_parameter_specs(config)) {
    const Tensor t = init(spec);
    EXPECT_EQ(t.dtype(), autograd::DType::f64) << spec.name;
    EXPECT_EQ(t.to_vector(), padded.at(spec.name).to_vector()) << spec.name;
  }
  const Gpt2Weights back = gpt2_weights_of(config, padded);
  EXPECT_EQ(back.sizes.vocab, 70);
  EXPECT_EQ(back.sizes.padded_vocab, 128);
  EXPECT_EQ(back.sizes.max_t, 32);
  EXPECT_EQ(back.sizes.heads, 2);
}

}  // namespace
}  // namespace mpitron::nn
