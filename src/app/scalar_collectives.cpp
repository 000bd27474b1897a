#include "app/scalar_collectives.h"

#include "kernels/device.h"

namespace mpitron::app {

namespace {

kernels::Buffer host_doubles(std::size_t count) {
  return kernels::Buffer(count, kernels::DType::f64, kernels::Device::cpu);
}

}  // namespace

double all_reduce_scalar(const comm::Communicator& comm, double value, comm::ReduceOp op) {
  kernels::Buffer buffer = host_doubles(1);
  buffer.data_as<double>()[0] = value;
  comm::all_reduce(comm, buffer, op);
  return buffer.data_as<double>()[0];
}

std::vector<double> all_gather_scalar(const comm::Communicator& comm, double value) {
  kernels::Buffer mine = host_doubles(1);
  kernels::Buffer all = host_doubles(static_cast<std::size_t>(comm.size()));
  mine.data_as<double>()[0] = value;
  comm::all_gather(comm, mine, all, 1);
  const double* values = all.data_as<double>();
  return {values, values + comm.size()};
}

}  // namespace mpitron::app
