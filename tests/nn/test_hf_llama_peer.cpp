// Hugging Face Llama folders against the PyTorch peer (tools/make_golden_hf_llama.py: random
// tiny models with 4 heads on 2 key/value heads, tied, untied, and with Llama 3's rope_scaling):
// each folder is read as `train --init-from` reads it (read_hf_llama, gpt_config_of,
// pretrained_init) into a float32 GptStage, whose logits and loss must equal the peer's
// float64 ones within 1e-5 relative (logits relative to their largest magnitude).
#include <gtest/gtest.h>

#include "gpt_test_support.h"
#include "nn/checkpoint/hf_llama.h"
#include "nn/models/gpt.h"
#include "nn/models/gpt_pretrained.h"

namespace mpitron::nn {
namespace {

TEST(HfLlamaPeer, LogitsAndLossOfEachFolderMatchThePyTorchPeer) {
  const test::GoldenFile golden("hf_llama_golden.json");
  const comm::ParallelTopology topology(test::world(), 1, 1, test::world().size());
  for (const std::string name : {"tied", "untied", "scaled"}) {
    SCOPED_TRACE(name);
    const HfLlamaWeights weights =
        read_hf_llama(std::string(MPITRON_TEST_DATA_DIR) + "/hf_llama_" + name);
    const GptConfig config = gpt_config_of(weights.config);
    EXPECT_EQ(config.tied_embeddings, name == "tied");
    EXPECT_EQ(config.rope_scaling.active(), name == "scaled");
    const Gpt2Weights pretrained = pretrained_weights_of(weights);
    const GptStage stage(config, pretrained_init(pretrained, DType::f32, Device::cpu), topology);
    const Tensor tokens = test::golden_ids(golden, name + ".tokens");
    const Tensor hidden = stage.forward(tokens);
    const Tensor logits = stage.logits(hidden);
    const Tensor expected = golden.tensor(name + ".logits", DType::f32);
    ASSERT_EQ(logits.shape(), expected.shape());
    EXPECT_LE(test::max_rel_error(logits, expected), 1e-5);
    const double loss = stage.loss(hidden, test::golden_ids(golden, name + ".targets")).item();
    EXPECT_NEAR(loss, golden.scalar(name + ".loss"), 1e-5 * golden.scalar(name + ".loss"));
  }
}

}  // namespace
}  // namespace mpitron::nn
