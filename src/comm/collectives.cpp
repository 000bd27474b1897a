#include "comm/collectives.h"

#include <stdexcept>

#include "comm/algorithm_choice.h"
#include "comm/blocking_call.h"
#include "comm/butterfly.h"
#include "comm/errors.h"
#include "comm/mpi_util.h"
#include "comm/recursive_doubling.h"
#include "comm/ring_all_reduce.h"
#include "comm/staging.h"
#include "comm/traffic.h"

namespace mpitron::comm {

using kernels::Buffer;

void all_reduce(const Communicator& comm, Buffer& buffer, ReduceOp op) {
  if (buffer.empty()) return;
  count_traffic(comm, buffer.bytes());
  const MPI_Op reduction = reduction_op(comm, buffer, op);  // throws for avg of integers
  const MPI_Datatype type = mpi_type(buffer.dtype());
  const Operation operation{"all_reduce", -1, buffer.bytes()};
  switch (all_reduce_algorithm(comm, buffer)) {
    case Algorithm::recursive_doubling:
      recursive_doubling_all_reduce(comm, buffer, op);
      break;
    case Algorithm::rabenseifner:
      rabenseifner_all_reduce(comm, buffer, op);
      break;
    case Algorithm::ring:
      ring_all_reduce(comm, buffer, op);
      break;
    case Algorithm::mpi:
    case Algorithm::recursive_halving:  // not an all-reduce
      if (buffer.device() == kernels::Device::cpu && mpi_visible(comm, buffer)) {
        const std::size_t limit = comm.max_message_elements();
        for (std::size_t i = 0; i < message_count(buffer.numel(), limit); ++i) {
          const Range range = message_range(buffer.numel(), limit, i);
          blocking_call(comm, operation, "MPI_Allreduce", [&] {
            return MPI_Allreduce(MPI_IN_PLACE, element(buffer, range.offset),
                                 mpi_count(range.count), type, reduction, comm.native());
          });
        }
        break;
      }
      Buffer& image = stage_in_place(comm, buffer, Slot::send);
      for_each_message(
          comm, buffer.numel(), comm.max_message_elements(), operation, [&](const Range& range) {
            MPI_Request request = MPI_REQUEST_NULL;
            check_mpi(
                MPI_Iallreduce(MPI_IN_PLACE, element(image, range.offset), mpi_count(range.count),
                               type, reduction, comm.native(), &request),
                "MPI_Iallreduce");
            return request;
          });
      stage_out(image, buffer);
      break;
  }
  finish_average(comm, buffer, op);
}

void broadcast(const Communicator& comm, Buffer& buffer, int root) {
  if (root < 0 || root >= comm.size()) {
    throw std::invalid_argument("broadcast: root " + std::to_string(root) + " is outside the " +
                                comm.name() + " communicator of " + std::to_string(comm.size()) +
                                " ranks");
  }
  if (buffer.empty()) return;
  count_traffic(comm, buffer.bytes());
  const bool is_root = comm.rank() == root;
  Buffer& image =
      is_root ? stage_in_place(comm, buffer, Slot::send) : stage_target(comm, buffer, Slot::recv);
  const MPI_Datatype type = mpi_type(buffer.dtype());
  for_each_message(comm, buffer.numel(), comm.max_message_elements(),
                   {"broadcast", -1, buffer.bytes()}, [&](const Range& range) {
                     MPI_Request request = MPI_REQUEST_NULL;
                     check_mpi(MPI_Ibcast(element(image, range.offset), mpi_count(range.count),
                                          type, root, comm.native(), &request),
                               "MPI_Ibcast");
                     return request;
                   });
  if (!is_root) stage_out(image, buffer);
}

void barrier(const Communicator& comm) {
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Ibarrier(comm.native(), &request), "MPI_Ibarrier");
  wait_one(comm, request, {"barrier", -1, 0});
}

}  // namespace mpitron::comm
