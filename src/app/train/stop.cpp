#include "app/train/stop.h"

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <stdexcept>

#include "comm/collectives.h"
#include "comm/errors.h"
#include "kernels/device.h"

namespace mpitron::app {

namespace {

constexpr std::pair<const char*, int> kSignals[] = {
    {"SIGHUP", SIGHUP},   {"SIGINT", SIGINT},   {"SIGQUIT", SIGQUIT}, {"SIGUSR1", SIGUSR1},
    {"SIGUSR2", SIGUSR2}, {"SIGTERM", SIGTERM}, {"SIGXCPU", SIGXCPU}};

// The first stop signal caught (0: none). Written only by the handler.
volatile std::sig_atomic_t caught_signal = 0;

extern "C" void on_stop_signal(int signal) {
  if (caught_signal != 0) {  // the second one: end now, as if no handler were there
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return;
  }
  caught_signal = signal;
}

std::string signal_name(int signal) {
  for (const auto& [name, number] : kSignals) {
    if (number == signal) return name;
  }
  return fmt::format("signal {}", signal);
}

}  // namespace

std::optional<int> signal_number(const std::string& name) {
  for (const auto& [full, number] : kSignals) {
    if (name == full || name == full + 3 || name == std::to_string(number)) return number;
  }
  return std::nullopt;
}

std::vector<int> stop_signals(const std::string& exit_signal) {
  std::vector<int> signals{SIGTERM, SIGINT, SIGUSR1};
  std::string names;
  for (const auto& [name, number] : kSignals)
    names += (names.empty() ? "" : ", ") + std::string(name);
  std::size_t begin = 0;
  while (begin < exit_signal.size()) {
    const std::size_t end = std::min(exit_signal.find(',', begin), exit_signal.size());
    const std::string name = exit_signal.substr(begin, end - begin);
    const std::optional<int> number = signal_number(name);
    if (!number) {
      throw comm::ConfigError(fmt::format("--exit-signal '{}' is not one of: {}", name, names));
    }
    signals.push_back(*number);
    begin = end + 1;
  }
  return signals;
}

StopWatch::StopWatch(const std::vector<int>& signals, double duration_minutes)
    : signals_(signals),
      start_(std::chrono::steady_clock::now()),
      duration_minutes_(duration_minutes) {
  caught_signal = 0;
  for (const int signal : signals_) {
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    if (sigaction(signal, &action, nullptr) != 0) {
      throw std::invalid_argument(
          fmt::format("cannot catch {}: {}", signal_name(signal), std::strerror(errno)));
    }
  }
}

StopWatch::~StopWatch() {
  for (const int signal : signals_)
    std::signal(signal, SIG_DFL);
}

std::string StopWatch::agreed_reason(const comm::Communicator& world) const {
  const double minutes =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() / 60.0;
  const bool out_of_time =
      world.rank() == 0 && duration_minutes_ > 0 && minutes >= duration_minutes_;
  // [0]: the signal (its number negated, so that max picks the lowest); [1]: out of time.
  kernels::Buffer reasons(2, kernels::DType::f64, kernels::Device::cpu);
  double* values = reasons.data_as<double>();
  values[0] = caught_signal != 0 ? -static_cast<double>(caught_signal) : -1e9;
  values[1] = out_of_time ? 1.0 : 0.0;
  comm::all_reduce(world, reasons, comm::ReduceOp::max);
  if (values[0] > -1e9) return signal_name(static_cast<int>(-values[0]));
  if (values[1] > 0.0) return fmt::format("--exit-duration-in-mins {:g}", duration_minutes_);
  return {};
}

}  // namespace mpitron::app
