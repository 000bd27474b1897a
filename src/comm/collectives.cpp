#include "comm/collectives.h"

#include <stdexcept>

#include "comm/butterfly.h"
#include "comm/errors.h"
#include "comm/mpi_util.h"
#include "comm/recursive_doubling.h"
#include "comm/ring_all_reduce.h"
#include "comm/staging.h"

namespace mpitron::comm {

using kernels::Buffer;

void all_reduce(const Communicator& comm, Buffer& buffer, ReduceOp op) {
  if (buffer.empty()) return;
  const MPI_Op reduction = mpi_op(op, buffer.dtype());  // throws for avg of integers
  // mpitron's own algorithms on point-to-point messages, each with its documented order.
  void (*own)(const Communicator&, Buffer&, ReduceOp) =
      uses_rabenseifner_all_reduce(comm, buffer) ? rabenseifner_all_reduce
      : uses_ring_all_reduce(comm, buffer)       ? ring_all_reduce
      : uses_recursive_doubling(comm, buffer)    ? recursive_doubling_all_reduce
                                                 : nullptr;
  if (own != nullptr) {
    own(comm, buffer, op);
    finish_average(comm, buffer, op);
    return;
  }
  Buffer& image = stage_in_place(comm, buffer, Slot::send);
  const MPI_Datatype type = mpi_type(buffer.dtype());
  for_each_message(
      comm, buffer.numel(), comm.max_message_elements(), {"all_reduce", -1, buffer.bytes()},
      [&](const Range& range) {
        MPI_Request request = MPI_REQUEST_NULL;
        check_mpi(MPI_Iallreduce(MPI_IN_PLACE, element(image, range.offset), mpi_count(range.count),
                                 type, reduction, comm.native(), &request),
                  "MPI_Iallreduce");
        return request;
      });
  stage_out(image, buffer);
  finish_average(comm, buffer, op);
}

void broadcast(const Communicator& comm, Buffer& buffer, int root) {
  if (root < 0 || root >= comm.size()) {
    throw std::invalid_argument("broadcast: root " + std::to_string(root) + " is outside the " +
                                comm.name() + " communicator of " + std::to_string(comm.size()) +
                                " ranks");
  }
  if (buffer.empty()) return;
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
