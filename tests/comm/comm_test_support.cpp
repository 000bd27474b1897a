#include "comm_test_support.h"

#include "comm/chunking.h"
#include "mpi_test_main.h"
#include "support/compare.h"
#include "support/device_dtype.h"

namespace mpitron::test {

using kernels::Buffer;
using kernels::Device;
using kernels::DType;

std::vector<BufferKind> all_buffer_kinds() {
  return {{DType::f32, Device::cpu},       {DType::f64, Device::cpu},
          {DType::f32, Device::cpu, true}, {DType::f64, Device::cpu, true},
          {DType::f32, Device::cuda},      {DType::f64, Device::cuda},
          {DType::i32, Device::cpu},       {DType::i64, Device::cpu},
          {DType::i64, Device::cpu, true}, {DType::i64, Device::cuda}};
}

void PrintTo(const BufferKind& kind, std::ostream* out) {
  *out << kernels::to_string(kind.dtype) << " on " << kernels::to_string(kind.device)
       << (kind.staged_host ? ", staged" : "");
}

std::string kind_name(const ::testing::TestParamInfo<BufferKind>& info) {
  return kernels::to_string(info.param.dtype) + "_" + kernels::to_string(info.param.device) +
         (info.param.staged_host ? "_staged" : "");
}

void BufferKindTest::SetUp() {
  if (test::device_missing(GetParam().device)) GTEST_SKIP() << "no CUDA device";
  test::world().set_stage_host_buffers(GetParam().staged_host);
}

void BufferKindTest::TearDown() {
  test::world().set_stage_host_buffers(false);
}

Buffer make_buffer(const std::vector<double>& values, const BufferKind& kind) {
  return test::make_buffer(values, kind.dtype, kind.device);
}

std::vector<double> numbered(double first, std::size_t count) {
  std::vector<double> values(count);
  for (std::size_t i = 0; i < count; ++i)
    values[i] = first + static_cast<double>(i);
  return values;
}

std::pair<int, int> ring_neighbours(const comm::Communicator& comm) {
  const int n = comm.size();
  return {(comm.rank() + 1) % n, (comm.rank() + n - 1) % n};
}

Buffer filled_buffer(std::size_t numel, double value, const BufferKind& kind) {
  return make_buffer(std::vector<double>(numel, value), kind);
}

SettingsGuard::SettingsGuard(comm::Communicator& world)
    : world_(world),
      timeout_(world.timeout()),
      limit_(world.max_message_elements()),
      stage_host_(world.stage_host_buffers()),
      table_(world.algorithm_table() != nullptr
                 ? std::make_shared<const comm::AlgorithmTable>(*world.algorithm_table())
                 : nullptr) {}

SettingsGuard::~SettingsGuard() {
  world_.set_timeout(timeout_);
  world_.set_max_message_elements(limit_);
  world_.set_stage_host_buffers(stage_host_);
  world_.set_algorithm_table(table_);
}

std::vector<std::size_t> message_limits() {
  return {comm::kMaxMessageElements, 8, 3};
}

}  // namespace mpitron::test
