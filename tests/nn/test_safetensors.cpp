// The safetensors reader and writer: round trip, the exact bytes of a tiny file, a file written by
// Python (tools/make_safetensors_sample.py), and one message for each kind of damage.
#include "nn/checkpoint/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "scratch_dir_test_support.h"
#include "support/error_message.h"

namespace mpitron::nn {
namespace {

using test::message_of;
using test::names;

using autograd::DType;
using autograd::Shape;
using autograd::Tensor;

/// A file: the 8-byte little-endian `length` (default: the header's), `header`, then `data`.
std::string raw_file(const std::string& header, const std::string& data,
                     std::uint64_t length = std::numeric_limits<std::uint64_t>::max()) {
  if (length == std::numeric_limits<std::uint64_t>::max()) length = header.size();
  std::string bytes;
  for (int i = 0; i < 8; ++i)
    bytes.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  return bytes + header + data;
}

class Safetensors : public test::ScratchDirTest {
 protected:
  /// The CheckpointError message of opening a file made of `bytes`.
  std::string damage(const std::string& bytes) {
    test::put_file_bytes(dir / "bad.safetensors", bytes);
    return message_of<CheckpointError>([&] { SafetensorsReader reader(dir / "bad.safetensors"); });
  }
};

TEST_F(Safetensors, RoundTripKeepsOrderValuesAndMetadata) {
  const Tensor weight = Tensor::from_vector({1.5, -2.25, 3e-7, 4e20, 0, -0.0}, {2, 3});
  const Tensor bias = Tensor::from_vector({1.0 / 3.0, -1e-300}, {2}, DType::f64);
  const Tensor scalar = Tensor::full({}, 7.0);
  const Tensor empty = Tensor::zeros({0, 5});
  const Int64Tensor ids{{3}, {-5, 0, std::numeric_limits<std::int64_t>::max()}};
  const SafetensorsMetadata metadata = {{"step", "12"}, {"note", "a \"quoted\" value"}};
  write_safetensors(
      dir / "a.safetensors",
      {{"z.weight", weight}, {"a.bias", bias}, {"ids", ids}, {"scalar", scalar}, {"empty", empty}},
      metadata);

  SafetensorsReader reader(dir / "a.safetensors");
  ASSERT_EQ(reader.entries().size(), 5u);
  const std::vector<std::string> order = {"z.weight", "a.bias", "ids", "scalar", "empty"};
  for (std::size_t i = 0; i < order.size(); ++i)
    EXPECT_EQ(reader.entries()[i].name, order[i]);
  EXPECT_EQ(reader.metadata(), metadata);
  EXPECT_EQ(reader.read_tensor("z.weight").to_vector(), weight.to_vector());
  const Tensor read_bias = reader.read_tensor("a.bias");
  EXPECT_EQ(read_bias.dtype(), DType::f64);
  EXPECT_EQ(read_bias.to_vector(), bias.to_vector());
  EXPECT_EQ(reader.read_int64("ids").values, ids.values);
  EXPECT_EQ(reader.read_tensor("scalar").shape(), Shape{});
  EXPECT_EQ(reader.read_tensor("scalar").item(), 7.0);
  EXPECT_EQ(reader.read_tensor("empty").shape(), (Shape{0, 5}));
  EXPECT_EQ(reader.read_all().size(), 5u);
  // Only the file itself is left: the temporary name was renamed.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);
}

TEST_F(Safetensors, TinyFileHasTheHandComputedBytes) {
  write_safetensors(dir / "tiny.safetensors",
                    {{"a", Tensor::from_vector({1.0, -2.0}, {2})}, {"b", Int64Tensor{{1}, {5}}}},
                    {{"k", "v"}});
  // 133 header characters, padded with 3 spaces to 136 = 0x88.
  const std::string header =
      R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"I64","shape":[1],"data_offsets":[8,16]}}   )";
  const std::string expected = std::string("\x88\0\0\0\0\0\0\0", 8) + header +
                               std::string("\0\0\x80\x3f\0\0\0\xc0", 8) +  // 1.0f, -2.0f
                               std::string("\x05\0\0\0\0\0\0\0", 8);       // int64 5
  ASSERT_EQ(header.size(), 136u);
  EXPECT_EQ(test::file_bytes(dir / "tiny.safetensors"), expected);
}

TEST_F(Safetensors, ReadsTheFileWrittenByPython) {
  SafetensorsReader reader(std::string(MPITRON_TEST_DATA_DIR) + "/sample.safetensors");
  std::vector<std::string> names;
  for (const SafetensorsEntry& e : reader.entries())
    names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"weight", "bias", "ids", "empty", "scalar"}));
  EXPECT_EQ(reader.metadata(),
            (SafetensorsMetadata{{"format", "pt"}, {"written_by", "python struct + json"}}));
  const Tensor weight = reader.read_tensor("weight");
  EXPECT_EQ(weight.dtype(), DType::f32);
  EXPECT_EQ(weight.shape(), (Shape{2, 3}));
  EXPECT_EQ(weight.to_vector(), (std::vector<double>{-1, -0.5, 0, 0.5, 1, 1.5}));
  EXPECT_EQ(reader.read_tensor("bias").to_vector(), (std::vector<double>{1.0 / 3, -2.25, 1e-300}));
  EXPECT_EQ(reader.read_int64("ids").values,
            (std::vector<std::int64_t>{-1, 0, std::int64_t{1} << 40, 7}));
  EXPECT_EQ(reader.read_int64("ids").shape, (Shape{2, 2}));
  EXPECT_EQ(reader.read_tensor("scalar").item(), 3.0);
  EXPECT_EQ(reader.read_tensor("empty").shape(), (Shape{0, 4}));
}

TEST_F(Safetensors, EachKindOfDamageHasItsMessage) {
  const std::string path = (dir / "bad.safetensors").string();
  const std::string f32x2 = R"("dtype":"F32","shape":[2])";
  const std::string eight(8, 'x');
  EXPECT_THAT(damage("abc"), names(path, "3 bytes, fewer than the 8-byte header length"));
  EXPECT_THAT(damage(raw_file("{}", "", 1000)),
              names(path, "header length 1000 is beyond the file (10 bytes)"));
  EXPECT_THAT(damage(raw_file(R"({"a": )", "")), names(path, "bad JSON header"));
  EXPECT_THAT(damage(raw_file("[1, 2]", "")), names("the JSON header is not an object"));
  EXPECT_THAT(
      damage(raw_file(R"({"a":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,4]}})", "xxxx")),
      names(path, "tensor 'a' has unknown dtype \"F8_E4M3\""));
  EXPECT_THAT(damage(raw_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight)),
              names("tensor 'a' has shape [-2], not a list of non-negative integers"));
  EXPECT_THAT(damage(raw_file(R"({"a":{"dtype":"F32","shape":[2]}})", eight)),
              names("tensor 'a' is {", "not {\"dtype\", \"shape\", \"data_offsets\"}"));
  EXPECT_THAT(damage(raw_file(R"({"__metadata__":{"k":1}})", "")),
              names("__metadata__ is not an object of strings"));
  EXPECT_THAT(damage(raw_file("{\"a\":{" + f32x2 + R"(,"data_offsets":[8,0]}})", eight)),
              names(path, "tensor 'a' has data_offsets [8, 0] out of order"));
  EXPECT_THAT(damage(raw_file("{\"a\":{" + f32x2 + R"(,"data_offsets":[0,8]},"b":{)" + f32x2 +
                                  R"(,"data_offsets":[4,12]}})",
                              eight + "yyyy")),
              names(path, "tensors 'a' [0, 8] and 'b' [4, 12] overlap"));
  EXPECT_THAT(damage(raw_file("{\"a\":{" + f32x2 + R"(,"data_offsets":[0,8]},"b":{)" + f32x2 +
                                  R"(,"data_offsets":[12,20]}})",
                              eight + eight + "yyyy")),
              names(path, "data bytes [8, 12) before tensor 'b' belong to no tensor"));
  EXPECT_THAT(damage(raw_file("{\"a\":{" + f32x2 + R"(,"data_offsets":[0,8]},"b":{)" + f32x2 +
                                  R"(,"data_offsets":[100,108]}})",
                              eight)),
              names(path, "tensor 'b' data_offsets [100, 108] lie beyond the 8 bytes of data"));
  EXPECT_THAT(
      damage(raw_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight)),
      names(path,
            "tensor 'a' of shape [3] and dtype F32 needs 12 bytes but its data_offsets [0, 8] "
            "hold 8"));
  EXPECT_THAT(damage(raw_file("{\"a\":{" + f32x2 + R"(,"data_offsets":[0,8]}})", "xxxx")),
              names(path, "short data: tensor 'a' needs data bytes [0, 8) but the file holds 4"));
  EXPECT_THAT(damage(raw_file("{\"a\":{" + f32x2 + R"(,"data_offsets":[0,8]}})", eight + "zz")),
              names(path, "2 bytes after the last tensor's data"));
}

TEST_F(Safetensors, TruncatedWrittenFileIsShortData) {
  write_safetensors(dir / "bad.safetensors", {{"w", Tensor::zeros({4, 4})}});
  const std::string bytes = test::file_bytes(dir / "bad.safetensors");
  EXPECT_THAT(damage(bytes.substr(0, bytes.size() - 1)),
              names("short data: tensor 'w' needs data bytes [0, 64) but the file holds 63"));
}

// BF16 is written from bfloat16 tensors (rounded to nearest even by rounded_to_bf16) and read
// back widened exactly to float32; the bytes are the upper halves of the floats.
TEST_F(Safetensors, Bf16RoundsToNearestEvenAndWidensExactly) {
  // 1 + 2^-8 is the midpoint between 1 and 1 + 2^-7: ties to the even 1. 1 + 3 2^-8 ties to
  // 1 + 2^-6 (even), 1 + 2^-8 + 2^-20 rounds up, -2.5 and 3.25 are exact.
  const std::vector<double> values = {
      1.0 + 0x1p-8, 1.0 + 3 * 0x1p-8, 1.0 + 0x1p-8 + 0x1p-20, -2.5, 3.25, 0.0};
  const std::vector<double> rounded = {1.0, 1.0 + 0x1p-6, 1.0 + 0x1p-7, -2.5, 3.25, 0.0};
  const Tensor weight = Tensor::from_vector(values, {2, 3});
  write_safetensors(dir / "b.safetensors", {{"w", rounded_to_bf16(weight)}});
  SafetensorsReader reader(dir / "b.safetensors");
  EXPECT_EQ(reader.entries()[0].dtype, StoredDType::bf16);
  EXPECT_EQ(reader.entries()[0].end, 12u);
  const Tensor read = reader.read_tensor("w");
  EXPECT_EQ(read.dtype(), DType::f32);
  EXPECT_EQ(read.shape(), (Shape{2, 3}));
  EXPECT_EQ(read.to_vector(), rounded);
  const std::string bytes = test::file_bytes(dir / "b.safetensors");
  EXPECT_EQ(bytes.substr(bytes.size() - 12, 4), std::string("\x80\x3f\x82\x3f", 4));
  EXPECT_THROW(rounded_to_bf16(Tensor::zeros({2}, DType::f64)), std::invalid_argument);
  // A truncated bf16 tensor is one line.
  EXPECT_THAT(damage(bytes.substr(0, bytes.size() - 1)),
              names("short data: tensor 'w' needs data bytes [0, 12) but the file holds 11"));
}

// IEEE half precision, bit patterns against their values from the format's definition.
TEST(HalfToFloat, EveryClassOfHalfIsExact) {
  EXPECT_EQ(half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_to_float(0xc000), -2.0f);
  EXPECT_EQ(half_to_float(0x3555), 0x1.554p-2f);  // 0.333251953125
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);     // the largest finite half
  EXPECT_EQ(half_to_float(0x0400), 0x1p-14f);     // the smallest normal
  EXPECT_EQ(half_to_float(0x0001), 0x1p-24f);     // the smallest subnormal
  EXPECT_EQ(half_to_float(0x03ff), 0x3ffp-24f);   // the largest subnormal
  EXPECT_EQ(half_to_float(0x8000), -0.0f);
  EXPECT_TRUE(std::signbit(half_to_float(0x8000)));
  EXPECT_EQ(half_to_float(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(half_to_float(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(half_to_float(0x7e00)));
}

// read_float32 widens every floating dtype and refuses integers in one line.
TEST_F(Safetensors, ReadFloat32TakesFloatingDtypesOnly) {
  write_safetensors(dir / "a.safetensors",
                    {{"d", Tensor::from_vector({0.1, -2.0}, {2}, DType::f64)},
                     {"b", rounded_to_bf16(Tensor::from_vector({1.5}, {1}))},
                     {"i", Tensor::zeros({2}, DType::i32)}});
  SafetensorsReader reader(dir / "a.safetensors");
  const Tensor d = reader.read_float32("d");
  EXPECT_EQ(d.dtype(), DType::f32);
  EXPECT_EQ(d.to_vector(), (std::vector<double>{0.1f, -2.0}));
  EXPECT_EQ(reader.read_float32("b").to_vector(), std::vector<double>{1.5});
  EXPECT_THAT(message_of<CheckpointError>([&] { reader.read_float32("i"); }),
              names("tensor 'i' is I32, not a floating dtype (F32, F64, BF16 or F16)"));
}

TEST_F(Safetensors, IntegerTensorsRoundTripAndMissingNamesAreErrors) {
  const Tensor tokens = Tensor::from_indices({-3, 0, 1LL << 40}, {3});
  write_safetensors(dir / "a.safetensors", {{"ids", Int64Tensor{{1}, {3}}},
                                            {"tokens", tokens},
                                            {"small", Tensor::zeros({2}, DType::i32)}});
  SafetensorsReader reader(dir / "a.safetensors");
  ASSERT_NE(reader.find("tokens"), nullptr);
  ASSERT_NE(reader.find("small"), nullptr);
  EXPECT_EQ(reader.find("tokens")->dtype, StoredDType::i64);
  const Tensor read = reader.read_tensor("tokens");
  EXPECT_EQ(read.dtype(), DType::i64);
  EXPECT_EQ(read.to_vector(), tokens.to_vector());
  EXPECT_EQ(reader.read_tensor("ids").to_vector(), std::vector<double>{3});
  EXPECT_EQ(reader.find("small")->dtype, StoredDType::i32);
  EXPECT_EQ(reader.read_tensor("small").dtype(), DType::i32);
  EXPECT_EQ(reader.read_tensor("small").to_vector(), (std::vector<double>{0, 0}));
  EXPECT_EQ(reader.find("nope"), nullptr);
  EXPECT_THAT(message_of<CheckpointError>([&] { reader.read_tensor("nope"); }),
              names("a.safetensors: no tensor 'nope'"));
  write_safetensors(dir / "b.safetensors", {{"f", Tensor::zeros({1})}});
  SafetensorsReader floats(dir / "b.safetensors");
  EXPECT_THAT(message_of<CheckpointError>([&] { floats.read_int64("f"); }),
              names("tensor 'f' is F32, not I64"));
}

TEST_F(Safetensors, WriterRejectsBadInputAndLeavesNoFile) {
  const auto message = [&](std::vector<NamedTensor> tensors) {
    return message_of<std::invalid_argument>(
        [&] { write_safetensors(dir / "out.safetensors", tensors); });
  };
  const Tensor t = Tensor::zeros({2});
  EXPECT_THAT(message({{"a", t}, {"a", t}}), names("tensor name 'a'", "repeated"));
  EXPECT_THAT(message({{"__metadata__", t}}), names("reserved"));
  EXPECT_THAT(message({{"a", Tensor()}}), names("tensor 'a' is undefined"));
  EXPECT_THAT(message({{"a", Int64Tensor{{3}, {1, 2}}}}), names("'a' has 2 values for shape [3]"));
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  EXPECT_THAT(message_of<std::runtime_error>([&] {
                write_safetensors(dir / "missing" / "out.safetensors", {{"a", t}});
              }),
              names("cannot write", "missing/out.safetensors"));
}

}  // namespace
}  // namespace mpitron::nn
