#include "comm/agreement.h"

#include <algorithm>

#include "kernels/device.h"

namespace mpitron::comm {

namespace {

kernels::Buffer host_doubles(std::size_t count) {
  return kernels::Buffer(count, kernels::DType::f64, kernels::Device::cpu);
}

}  // namespace

double all_reduce_scalar(const Communicator& comm, double value, ReduceOp op) {
  return all_reduce_values(comm, {value}, op)[0];
}

std::vector<double> all_reduce_values(const Communicator& comm, const std::vector<double>& values,
                                      ReduceOp op) {
  kernels::Buffer buffer = host_doubles(values.size());
  std::copy(values.begin(), values.end(), buffer.data_as<double>());
  all_reduce(comm, buffer, op);
  const double* reduced = buffer.data_as<double>();
  return {reduced, reduced + values.size()};
}

std::vector<double> all_gather_scalar(const Communicator& comm, double value) {
  kernels::Buffer mine = host_doubles(1);
  kernels::Buffer all = host_doubles(static_cast<std::size_t>(comm.size()));
  mine.data_as<double>()[0] = value;
  all_gather(comm, mine, all, 1);
  const double* values = all.data_as<double>();
  return {values, values + comm.size()};
}

std::vector<int> ranks_where(const Communicator& comm, bool flag) {
  const std::vector<double> flags = all_gather_scalar(comm, flag ? 1.0 : 0.0);
  std::vector<int> ranks;
  for (int r = 0; r < comm.size(); ++r) {
    if (flags[static_cast<std::size_t>(r)] != 0.0) ranks.push_back(comm.global_rank(r));
  }
  return ranks;
}

std::string rank_list(std::span<const int> ranks, std::size_t max_listed) {
  std::string text;
  for (std::size_t i = 0; i < std::min(ranks.size(), max_listed); ++i) {
    text += (i == 0 ? "" : ", ") + std::to_string(ranks[i]);
  }
  if (ranks.size() > max_listed) text += ", ...";
  return text;
}

std::string ranks_phrase(std::span<const int> ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + rank_list(ranks);
}

}  // namespace mpitron::comm
