// A deadline over a call that has none of its own (MPI_Init, a blocking MPI call): when the call
// does not return in time, the process ends with one line instead of leaving the job hanging.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace mpitron::comm {

/// From construction until `disarm()` (or destruction), a thread waits `seconds`; when they pass
/// first, it prints `message()` and a newline to stderr and ends the process with `exit_code`
/// (std::_Exit: the watched call may hold MPI's state, so nothing is cleaned up; a launcher such
/// as mpirun then ends the other ranks).
class Watchdog {
 public:
  Watchdog(double seconds, std::function<std::string()> message, int exit_code);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Stops the watch (the call returned) and joins the thread.
  void disarm();

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  bool disarmed_ = false;
  std::thread thread_;  // last: started once the members it reads exist
};

}  // namespace mpitron::comm
