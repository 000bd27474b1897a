#include "comm/transfer.h"

#include <algorithm>
#include <stdexcept>

#include "comm/chunking.h"

namespace mpitron::comm::transfer {

namespace {

constexpr std::int64_t kDTypes = 4;  // kernels::DType f32, f64, i32, i64, sent as 0..3

}  // namespace

Header Header::describe(std::span<const std::int64_t> shape, kernels::DType dtype,
                        std::size_t limit, std::size_t inline_bytes) {
  Header header;
  header.words[0] = kMagic;
  header.words[1] = static_cast<std::int64_t>(dtype);
  header.words[2] = static_cast<std::int64_t>(limit);
  header.words[3] = static_cast<std::int64_t>(shape.size());
  std::copy(shape.begin(), shape.end(), header.words.begin() + 4);
  header.words.back() = static_cast<std::int64_t>(inline_bytes);
  return header;
}

bool Header::valid() const {
  return words[0] == kMagic && words[1] >= 0 && words[1] < kDTypes && words[2] >= 1 &&
         words[2] <= static_cast<std::int64_t>(kMaxMessageElements) && words[3] >= 0 &&
         words[3] <= static_cast<std::int64_t>(kMaxTransferDims) && words.back() >= 0 &&
         words.back() <= static_cast<std::int64_t>(kInlinePayloadBytes);
}

std::size_t product(std::span<const std::int64_t> shape) {
  std::size_t n = 1;
  for (std::int64_t dim : shape)
    n *= static_cast<std::size_t>(dim);
  return n;
}

void check_arguments(const char* op, const Communicator& comm, const kernels::Buffer& buffer,
                     std::span<const std::int64_t> shape, int peer, int tag) {
  const auto fail = [&](const std::string& why) {
    throw std::invalid_argument(std::string(op) + " on the " + comm.name() +
                                " communicator: " + why);
  };
  if (peer < 0 || peer >= comm.size() || peer == comm.rank()) {
    fail("peer rank " + std::to_string(peer) + " must be another rank in [0, " +
         std::to_string(comm.size()) + ")");
  }
  if (tag < 0 || tag > kMaxTransferTag) {
    fail("tag " + std::to_string(tag) + " must be in [0, " + std::to_string(kMaxTransferTag) + "]");
  }
  if (shape.size() > kMaxTransferDims) {
    fail("shape " + shape_to_string(shape) + " has more than " + std::to_string(kMaxTransferDims) +
         " dims");
  }
  if (std::any_of(shape.begin(), shape.end(), [](std::int64_t d) { return d < 0; }) ||
      product(shape) != buffer.numel()) {
    fail("shape " + shape_to_string(shape) + " does not describe a buffer of " +
         std::to_string(buffer.numel()) + " elements");
  }
}

std::string describe(std::span<const std::int64_t> shape, kernels::DType dtype) {
  return shape_to_string(shape) + " " + kernels::to_string(dtype);
}

}  // namespace mpitron::comm::transfer
