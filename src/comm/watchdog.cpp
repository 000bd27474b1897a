#include "comm/watchdog.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace mpitron::comm {

Watchdog::Watchdog(double seconds, std::function<std::string()> message, int exit_code) {
  thread_ = std::thread([this, seconds, message = std::move(message), exit_code] {
    std::unique_lock<std::mutex> lock(mutex_);
    if (done_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return disarmed_; }))
      return;
    const std::string line = message();
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
    std::_Exit(exit_code);
  });
}

void Watchdog::disarm() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    disarmed_ = true;
  }
  done_.notify_one();
  if (thread_.joinable()) thread_.join();
}

Watchdog::~Watchdog() {
  disarm();
}

}  // namespace mpitron::comm
