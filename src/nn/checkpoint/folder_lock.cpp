#include "nn/checkpoint/folder_lock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <sstream>

namespace mpitron::nn {

namespace {

std::string host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

// Creates `path` holding `text` unless it exists; false when it does.
bool create_exclusively(const std::filesystem::path& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST) return false;
    throw std::runtime_error(
        fmt::format("cannot create {}: {}", path.string(), std::strerror(errno)));
  }
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!written) throw std::runtime_error("cannot write " + path.string());
  return true;
}

nlohmann::json read_lock(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
}

bool process_exists(long pid) {
  return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH);
}

}  // namespace

std::string new_run_id() {
  const auto now = std::chrono::system_clock::now().time_since_epoch().count();
  const std::size_t hash =
      std::hash<std::string>{}(fmt::format("{} {} {}", host_name(), ::getpid(), now));
  return fmt::format("{:016x}", hash);
}

FolderLock::FolderLock(const std::filesystem::path& dir, const std::string& run_id)
    : path_(dir / ".lock"), run_id_(run_id) {
  const nlohmann::json mine{{"run_id", run_id},
                            {"host", host_name()},
                            {"pid", static_cast<long>(::getpid())},
                            {"started", static_cast<long long>(std::time(nullptr))}};
  for (int attempt = 0; !create_exclusively(path_, mine.dump() + "\n"); ++attempt) {
    const nlohmann::json holder = read_lock(path_);
    const std::string id = holder.value("run_id", std::string("?"));
    const std::string host = holder.value("host", std::string("?"));
    const long pid = holder.value("pid", 0L);
    const std::string who = fmt::format("run {} (host {}, pid {})", id, host, pid);
    const bool stale = holder.is_object() && host == host_name() && !process_exists(pid);
    if (!stale || attempt > 0) {
      throw FolderLockedError(fmt::format(
          "{} is in use by {}: save into another folder, or remove {} if that run is gone",
          dir.string(), who, path_.string()));
    }
    taken_over_ = who;
    std::filesystem::remove(path_);
  }
}

FolderLock::~FolderLock() {
  if (read_lock(path_).value("run_id", std::string()) == run_id_) {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
}

}  // namespace mpitron::nn
