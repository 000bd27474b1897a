// Helpers shared by the multi-rank comm tests: buffers from values and back, the dtype/device
// combinations every collective is checked on, and a guard restoring communicator settings.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "comm/algorithm_table.h"
#include "comm/communicator.h"
#include "kernels/device.h"
#include "support/compare.h"

namespace mpitron::test {

using test::host_values;

/// One dtype/device combination a test runs on.
struct BufferKind {
  kernels::DType dtype;
  kernels::Device device;
  bool staged_host = false;  ///< host buffers go through the staging workspaces
};

/// Prints e.g. "float32 on cpu, staged" in test failure messages.
void PrintTo(const BufferKind& kind, std::ostream* out);

/// f32/f64 on cpu, on cpu staged like CUDA buffers, and on cuda; i32 on cpu; i64 on cpu, staged
/// and on cuda (token ids).
std::vector<BufferKind> all_buffer_kinds();

/// "float32_cpu", "int64_cpu_staged" etc., for test names.
std::string kind_name(const ::testing::TestParamInfo<BufferKind>& info);

/// A buffer of `kind` holding `values` (exact for the small integers the tests use); see
/// tests/support for the host copy back (test::host_values).
kernels::Buffer make_buffer(const std::vector<double>& values, const BufferKind& kind);

/// first, first + 1, ..., first + count - 1: a payload whose every element says where it came
/// from.
std::vector<double> numbered(double first, std::size_t count);

/// This rank's neighbours on the ring 0 -> 1 -> ... -> size - 1 -> 0 of `comm`: {next,
/// previous}.
std::pair<int, int> ring_neighbours(const comm::Communicator& comm);

/// A buffer of `kind` with `numel` elements all equal to `value`.
kernels::Buffer filled_buffer(std::size_t numel, double value, const BufferKind& kind);

/// Base of tests parametrized by BufferKind: skips CUDA kinds without a device and routes host
/// buffers through staging for the staged_host kinds (undone after the test).
class BufferKindTest : public ::testing::TestWithParam<BufferKind> {
 protected:
  void SetUp() override;
  void TearDown() override;
};

/// Restores the world's deadline, message limit, host staging and algorithm table when it goes
/// out of scope (the settings are shared with every communicator split from the world).
class SettingsGuard {
 public:
  explicit SettingsGuard(comm::Communicator& world);
  ~SettingsGuard();
  SettingsGuard(const SettingsGuard&) = delete;
  SettingsGuard& operator=(const SettingsGuard&) = delete;

 private:
  comm::Communicator& world_;
  double timeout_;
  std::size_t limit_;
  bool stage_host_;
  std::shared_ptr<const comm::AlgorithmTable> table_;
};

/// The message limits every chunked operation is checked with: the default and small ones that
/// force several messages and, for gather/scatter, every tiling case.
std::vector<std::size_t> message_limits();

}  // namespace mpitron::test
