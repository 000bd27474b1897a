#include "app/common/gemm_agreement.h"

#include <fmt/format.h>

#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>

#include "comm/collectives.h"
#include "comm/errors.h"
#include "kernels/device.h"
#include "kernels/ops.h"

namespace mpitron::app {

namespace {

// What rank 0 broadcasts in its first element: a provider (as an index), nothing or an error.
constexpr std::int64_t kNothing = -1, kFailed = -2;

std::optional<kernels::GemmChoice>& agreed() {
  static std::optional<kernels::GemmChoice> choice;
  return choice;
}

}  // namespace

kernels::GemmChoice agree_auto_gemm_provider(const comm::Communicator& world, bool resolve) {
  kernels::GemmChoice choice;
  kernels::Buffer message(3, kernels::DType::i64, kernels::Device::cpu);
  std::int64_t* fields = message.data_as<std::int64_t>();  // provider, threads, source
  fields[0] = kNothing;
  fields[1] = 0;
  fields[2] = 0;
  std::string failure;
  if (world.rank() == 0 && resolve) {
    try {
      choice = kernels::resolve_auto_gemm_provider();
      fields[0] = static_cast<std::int64_t>(choice.provider);
      fields[1] = choice.threads;
      fields[2] = static_cast<std::int64_t>(choice.source);
    } catch (const std::exception& e) {  // every rank waits in the broadcast below
      failure = e.what();
      fields[0] = kFailed;
    }
  }
  comm::broadcast(world, message, 0);
  if (fields[0] == kFailed) {
    throw comm::ConfigError(world.rank() == 0
                                ? fmt::format("--gemm auto: {}", failure)
                                : std::string("--gemm auto: rank 0 could not choose the GEMM "
                                              "provider (see its error line)"));
  }
  if (fields[0] == kNothing) {
    agreed().reset();
    try {
      return agreed_auto_gemm_choice();
    } catch (const std::invalid_argument&) {  // a bad MPITRON_CPU_THREADS: prepare_run says so
      return {};
    }
  }
  if (world.rank() != 0) {
    choice = {static_cast<kernels::GemmProvider>(fields[0]),
              {},
              static_cast<int>(fields[1]),
              static_cast<kernels::GemmChoiceSource>(fields[2])};
  }
  try {
    kernels::set_auto_gemm_provider(choice.provider, choice.threads);
  } catch (const std::invalid_argument& e) {  // a rank built without rank 0's provider
    throw comm::ConfigError(fmt::format("--gemm auto: rank 0 chose {}: {}",
                                        kernels::to_string(choice.provider), e.what()));
  }
  agreed() = choice;
  return choice;
}

kernels::GemmChoice agreed_auto_gemm_choice() {
  if (agreed()) return *agreed();
  return {kernels::default_gemm_provider(), {}, kernels::cpu_threads()};
}

std::string gemm_choice_text(const kernels::GemmChoice& choice) {
  std::string rates;
  for (const kernels::GemmRate& rate : choice.rates)
    rates += fmt::format("{}{} {:.1f}", rates.empty() ? ": " : ", ",
                         kernels::to_string(rate.provider), rate.gflops);
  const std::string source = choice.source == kernels::GemmChoiceSource::fixed
                                 ? std::string("fixed rule")
                                 : kernels::to_string(choice.source);
  return fmt::format("{} ({} at {} thread{}{}{})", kernels::to_string(choice.provider), source,
                     choice.threads, choice.threads == 1 ? "" : "s", rates,
                     rates.empty() ? "" : " GFLOP/s");
}

}  // namespace mpitron::app
