#include "comm/algorithm_choice.h"

#include "comm/butterfly.h"
#include "comm/p2p_gather_scatter.h"
#include "comm/recursive_doubling.h"
#include "comm/ring_all_reduce.h"
#include "comm/staging.h"

namespace mpitron::comm {

using kernels::Buffer;

namespace {

// The table's choice for (op, comm.size(), bytes) when it can run a buffer of `numel` elements.
std::optional<Algorithm> tabled(const Communicator& comm, Collective op, std::size_t bytes,
                                std::size_t numel, bool floating) {
  const AlgorithmTable* table = comm.algorithm_table();
  if (table == nullptr) return std::nullopt;
  const std::optional<Algorithm> choice = table->lookup(op, comm.size(), bytes);
  if (!choice || !applicable(op, *choice, comm.size(), numel, floating)) return std::nullopt;
  return choice;
}

}  // namespace

Algorithm all_reduce_algorithm(const Communicator& comm, const Buffer& buffer) {
  if (comm.size() < 2 || buffer.device() != kernels::Device::cpu || !mpi_visible(comm, buffer))
    return Algorithm::mpi;
  if (const auto choice = tabled(comm, Collective::all_reduce, buffer.bytes(), buffer.numel(),
                                 reduces_in_floating_point(buffer.dtype()))) {
    return *choice;
  }
  if (uses_rabenseifner_all_reduce(comm, buffer)) return Algorithm::rabenseifner;
  if (uses_ring_all_reduce(comm, buffer)) return Algorithm::ring;
  if (uses_recursive_doubling(comm, buffer)) return Algorithm::recursive_doubling;
  return Algorithm::mpi;
}

Algorithm all_gather_algorithm(const Communicator& comm, kernels::Device space,
                               std::size_t block_bytes) {
  if (comm.size() < 2 || space != kernels::Device::cpu) return Algorithm::mpi;
  const auto p = static_cast<std::size_t>(comm.size());
  if (const auto choice = tabled(comm, Collective::all_gather, p * block_bytes, p, true))
    return *choice;
  if (p > 2 && p * block_bytes < kMpiAllGatherBelowBytes) return Algorithm::mpi;
  return is_butterfly_group(comm) && block_bytes < kRingAllGatherBlockBytesPerRankSquared * p * p
             ? Algorithm::recursive_doubling
             : Algorithm::ring;
}

Algorithm all_gather_algorithm(const Communicator& comm, const Buffer& in) {
  return all_gather_algorithm(comm, mpi_space(comm, in), in.bytes());
}

Algorithm reduce_scatter_algorithm(const Communicator& comm, const Buffer& in,
                                   std::size_t in_bytes) {
  if (!uses_p2p_reduce_scatter(comm, in)) return Algorithm::mpi;
  if (const auto choice = tabled(comm, Collective::reduce_scatter, in_bytes,
                                 static_cast<std::size_t>(comm.size()), true)) {
    return *choice;
  }
  return is_butterfly_group(comm) ? Algorithm::recursive_halving : Algorithm::ring;
}

Algorithm reduce_scatter_algorithm(const Communicator& comm, const Buffer& in) {
  return reduce_scatter_algorithm(comm, in, in.bytes());
}

}  // namespace mpitron::comm
