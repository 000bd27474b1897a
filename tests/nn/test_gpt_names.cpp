// The GPT export: names and shapes against the layout in the PyTorch peer's docstring, and the
// exported tensors against the state dict the peer's GPT holds after strict loading
// (tools/make_gpt_export_golden.py).
#include "nn/models/gpt_names.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "scratch_dir_test_support.h"
#include "support/error_message.h"

namespace mpitron::nn {
namespace {

using test::message_of;
using test::names;

using autograd::Shape;
using autograd::Tensor;

const std::string kData = MPITRON_TEST_DATA_DIR;

std::map<std::string, Tensor> read_map(const std::string& path) {
  SafetensorsReader reader(path);
  std::map<std::string, Tensor> tensors;
  for (const SafetensorsEntry& e : reader.entries())
    tensors[e.name] = reader.read_tensor(e.name);
  return tensors;
}

/// The state-dict names and shapes listed at the top of tools/torch_peer_gpt.py, in
/// nanoGPT's order, for `layers` blocks of hidden size c, vocabulary 256 and context `block`.
std::vector<std::pair<std::string, Shape>> docstring_layout(int layers, std::int64_t c,
                                                            std::int64_t block) {
  std::vector<std::pair<std::string, Shape>> layout = {{"transformer.wte.weight", {256, c}},
                                                       {"transformer.wpe.weight", {block, c}}};
  for (int i = 0; i < layers; ++i) {
    const std::string h = "transformer.h." + std::to_string(i) + ".";
    const std::pair<std::string, Shape> block_layout[] = {{h + "ln_1.weight", {c}},
                                                          {h + "ln_1.bias", {c}},
                                                          {h + "attn.c_attn.weight", {3 * c, c}},
                                                          {h + "attn.c_attn.bias", {3 * c}},
                                                          {h + "attn.c_proj.weight", {c, c}},
                                                          {h + "attn.c_proj.bias", {c}},
                                                          {h + "ln_2.weight", {c}},
                                                          {h + "ln_2.bias", {c}},
                                                          {h + "mlp.c_fc.weight", {4 * c, c}},
                                                          {h + "mlp.c_fc.bias", {4 * c}},
                                                          {h + "mlp.c_proj.weight", {c, 4 * c}},
                                                          {h + "mlp.c_proj.bias", {c}}};
    layout.insert(layout.end(), std::begin(block_layout), std::end(block_layout));
  }
  layout.push_back({"transformer.ln_f.weight", {c}});
  layout.push_back({"transformer.ln_f.bias", {c}});
  return layout;
}

class GptExport : public test::ScratchDirTest {
 protected:
  std::map<std::string, Tensor> input = read_map(kData + "/gpt_mpitron_names.safetensors");
};

TEST_F(GptExport, NamesAndShapesAreThePeersLayout) {
  const std::vector<NamedTensor> exported = gpt_export_tensors(input);
  const auto layout = docstring_layout(2, 8, 16);
  const nlohmann::json golden =
      nlohmann::json::parse(test::file_bytes(kData + "/gpt_export_golden.json"));
  ASSERT_EQ(exported.size(), layout.size());
  ASSERT_EQ(golden["names"].size(), layout.size());
  for (std::size_t i = 0; i < layout.size(); ++i) {
    const Tensor& t = std::get<Tensor>(exported[i].value);
    EXPECT_EQ(exported[i].name, layout[i].first);
    EXPECT_EQ(t.shape(), layout[i].second) << layout[i].first;
    // torch's state_dict of the peer's GPT: same names, order and shapes.
    EXPECT_EQ(golden["names"][i].get<std::string>(), layout[i].first);
    EXPECT_EQ(golden["shapes"][i].get<Shape>(), layout[i].second) << layout[i].first;
  }
}

TEST_F(GptExport, EqualsTheStateDictThePeerLoaded) {
  const std::vector<NamedTensor> exported = gpt_export_tensors(input);
  SafetensorsReader expected(kData + "/gpt_export_expected.safetensors");
  ASSERT_EQ(exported.size(), expected.entries().size());
  for (std::size_t i = 0; i < exported.size(); ++i) {
    ASSERT_EQ(exported[i].name, expected.entries()[i].name);
    EXPECT_EQ(std::get<Tensor>(exported[i].value).to_vector(),
              expected.read_tensor(exported[i].name).to_vector())
        << exported[i].name;
  }
  // c_attn stacks q, k, v rows in that order.
  const std::vector<double> k = input["transformer.h.1.attn.k.weight"].to_vector();
  const std::vector<double> c_attn = std::get<Tensor>(exported[16].value).to_vector();
  ASSERT_EQ(exported[16].name, "transformer.h.1.attn.c_attn.weight");
  EXPECT_EQ(std::vector<double>(c_attn.begin() + 64, c_attn.begin() + 128), k);
  // Written with our writer, the file is byte for byte the one Python wrote of torch's state.
  write_safetensors(dir / "model.safetensors", exported);
  EXPECT_EQ(test::file_bytes(dir / "model.safetensors"),
            test::file_bytes(kData + "/gpt_export_expected.safetensors"));
}

TEST_F(GptExport, RejectsMissingUnexpectedAndMisshapenTensors) {
  const auto message = [](const std::map<std::string, Tensor>& tensors) {
    return message_of<std::invalid_argument>([&] { gpt_export_tensors(tensors); });
  };
  auto missing = input;
  missing.erase("transformer.h.1.attn.v.bias");
  EXPECT_THAT(message(missing), names("gpt export: missing tensor 'transformer.h.1.attn.v.bias'"));
  auto extra = input;
  extra["transformer.h.0.attn.q.weight.exp_avg"] = Tensor::zeros({8, 8});
  EXPECT_THAT(message(extra),
              names("gpt export: unexpected tensor 'transformer.h.0.attn.q.weight.exp_avg'"));
  auto misshapen = input;
  misshapen["transformer.h.0.mlp.c_fc.weight"] = Tensor::zeros({16, 8});
  EXPECT_THAT(message(misshapen), names("gpt export: tensor 'transformer.h.0.mlp.c_fc.weight' "
                                        "has shape [16, 8], expected [32, 8]"));
  auto gap = input;
  for (const auto& [name, t] : input) {
    if (name.starts_with("transformer.h.1.")) {
      gap.erase(name);
      gap["transformer.h.2." + name.substr(16)] = t;
    }
  }
  EXPECT_THAT(message(gap), names("missing tensor 'transformer.h.1.ln_1.weight'"));
  EXPECT_THAT(message({}), names("missing tensor 'transformer.wte.weight'"));
}

}  // namespace
}  // namespace mpitron::nn
