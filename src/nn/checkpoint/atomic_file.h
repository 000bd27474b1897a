// Crash-safe file replacement: the bytes go to a temporary name in the target's directory, are
// fsync'ed, renamed over the target, and the directory is fsync'ed, so after a crash the target
// holds either its old contents or the complete new ones, never a mix (POSIX rename(2) is
// atomic within one file system).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string_view>

namespace mpitron::nn {

/// A file being written under a temporary name ("." + file name + ".tmp." + pid + "." + counter)
/// in the directory of `path`; `commit()` makes it appear as `path`. Destroying it uncommitted
/// (e.g. while an exception unwinds) removes the temporary file. Not copyable.
class AtomicFile {
 public:
  /// Creates the temporary file. Throws std::runtime_error "cannot write <path>: <reason>" when
  /// it cannot be created (missing directory, permissions, ...).
  explicit AtomicFile(std::filesystem::path path);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  /// Appends `bytes` bytes from `data`. Throws std::runtime_error naming the path on a failed
  /// write (e.g. disk full) or when already committed.
  void write(const void* data, std::size_t bytes);

  /// fsync, close, rename to the target name, fsync the directory. Throws std::runtime_error
  /// naming the path when any of these fails (the temporary file is then removed).
  void commit();

  /// Names the temporary files AtomicFile creates, so a directory sweep can remove leftovers of
  /// a crashed writer.
  static bool is_temporary_name(const std::string& file_name);

 private:
  std::filesystem::path path_;
  std::filesystem::path temporary_;
  int fd_ = -1;
};

/// Writes `text` to `path` with AtomicFile. Throws std::runtime_error naming the path.
void write_file_atomically(const std::filesystem::path& path, std::string_view text);

/// fsyncs directory `dir`, making the creation, removal and renaming of its entries durable.
/// Throws std::runtime_error naming the directory.
void sync_directory(const std::filesystem::path& dir);

}  // namespace mpitron::nn
