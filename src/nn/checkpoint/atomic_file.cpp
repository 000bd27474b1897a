#include "nn/checkpoint/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace mpitron::nn {
namespace {

constexpr std::string_view kTemporaryTag = ".tmp.";

[[noreturn]] void fail(const std::filesystem::path& path, const char* action, int error) {
  throw std::runtime_error(
      fmt::format("cannot write {}: {}: {}", path.string(), action, std::strerror(error)));
}

std::filesystem::path temporary_name(const std::filesystem::path& path) {
  static std::atomic<unsigned> counter{0};
  const std::string name = fmt::format(".{}{}{}.{}", path.filename().string(), kTemporaryTag,
                                       static_cast<long>(::getpid()), counter++);
  return path.parent_path() / name;
}

std::filesystem::path directory_of(const std::filesystem::path& path) {
  return path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
}

}  // namespace

AtomicFile::AtomicFile(std::filesystem::path path)
    : path_(std::move(path)), temporary_(temporary_name(path_)) {
  fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(path_, "create a temporary file", errno);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temporary_.c_str());
  }
}

void AtomicFile::write(const void* data, std::size_t bytes) {
  if (fd_ < 0) throw std::runtime_error(fmt::format("cannot write {}: committed", path_.string()));
  const char* next = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t written = ::write(fd_, next, bytes);
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) fail(path_, "write", errno);
    next += written;
    bytes -= static_cast<std::size_t>(written);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) throw std::runtime_error(fmt::format("cannot write {}: committed", path_.string()));
  const int fd = fd_;
  fd_ = -1;
  const auto give_up = [&](const char* action) {
    const int error = errno;
    ::unlink(temporary_.c_str());
    fail(path_, action, error);
  };
  if (::fsync(fd) != 0) {
    ::close(fd);
    give_up("fsync");
  }
  if (::close(fd) != 0) give_up("close");
  if (::rename(temporary_.c_str(), path_.c_str()) != 0) give_up("rename");
  sync_directory(directory_of(path_));
}

bool AtomicFile::is_temporary_name(const std::string& file_name) {
  return file_name.size() > 1 && file_name[0] == '.' &&
         file_name.find(kTemporaryTag) != std::string::npos;
}

void write_file_atomically(const std::filesystem::path& path, std::string_view text) {
  AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

void sync_directory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail(dir, "open the directory", errno);
  const int status = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (status != 0) fail(dir, "fsync the directory", error);
}

}  // namespace mpitron::nn
