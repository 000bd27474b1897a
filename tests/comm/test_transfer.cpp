// The header that precedes every point-to-point payload (comm/transfer.h): what valid() accepts,
// above all that the inline bytes, which the receiver copies into its buffer, are whole elements
// of the header's own shape; a receiver rejects any other header as malformed.
#include "comm/transfer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "comm/chunking.h"

namespace mpitron::comm::transfer {
namespace {

using kernels::DType;

Header header(std::vector<std::int64_t> shape, DType dtype, std::size_t inline_bytes) {
  return Header::describe(shape, dtype, kMaxMessageElements, inline_bytes);
}

TEST(TransferHeader, InlineBytesAreTheHeadOfThePayload) {
  const Header whole = header({3, 5}, DType::f32, 60);
  EXPECT_TRUE(whole.valid());
  EXPECT_EQ(whole.inline_count(), 15u);
  const Header head = header({3, 5}, DType::f32, 16);
  EXPECT_TRUE(head.valid());
  EXPECT_EQ(head.inline_count(), 4u);
  EXPECT_EQ(header({4}, DType::f64, 32).inline_count(), 4u);
  EXPECT_TRUE(header({0, 7}, DType::i32, 0).valid());
  EXPECT_TRUE(header({}, DType::i64, 8).valid()) << "a scalar holds one element";
  EXPECT_TRUE(header({1000, 1000}, DType::f32, kInlinePayloadBytes).valid());
  EXPECT_TRUE(header({3, 5}, DType::bf16, 30).valid()) << "bfloat16: 2 bytes per element";
  EXPECT_EQ(header({3, 5}, DType::bf16, 30).dtype(), DType::bf16);
  EXPECT_FALSE(header({3, 5}, DType::bf16, 31).valid()) << "not whole bfloat16s";
}

TEST(TransferHeader, InlineBytesOutsideTheShapeOrNotWholeElementsAreInvalid) {
  EXPECT_FALSE(header({3, 5}, DType::f32, 64).valid()) << "more than the shape holds";
  EXPECT_FALSE(header({3, 5}, DType::f32, 6).valid()) << "not whole float32s";
  EXPECT_FALSE(header({2}, DType::f64, 12).valid()) << "not whole float64s";
  EXPECT_FALSE(header({0, 7}, DType::i32, 4).valid()) << "an empty shape";
  EXPECT_FALSE(header({}, DType::i64, 16).valid()) << "a scalar holds one element";
  EXPECT_FALSE(header({2000}, DType::f32, kInlinePayloadBytes + 4).valid()) << "too many";
}

TEST(TransferHeader, DimsWhoseProductOverflowsAreInvalid) {
  const std::int64_t huge = std::numeric_limits<std::int64_t>::max() / 2;
  EXPECT_FALSE(header({huge, huge, huge}, DType::f32, 8).valid()) << "elements overflow";
  EXPECT_FALSE(header({std::numeric_limits<std::int64_t>::max()}, DType::f32, 8).valid())
      << "bytes overflow";
  EXPECT_TRUE(header({std::int64_t{1} << 40}, DType::f32, 8).valid());
  EXPECT_FALSE(header({huge, -1}, DType::f32, 0).valid()) << "a negative dim";
}

TEST(TransferHeader, FieldsOutOfRangeAreInvalid) {
  Header bad_magic = header({2}, DType::f32, 8);
  bad_magic.words[0] = 7;
  EXPECT_FALSE(bad_magic.valid());
  Header bad_dtype = header({2}, DType::f32, 8);
  bad_dtype.words[1] = 9;
  EXPECT_FALSE(bad_dtype.valid());
  Header bad_limit = header({2}, DType::f32, 8);
  bad_limit.words[2] = 0;
  EXPECT_FALSE(bad_limit.valid());
  Header bad_ndim = header({2}, DType::f32, 8);
  bad_ndim.words[3] = static_cast<std::int64_t>(kMaxTransferDims) + 1;
  EXPECT_FALSE(bad_ndim.valid());
}

}  // namespace
}  // namespace mpitron::comm::transfer
