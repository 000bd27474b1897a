#include "nn/checkpoint/folder_lock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

namespace mpitron::nn {

namespace {

std::string host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

// Creates `path` holding `text`, written through to the disk, unless it exists; false when it
// does. (Unsynced, a crash right after the create could leave an empty lock.)
bool create_exclusively(const std::filesystem::path& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST) return false;
    throw std::runtime_error(
        fmt::format("cannot create {}: {}", path.string(), std::strerror(errno)));
  }
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       ::fsync(fd) == 0;
  const int error = errno;
  ::close(fd);
  if (!written) {
    ::unlink(path.c_str());  // an empty lock would stop every later run
    throw std::runtime_error(
        fmt::format("cannot write {}: {}", path.string(), std::strerror(error)));
  }
  return true;
}

// Whether a lock file (or a link in its place, even a dangling one) exists at `path`.
bool lock_present(const std::filesystem::path& path) {
  std::error_code ignored;
  return std::filesystem::exists(std::filesystem::symlink_status(path, ignored));
}

// flock(LOCK_EX) on DIR while this run takes DIR/.lock, so that runs starting at once take turns
// through the read, check and takeover below. Best effort: where the file system has no flock,
// or another run holds it for more than about 5 s, the run goes on without it (the takeover's
// move aside still keeps it to one run of two).
class DirectoryGuard {
 public:
  explicit DirectoryGuard(const std::filesystem::path& dir)
      : fd_(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    for (int wait = 0; fd_ >= 0 && ::flock(fd_, LOCK_EX | LOCK_NB) != 0; ++wait) {
      if (errno != EWOULDBLOCK || wait == 500) {
        ::close(fd_);
        fd_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~DirectoryGuard() {
    if (fd_ >= 0) ::close(fd_);  // releases the flock
  }
  DirectoryGuard(const DirectoryGuard&) = delete;
  DirectoryGuard& operator=(const DirectoryGuard&) = delete;

 private:
  int fd_;
};

// What a lock file says; `readable` is false for a file that is missing, empty, not JSON or
// without the fields of a lock (any field of the wrong type counts as missing).
struct Holder {
  bool readable = false;
  std::string run_id, host;
  long pid = 0;

  std::string describe() const {
    return fmt::format("run {} (host {}, pid {})", run_id, host, pid);
  }
  bool same(const Holder& other) const {
    return readable && other.readable && run_id == other.run_id && host == other.host &&
           pid == other.pid;
  }
};

Holder read_holder(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  const nlohmann::json lock =
      nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  Holder holder;
  if (!lock.is_object()) return holder;
  const auto run_id = lock.find("run_id"), host = lock.find("host"), pid = lock.find("pid");
  if (run_id == lock.end() || !run_id->is_string() || host == lock.end() || !host->is_string() ||
      pid == lock.end() || !pid->is_number_integer()) {
    return holder;
  }
  holder = {true, run_id->get<std::string>(), host->get<std::string>(), pid->get<long>()};
  return holder;
}

// The lock at `path`, read again for up to about a second while it cannot be read: a run that
// has just created it may not have written it yet.
Holder read_holder_settled(const std::filesystem::path& path) {
  Holder holder = read_holder(path);
  for (int wait = 0; !holder.readable && wait < 20 && lock_present(path); ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    holder = read_holder(path);
  }
  return holder;
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
  const auto in_use = [&](const std::string& who) {
    return FolderLockedError(fmt::format(
        "{} is in use by {}: save into another folder, or remove {} if that run is gone",
        dir.string(), who, path_.string()));
  };
  const auto unreadable = [&] {
    return FolderLockedError(fmt::format(
        "{} cannot be read (empty or damaged, as a crash can leave it): remove it if no run saves "
        "into {}",
        path_.string(), dir.string()));
  };
  const DirectoryGuard guard(dir);
  for (int attempt = 0; !create_exclusively(path_, mine.dump() + "\n"); ++attempt) {
    const Holder holder = read_holder_settled(path_);
    const bool present = lock_present(path_);
    if (attempt == 3) throw holder.readable ? in_use(holder.describe()) : unreadable();
    if (!present) continue;  // released meanwhile: try again
    if (!holder.readable) throw unreadable();
    const bool stale = holder.host == host_name() && !process_exists(holder.pid);
    if (!stale) throw in_use(holder.describe());
    // Take the stale lock over by moving it to a name of this process's own, so that of two runs
    // that both found it stale (without the guard) only one removes it.
    const std::filesystem::path moved = path_.string() + fmt::format(".stale.{}", ::getpid());
    std::error_code error;
    std::filesystem::rename(path_, moved, error);
    if (error == std::errc::no_such_file_or_directory) continue;  // another run moved it first
    if (error) {
      throw std::runtime_error(fmt::format("cannot take over the stale lock {} of {}: {}",
                                           path_.string(), holder.describe(), error.message()));
    }
    const Holder was = read_holder(moved);
    if (!was.same(holder)) {  // another run's fresh lock: back in place, unless a third has one
      if (::link(moved.c_str(), path_.c_str()) == 0) std::filesystem::remove(moved, error);
      throw in_use(was.readable ? was.describe() : holder.describe());
    }
    std::filesystem::remove(moved, error);
    taken_over_ = holder.describe();
  }
}

FolderLock::~FolderLock() {
  const Holder holder = read_holder(path_);
  if (holder.readable && holder.run_id == run_id_) {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
}

}  // namespace mpitron::nn
