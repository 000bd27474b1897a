#include "comm/communicator.h"

#include <cmath>
#include <stdexcept>

#include "comm/algorithm_table.h"
#include "comm/chunking.h"
#include "comm/errors.h"
#include "comm/staging.h"

namespace mpitron::comm {

std::string to_string(TransferMode mode) {
  switch (mode) {
    case TransferMode::staged:
      return "staged";
    case TransferMode::direct:
      return "direct";
    case TransferMode::automatic:
      return "auto";
  }
  return "unknown";
}

TransferMode parse_transfer_mode(std::string_view text) {
  for (TransferMode mode : {TransferMode::staged, TransferMode::direct, TransferMode::automatic}) {
    if (text == to_string(mode)) return mode;
  }
  throw std::invalid_argument("unknown transfer mode '" + std::string(text) +
                              "' (expected staged, direct or auto)");
}

struct Communicator::Handle {
  MPI_Comm comm = MPI_COMM_NULL;
  bool owned = false;
  std::string name;
  int rank = 0;
  std::vector<int> members;

  Handle() = default;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() {
    int finalized = 1;
    MPI_Finalized(&finalized);
    if (owned && !finalized) MPI_Comm_free(&comm);
  }
};

struct Communicator::Shared {
  double timeout_seconds = 120.0;
  TransferMode mode = TransferMode::automatic;
  std::size_t max_message_elements = kMaxMessageElements;
  int world_rank = 0;
  NodeShare node;
  bool mpi_cuda_aware = false;
  bool stage_host_buffers = false;
  std::shared_ptr<const AlgorithmTable> algorithm_table;
  Staging staging;
};

namespace {

// Fills `rank` (this process's rank in `comm`) and the `world` ranks of every member of `comm`.
void describe_members(MPI_Comm comm, MPI_Comm world, int& rank, std::vector<int>& members) {
  int size = 0;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  MPI_Group group = MPI_GROUP_NULL;
  MPI_Group world_group = MPI_GROUP_NULL;
  check_mpi(MPI_Comm_group(comm, &group), "MPI_Comm_group");
  check_mpi(MPI_Comm_group(world, &world_group), "MPI_Comm_group");
  std::vector<int> local(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i)
    local[static_cast<std::size_t>(i)] = i;
  members.assign(local.size(), 0);
  const int rc = MPI_Group_translate_ranks(group, size, local.data(), world_group, members.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  check_mpi(rc, "MPI_Group_translate_ranks");
}

}  // namespace

Communicator::Communicator(std::shared_ptr<Handle> handle, std::shared_ptr<Shared> shared)
    : handle_(std::move(handle)), shared_(std::move(shared)) {}

Communicator Communicator::make_world(MPI_Comm comm, NodeShare node, bool mpi_cuda_aware) {
  auto handle = std::make_shared<Handle>();
  handle->comm = comm;
  handle->name = "world";
  describe_members(comm, comm, handle->rank, handle->members);
  auto shared = std::make_shared<Shared>();
  shared->world_rank = handle->rank;
  shared->node = node;
  shared->mpi_cuda_aware = mpi_cuda_aware;
  return Communicator(std::move(handle), std::move(shared));
}

const Communicator::Handle& Communicator::handle() const {
  if (!handle_) throw std::logic_error("comm::Communicator: use of an empty communicator handle");
  return *handle_;
}

Communicator::Shared& Communicator::shared() const {
  handle();
  return *shared_;
}

int Communicator::rank() const {
  return handle().rank;
}

int Communicator::size() const {
  return static_cast<int>(handle().members.size());
}

const std::string& Communicator::name() const {
  return handle().name;
}

MPI_Comm Communicator::native() const {
  return handle().comm;
}

int Communicator::global_rank(int local_rank) const {
  if (local_rank < 0 || local_rank >= size()) {
    throw std::out_of_range("rank " + std::to_string(local_rank) + " is outside the " + name() +
                            " communicator of " + std::to_string(size()) + " ranks");
  }
  return handle().members[static_cast<std::size_t>(local_rank)];
}

const std::vector<int>& Communicator::members() const {
  return handle().members;
}

int Communicator::world_rank() const {
  return shared().world_rank;
}

Communicator Communicator::split(int color, int key, std::string name) const {
  auto handle = std::make_shared<Handle>();
  check_mpi(MPI_Comm_split(native(), color, key, &handle->comm), "MPI_Comm_split");
  if (handle->comm == MPI_COMM_NULL) return Communicator();
  handle->owned = true;
  handle->name = std::move(name);
  check_mpi(MPI_Comm_set_errhandler(handle->comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  describe_members(handle->comm, MPI_COMM_WORLD, handle->rank, handle->members);
  return Communicator(std::move(handle), shared_);
}

double Communicator::timeout() const {
  return shared().timeout_seconds;
}

void Communicator::set_timeout(double seconds) {
  if (!(seconds > 0.0 && seconds <= kMaxTimeoutSeconds)) {
    throw std::invalid_argument("the communication deadline must be in (0, 1e6] seconds, got " +
                                std::to_string(seconds));
  }
  shared().timeout_seconds = seconds;
}

TransferMode Communicator::transfer_mode() const {
  return shared().mode;
}

NodeShare Communicator::node() const {
  return shared().node;
}

void Communicator::set_transfer_mode(TransferMode mode) {
  if (mode == TransferMode::direct && !mpi_cuda_aware()) {
    throw ConfigError(
        "direct CUDA transfers were requested, but the MPI library reports no CUDA support");
  }
  shared().mode = mode;
}

bool Communicator::direct_transfers() const {
  const Shared& s = shared();
  switch (s.mode) {
    case TransferMode::staged:
      return false;
    case TransferMode::direct:
      return true;
    case TransferMode::automatic:
      return s.mpi_cuda_aware && s.node.size == 1;
  }
  return false;
}

bool Communicator::mpi_cuda_aware() const {
  return shared().mpi_cuda_aware;
}

std::size_t Communicator::max_message_elements() const {
  return shared().max_message_elements;
}

void Communicator::set_max_message_elements(std::size_t elements) {
  validate_message_limit(elements);
  shared().max_message_elements = elements;
}

bool Communicator::stage_host_buffers() const {
  return shared().stage_host_buffers;
}

void Communicator::set_stage_host_buffers(bool stage) {
  shared().stage_host_buffers = stage;
}

const AlgorithmTable* Communicator::algorithm_table() const {
  return shared().algorithm_table.get();
}

void Communicator::set_algorithm_table(std::shared_ptr<const AlgorithmTable> table) {
  shared().algorithm_table = std::move(table);
}

Staging& Communicator::staging() const {
  return shared().staging;
}

}  // namespace mpitron::comm
