// The pure parts of GPT training (1 process): byte corpus, window sampler, token batches,
// learning-rate schedule, token sampling and the counted nouns of messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <set>

#include "autograd/ops.h"
#include "nn/data/token_corpus.h"
#include "nn/data/token_shard.h"
#include "nn/models/generate.h"
#include "nn/models/gpt_config.h"
#include "nn/optim/lr_schedule.h"
#include "nn/wording.h"

namespace mpitron::nn {
namespace {

TEST(Wording, CountedNounsAreSingularOnlyForOne) {
  EXPECT_EQ(counted(1, "rank"), "1 rank");
  EXPECT_EQ(counted(2, "rank"), "2 ranks");
  EXPECT_EQ(counted(0, "byte"), "0 bytes");
  EXPECT_EQ(counted(1, "micro-batch", "micro-batches"), "1 micro-batch");
  EXPECT_EQ(counted(3, "micro-batch", "micro-batches"), "3 micro-batches");
}

TEST(GptConfig, PaddedVocabularyIsAMultipleOf128ThatTpDivides) {
  for (const int tp : {1, 2, 4, 8, 16, 128})
    EXPECT_EQ(padded_vocab_size(50257, tp), 50304) << "tp " << tp;
  EXPECT_EQ(padded_vocab_size(50257, 3), 50304);  // 50304 = 131 x 384
  EXPECT_EQ(padded_vocab_size(50257, 256), 50432);
  EXPECT_EQ(padded_vocab_size(256, 1), 256);
  EXPECT_EQ(padded_vocab_size(256, 3), 384);
  EXPECT_EQ(padded_vocab_size(128, 5), 640);
  EXPECT_EQ(padded_vocab_size(1, 1), 128);
  EXPECT_THROW(padded_vocab_size(0, 1), std::invalid_argument);
}

TEST(GptConfig, PaddingRowsAreZeroAndTheVocabularyRowsDoNotDependOnThem) {
  GptConfig unpadded{200, 8, 1, 16, 4};
  GptConfig padded = unpadded;
  padded.padded_vocab = 256;
  const ParameterSpec small = gpt_parameter_specs(unpadded).front();
  const ParameterSpec large = gpt_parameter_specs(padded).front();
  ASSERT_EQ(large.name, "transformer.wte.weight");
  EXPECT_EQ(large.full_shape, (Shape{256, 16}));
  EXPECT_EQ(large.used_rows, 200);
  for (const MasterInit& init :
       {gpt2_init(5, 1, DType::f64, Device::cpu), random_init(5, DType::f64, Device::cpu)}) {
    const std::vector<double> a = init(small).to_vector(), b = init(large).to_vector();
    ASSERT_EQ(b.size(), 256u * 16u);
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin()));
    EXPECT_TRUE(std::all_of(b.begin() + 200 * 16, b.end(), [](double v) { return v == 0.0; }));
  }
  const Tensor wte = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {3, 2}, DType::f64);
  EXPECT_EQ(fit_vocab_rows(wte, 2, 4).to_vector(), (std::vector<double>{1, 2, 3, 4, 0, 0, 0, 0}));
  EXPECT_EQ(fit_vocab_rows(wte, 2, 2).to_vector(), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_THROW(fit_vocab_rows(wte, 4, 4), std::invalid_argument);
}

// The parameters of `config`'s model, every tensor counted once.
std::int64_t parameter_count(const GptConfig& config) {
  std::int64_t count = 0;
  for (const ParameterSpec& spec : gpt_parameter_specs(config)) {
    std::int64_t n = 1;
    for (const std::int64_t d : spec.full_shape)
      n *= d;
    count += n;
  }
  return count;
}

TEST(GptConfig, Gpt2ModelsAndGeluNames) {
  const std::optional<GptConfig> small = model_preset("gpt2");
  ASSERT_TRUE(small);
  EXPECT_EQ(small->vocab, 50257);
  EXPECT_EQ(small->block_size, 1024);
  EXPECT_EQ(small->gelu, GeluForm::tanh);
  // 124M: the count Hugging Face reports for gpt2 (wte tied, no padding).
  EXPECT_EQ(parameter_count(*small), 124439808);
  EXPECT_EQ(model_preset("gpt2-xl")->layers, 48);
  EXPECT_EQ(model_preset("gpt2-xl")->heads, 25);
  EXPECT_FALSE(model_preset("gpt3"));
  EXPECT_EQ(gelu_form_from_string("tanh"), GeluForm::tanh);
  EXPECT_STREQ(to_string(gelu_form_from_string("erf")), "erf");
  EXPECT_THROW(gelu_form_from_string("relu"), std::invalid_argument);
}

TEST(GptConfig, LlamaPresetsHaveTheirPublishedParameterCounts) {
  // The counts Hugging Face's num_parameters() reports for each model (tied embeddings counted
  // once): a wrong size, head count, kv head count or tying changes them.
  const std::pair<const char*, std::int64_t> published[] = {{"smollm-135m", 134515008},
                                                            {"smollm2-360m", 361821120},
                                                            {"tinyllama-1.1b", 1100048384},
                                                            {"llama-3.2-1b", 1235814400},
                                                            {"llama-3-8b", 8030261248}};
  for (const auto& [name, count] : published) {
    const std::optional<GptConfig> config = model_preset(name);
    ASSERT_TRUE(config) << name;
    EXPECT_TRUE(config->llama()) << name;
    EXPECT_EQ(config->norm_eps, 1e-5) << name;
    EXPECT_EQ(parameter_count(*config), count) << name;
  }
  const std::optional<GptConfig> llama32 = model_preset("llama-3.2-1b");
  EXPECT_EQ(llama32->rope_theta, 500000.0);
  EXPECT_EQ(llama32->rope_scaling.factor, 32.0);
  EXPECT_EQ(model_preset("smollm-135m")->rope_scaling.factor, 0.0);
}

TEST(WindowSampler, StepUnionIsTheSameForEveryReplicaCount) {
  const std::int64_t train_bytes = 1000, seq = 16, global = 24;
  WindowSampler one(train_bytes, seq, global, 1, 0, 9);
  for (const int replicas : {2, 3, 4, 6}) {
    std::vector<WindowSampler> parts;
    for (int d = 0; d < replicas; ++d)
      parts.emplace_back(train_bytes, seq, global, replicas, d, 9);
    for (const std::int64_t step : {0, 1, 7, 40, 41}) {  // 40 crosses into the second epoch
      const std::vector<std::int64_t> whole = one.starts(step);
      std::multiset<std::int64_t> expected(whole.begin(), whole.end()), got;
      for (WindowSampler& part : parts) {
        const std::vector<std::int64_t> mine = part.starts(step);
        EXPECT_EQ(static_cast<std::int64_t>(mine.size()), global / replicas);
        got.insert(mine.begin(), mine.end());
      }
      EXPECT_EQ(got, expected) << replicas << " replicas, step " << step;
    }
  }
}

TEST(WindowSampler, EpochsArePermutationsOfEveryWindow) {
  const std::int64_t train_bytes = 100, seq = 10;  // 90 windows, 9 steps of 10 per epoch
  WindowSampler sampler(train_bytes, seq, 10, 1, 0, 3);
  EXPECT_EQ(sampler.steps_per_epoch(), 9);
  for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
    std::set<std::int64_t> seen;
    for (std::int64_t step = 0; step < 9; ++step) {
      for (const std::int64_t s : sampler.starts(epoch * 9 + step)) {
        EXPECT_TRUE(s >= 0 && s + seq < train_bytes);
        seen.insert(s);
      }
    }
    EXPECT_EQ(seen.size(), 90u);
  }
  EXPECT_NE(sampler.starts(0), sampler.starts(9));  // a new shuffle each epoch
}

TEST(WindowSampler, BadSizesHaveTheirMessages) {
  try {
    WindowSampler(10, 16, 8, 1, 0, 0);
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "training data of 10 tokens is shorter than one window of seq + 1 = 17 tokens");
  }
  EXPECT_THROW(WindowSampler(100, 16, 6, 4, 0, 0), std::invalid_argument);
  EXPECT_THROW(WindowSampler(20, 16, 8, 1, 0, 0), std::invalid_argument);  // 4 windows < batch 8
}

// llm.c's DataLoader: step k reads the G T + 1 tokens from k G T, sequence i starting at
// (k G + i) T; replicas take every dp-th sequence; the epoch wraps to token 0.
TEST(WindowSampler, SequentialOrderIsLlmcsBatchGeometry) {
  const std::int64_t tokens = 1000, seq = 16, global = 4;  // floor(999 / 64) = 15 steps
  WindowSampler one(tokens, seq, global, 1, 0, 7, DataOrder::sequential);
  EXPECT_EQ(one.steps_per_epoch(), 15);
  EXPECT_EQ(one.starts(0), (std::vector<std::int64_t>{0, 16, 32, 48}));
  EXPECT_EQ(one.starts(2), (std::vector<std::int64_t>{128, 144, 160, 176}));
  EXPECT_EQ(one.starts(15), one.starts(0));
  WindowSampler second(tokens, seq, global, 2, 1, 7, DataOrder::sequential);
  EXPECT_EQ(second.starts(2), (std::vector<std::int64_t>{144, 176}));
  // The last step's last window ends inside the tokens.
  EXPECT_LE(one.starts(14).back() + seq + 1, tokens);
}

TEST(TokenCorpus, ShardsTrainThenValidateAndBinFilesAreShards) {
  const auto dir = std::filesystem::temp_directory_path() / "mpitron_token_corpus_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::vector<std::int32_t> a = {1, 2, 3}, b = {50000, 5}, val = {7, 8};
  write_token_shard((dir / "x_train_000001.bin").string(), b);
  write_token_shard((dir / "x_train_000000.bin").string(), a);
  write_token_shard((dir / "x_val_000000.bin").string(), val);
  const TokenCorpus corpus = TokenCorpus::from_data(dir.string(), 50257);
  EXPECT_EQ(corpus.tokens(), (std::vector<std::uint32_t>{1, 2, 3, 50000, 5, 7, 8}));
  EXPECT_EQ(corpus.split(), 5u);
  EXPECT_FALSE(corpus.is_bytes());
  EXPECT_STREQ(corpus.unit(), "token");
  // One train shard alone: its first 90 % trains.
  const TokenCorpus one = TokenCorpus::from_data((dir / "x_train_000000.bin").string(), 50257);
  EXPECT_EQ(one.tokens().size(), 3u);
  EXPECT_EQ(one.split(), 2u);
  EXPECT_THROW(TokenCorpus::from_data(dir.string(), 50000), std::runtime_error);  // 50000 >= V
  // Val shards alone: refused for training, taken for scoring, where every token validates.
  const std::string val_glob = (dir / "*val*.bin").string();
  EXPECT_THROW(TokenCorpus::from_data(val_glob, 50257), std::runtime_error);
  const TokenCorpus val_alone = TokenCorpus::from_data(val_glob, 50257, ValShardsAlone::taken);
  EXPECT_EQ(val_alone.tokens(), (std::vector<std::uint32_t>{7, 8}));
  EXPECT_EQ(val_alone.split(), 0u);
  std::ofstream((dir / "text.bin").string()) << "plain text, not a shard";
  EXPECT_THROW(TokenCorpus::from_data((dir / "text.bin").string(), 50257), std::runtime_error);
  std::filesystem::remove_all(dir);
}

TEST(TokenBatch, TargetsAreInputsShiftedByOneByte) {
  const std::vector<std::uint32_t> bytes = {'a', 'b', 'c', 'd', 'e', 'f'};
  const TokenBatch b = make_token_batch(bytes, {0, 2}, 3, Device::cpu);
  EXPECT_EQ(b.inputs.shape(), (autograd::Shape{2, 3}));
  EXPECT_EQ(b.inputs.to_vector(), (std::vector<double>{'a', 'b', 'c', 'c', 'd', 'e'}));
  EXPECT_EQ(b.targets.to_vector(), (std::vector<double>{'b', 'c', 'd', 'd', 'e', 'f'}));
  EXPECT_THROW(make_token_batch(bytes, {3}, 3, Device::cpu), std::out_of_range);
  const std::vector<TokenBatch> parts = replica_micro_batches(b, 2, 1, 1);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].inputs.to_vector(), (std::vector<double>{'c', 'd', 'e'}));
  EXPECT_THROW(replica_micro_batches(b, 2, 0, 2), std::invalid_argument);
}

TEST(EvaluationWindows, NonOverlappingWindowsWhoseTargetsFit) {
  // 33 bytes, seq 8: windows at 0, 8, 16, 24 (the last needs bytes up to 32).
  EXPECT_EQ(evaluation_starts(33, 8, 0, 1, 0), (std::vector<std::int64_t>{0, 8, 16, 24}));
  EXPECT_EQ(evaluation_starts(32, 8, 0, 1, 0), (std::vector<std::int64_t>{0, 8, 16}));
  EXPECT_EQ(evaluation_starts(33, 8, 3, 2, 1), (std::vector<std::int64_t>{8}));
  EXPECT_TRUE(evaluation_starts(5, 8, 0, 1, 0).empty());
}

TEST(TokenCorpus, BuiltinIsDeterministicTextAndFilesAreReadWhole) {
  const TokenCorpus a = TokenCorpus::builtin(), b = TokenCorpus::builtin();
  EXPECT_EQ(a.fingerprint(), b.fingerprint());
  EXPECT_GE(a.tokens().size(), 65536u);
  EXPECT_EQ(a.split(), a.tokens().size() * 9 / 10);
  const auto path = std::filesystem::temp_directory_path() / "mpitron_corpus_test.txt";
  std::ofstream(path, std::ios::binary) << std::string("hello\0world", 11);
  EXPECT_EQ(TokenCorpus::from_file(path.string()).tokens().size(), 11u);
  std::filesystem::remove(path);
  try {
    TokenCorpus::from_file(path.string());
    ADD_FAILURE();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), path.string() + ": cannot read: No such file or directory");
  }
}

TEST(TokenCorpus, ADirectoryIsNamedInItsError) {
  const auto dir = std::filesystem::temp_directory_path();
  try {
    TokenCorpus::from_file(dir.string());
    ADD_FAILURE() << "a directory was read as a corpus";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), dir.string() + ": is a directory");
  }
}

TEST(LrSchedule, LinearWarmupThenCosineToTheMinimum) {
  const LrSchedule s{1e-3, 1e-4, 20, 200};
  EXPECT_DOUBLE_EQ(s.at(1), 1e-3 / 20);
  EXPECT_DOUBLE_EQ(s.at(20), 1e-3);
  EXPECT_DOUBLE_EQ(s.at(200), 1e-4);
  EXPECT_NEAR(s.at(110), 1e-4 + 0.5 * 9e-4, 1e-15);  // halfway: cos(pi / 2) = 0
  const double p = (57.0 - 20.0) / 180.0;
  EXPECT_NEAR(s.at(57), 1e-4 + 0.5 * 9e-4 * (1 + std::cos(std::numbers::pi * p)), 1e-15);
}

TEST(LrSchedule, LinearAndConstantDecayStyles) {
  LrSchedule s{1e-3, 1e-4, 20, 200, LrDecayStyle::linear};
  EXPECT_DOUBLE_EQ(s.at(10), 1e-3 / 2);  // warmup is the same in every style
  EXPECT_DOUBLE_EQ(s.at(20), 1e-3);
  EXPECT_NEAR(s.at(65), 1e-4 + 9e-4 * 0.75, 1e-15);  // a quarter of the way: p = 45 / 180
  EXPECT_DOUBLE_EQ(s.at(200), 1e-4);
  EXPECT_DOUBLE_EQ(s.at(300), 1e-4);
  s.style = LrDecayStyle::constant;
  EXPECT_DOUBLE_EQ(s.at(10), 1e-3 / 2);
  EXPECT_DOUBLE_EQ(s.at(21), 1e-3);
  EXPECT_DOUBLE_EQ(s.at(200), 1e-3);
  for (const char* name : {"cosine", "linear", "constant"})
    EXPECT_STREQ(to_string(lr_decay_style_from_string(name)), name);
  EXPECT_THROW(lr_decay_style_from_string("exponential"), std::invalid_argument);
}

TEST(SampleToken, GreedyTopKAndInversion) {
  const auto sampling = [](double temperature, std::int64_t top_k) {
    SamplingOptions options;
    options.temperature = temperature;
    options.top_k = top_k;
    return options;
  };
  const std::vector<double> logits = {0.0, 2.0, 2.0, std::log(0.5) + 2.0};
  // Greedy: the argmax, the lowest id on ties.
  EXPECT_EQ(sample_token(logits, sampling(0.0, 0), 0.99), 1);
  // Temperature 1: ids in the order 1, 2, 3, 0 with weights 1, 1, 1/2, e^-2.
  const double z = 2.5 + std::exp(-2.0);
  EXPECT_EQ(sample_token(logits, sampling(1.0, 0), 0.0), 1);
  EXPECT_EQ(sample_token(logits, sampling(1.0, 0), 1.0 / z + 1e-9), 2);
  EXPECT_EQ(sample_token(logits, sampling(1.0, 0), 2.5 / z - 1e-9), 3);
  EXPECT_EQ(sample_token(logits, sampling(1.0, 0), 0.999999), 0);
  // Top-2: only ids 1 and 2, half each.
  EXPECT_EQ(sample_token(logits, sampling(1.0, 2), 0.49), 1);
  EXPECT_EQ(sample_token(logits, sampling(1.0, 2), 0.51), 2);
  EXPECT_THROW(sample_token(logits, sampling(-1.0, 0), 0.5), std::invalid_argument);
}

}  // namespace
}  // namespace mpitron::nn
