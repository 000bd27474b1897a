#include "comm/transfer.h"

#include <algorithm>
#include <stdexcept>

#include "comm/chunking.h"

namespace mpitron::comm::transfer {

namespace {

// kernels::DType f32, f64, i32, i64, bf16, sent as 0..4 (bf16, the last enumerator, bounds them).
constexpr std::int64_t kDTypes = static_cast<std::int64_t>(kernels::DType::bf16) + 1;

// This thread's spare header-message memory (MessageMemory).
constexpr std::size_t kMaxSpares = 4;
thread_local bool t_spares_gone = false;  // set when the thread's spares are destroyed
struct Spares {
  std::array<kernels::Buffer, kMaxSpares> buffers;
  std::size_t count = 0;
  Spares() = default;
  Spares(const Spares&) = delete;
  Spares& operator=(const Spares&) = delete;
  ~Spares() { t_spares_gone = true; }
};
thread_local Spares t_spares;

}  // namespace

MessageMemory& MessageMemory::operator=(MessageMemory&& other) noexcept {
  if (this != &other) {
    give_back();
    buffer_ = std::move(other.buffer_);
  }
  return *this;
}

MessageMemory::~MessageMemory() {
  give_back();
}

MessageMemory MessageMemory::take() {
  MessageMemory memory;
  if (!t_spares_gone && t_spares.count > 0) {
    memory.buffer_ = std::move(t_spares.buffers[--t_spares.count]);
  } else {
    memory.buffer_ = kernels::Buffer(kMessageBytes / 8, kernels::DType::i64, kernels::Device::cpu);
  }
  return memory;
}

void MessageMemory::give_back() noexcept {
  if (buffer_.empty() || t_spares_gone || t_spares.count == kMaxSpares) return;  // freed as usual
  t_spares.buffers[t_spares.count++] = std::move(buffer_);
}

void Requests::assign(std::size_t count) {
  count_ = count;
  few_.fill(MPI_REQUEST_NULL);
  if (few()) {
    many_.clear();
  } else {
    many_.assign(count, MPI_REQUEST_NULL);
  }
}

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
  const bool fields = words[0] == kMagic && words[1] >= 0 && words[1] < kDTypes && words[2] >= 1 &&
                      words[2] <= static_cast<std::int64_t>(kMaxMessageElements) && words[3] >= 0 &&
                      words[3] <= static_cast<std::int64_t>(kMaxTransferDims) &&
                      words.back() >= 0 &&
                      words.back() <= static_cast<std::int64_t>(kInlinePayloadBytes);
  if (!fields) return false;
  const std::span<const std::int64_t> dims = shape();
  const std::size_t element_bytes = kernels::dtype_size(dtype());
  std::size_t elements = 1;  // checked: a stray message's dims could overflow the product
  for (const std::int64_t d : dims) {
    if (d < 0 || __builtin_mul_overflow(elements, static_cast<std::size_t>(d), &elements))
      return false;
  }
  std::size_t bytes = 0;
  return !__builtin_mul_overflow(elements, element_bytes, &bytes) &&
         inline_bytes() % element_bytes == 0 && inline_count() <= elements;
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
