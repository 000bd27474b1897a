// One owner per checkpoint folder: a training run that saves into DIR holds DIR/.lock for its
// whole life, so a second run started into the same folder (another topology, another seed) is
// stopped at start instead of silently replacing the first run's steps.
#pragma once

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>

namespace mpitron::nn {

/// Thrown by FolderLock when another live run holds the folder.
class FolderLockedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The lock file DIR/.lock: {"run_id", "host", "pid", "started"} of the run that holds DIR.
class FolderLock {
 public:
  /// Takes DIR/.lock for the run `run_id` of this process (created with O_EXCL and synced, so
  /// two runs cannot both take it), holding flock on DIR meanwhile where the file system has it
  /// (runs that start at once take turns). A lock left by a process of this host that no longer
  /// exists is stale: it is taken over (moved aside under a name of this process first, so of
  /// two runs that find it stale only one takes it even without flock), and `taken_over`
  /// describes it ("run 3f2a... (host n1, pid 4711)"). Throws FolderLockedError "DIR is in use
  /// by run <id> (host H, pid P): save into another folder, or remove DIR/.lock if that run is
  /// gone" when the holder is alive, or on another host (whose processes cannot be seen from
  /// here); FolderLockedError "DIR/.lock cannot be read (empty or damaged, ...)" when it still is
  /// not a lock after about a second (a run that has just created it writes it meanwhile), or is
  /// a dangling link; std::runtime_error naming the path when the lock cannot be created,
  /// written (the empty file is removed) or moved aside.
  FolderLock(const std::filesystem::path& dir, const std::string& run_id);
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;
  /// Removes DIR/.lock if it is still this run's.
  ~FolderLock();

  /// The stale lock this one replaced, described, or nothing.
  const std::optional<std::string>& taken_over() const { return taken_over_; }

 private:
  std::filesystem::path path_;
  std::string run_id_;
  std::optional<std::string> taken_over_;
};

/// A run id: 16 hex digits from the host name, the process id and the clock.
std::string new_run_id();

}  // namespace mpitron::nn
