#include "nn/data/token_shard.h"

#include <fmt/format.h>
#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <stdexcept>

namespace mpitron::nn {

namespace fs = std::filesystem;

namespace {

using ShardHeader = std::array<std::int32_t, kTokenShardHeaderBytes / sizeof(std::int32_t)>;

struct ShardFileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};
using ShardFile = std::unique_ptr<std::FILE, ShardFileCloser>;

std::runtime_error shard_io_error(const std::string& path, const char* action) {
  return std::runtime_error(fmt::format("{}: cannot {}: {}", path, action, std::strerror(errno)));
}

bool is_train_name(const std::string& name) {
  return name.find("train") != std::string::npos;
}
bool is_val_name(const std::string& name) {
  return !is_train_name(name) && name.find("val") != std::string::npos;
}

}  // namespace

TokenIdWidth token_id_width(std::int64_t vocab) {
  return vocab > 65536 ? TokenIdWidth::uint32 : TokenIdWidth::uint16;
}

namespace {

// The ids of `tokens` as little-endian `Id`s; throws std::invalid_argument for one that does not
// fit.
template <typename Id>
std::string shard_body(const std::string& path, std::span<const std::int32_t> tokens) {
  std::vector<Id> ids(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || static_cast<std::uint64_t>(tokens[i]) > std::numeric_limits<Id>::max()) {
      throw std::invalid_argument(
          fmt::format("{}: token {} at position {} does not fit a shard's {}", path, tokens[i], i,
                      sizeof(Id) == 2 ? "uint16" : "uint32"));
    }
    ids[i] = static_cast<Id>(tokens[i]);
  }
  return std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(Id));
}

}  // namespace

void write_token_shard(const std::string& path, std::span<const std::int32_t> tokens,
                       TokenIdWidth width) {
  if (tokens.size() > 0x7fffffffu) {
    throw std::invalid_argument(
        fmt::format("{}: {} tokens, more than a shard's header can count", path, tokens.size()));
  }
  const bool wide = width == TokenIdWidth::uint32;
  const std::string body =
      wide ? shard_body<std::uint32_t>(path, tokens) : shard_body<std::uint16_t>(path, tokens);
  ShardHeader header{};
  header[0] = wide ? kTokenShard32Magic : kTokenShardMagic;
  header[1] = wide ? kTokenShard32Version : kTokenShardVersion;
  header[2] = static_cast<std::int32_t>(tokens.size());
  const std::string temporary = fmt::format("{}.tmp.{}", path, getpid());
  {
    ShardFile file(std::fopen(temporary.c_str(), "wb"));
    if (!file) throw shard_io_error(path, "write");
    const bool written = std::fwrite(header.data(), sizeof header, 1, file.get()) == 1 &&
                         std::fwrite(body.data(), 1, body.size(), file.get()) == body.size() &&
                         std::fflush(file.get()) == 0 && fsync(fileno(file.get())) == 0;
    if (!written) {
      const int saved = errno;
      std::remove(temporary.c_str());
      errno = saved;
      throw shard_io_error(path, "write");
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    std::remove(temporary.c_str());
    errno = saved;
    throw shard_io_error(path, "write");
  }
}

std::vector<std::uint32_t> read_token_shard(const std::string& path, std::int32_t vocab) {
  std::error_code error;
  if (fs::is_directory(path, error)) {
    errno = EISDIR;
    throw shard_io_error(path, "read");
  }
  ShardFile file(std::fopen(path.c_str(), "rb"));
  if (!file) throw shard_io_error(path, "read");
  const auto size = fs::file_size(path, error);
  if (error) throw std::runtime_error(fmt::format("{}: cannot read: {}", path, error.message()));
  ShardHeader header{};
  const std::size_t head = std::fread(header.data(), 1, sizeof header, file.get());
  if (head < sizeof(std::int32_t)) {
    throw std::runtime_error(
        fmt::format("{}: not an llm.c token shard ({} bytes, expected magic {} or {})", path, head,
                    kTokenShardMagic, kTokenShard32Magic));
  }
  const bool wide = header[0] == kTokenShard32Magic;
  if (header[0] != kTokenShardMagic && !wide) {
    throw std::runtime_error(
        fmt::format("{}: not an llm.c token shard (magic {}, expected {} or {})", path, header[0],
                    kTokenShardMagic, kTokenShard32Magic));
  }
  if (head < sizeof header) {
    throw std::runtime_error(fmt::format("{}: truncated token shard header ({} of {} bytes)", path,
                                         head, sizeof header));
  }
  const std::int32_t version = wide ? kTokenShard32Version : kTokenShardVersion;
  if (header[1] != version) {
    throw std::runtime_error(fmt::format("{}: token shard version {}, expected {} (magic {})", path,
                                         header[1], version, header[0]));
  }
  const std::int64_t count = header[2];
  if (count < 0) {
    throw std::runtime_error(
        fmt::format("{}: header says {} tokens: a token count cannot be negative", path, count));
  }
  const std::size_t id_bytes = wide ? sizeof(std::uint32_t) : sizeof(std::uint16_t);
  const std::uint64_t expected = sizeof header + id_bytes * static_cast<std::uint64_t>(count);
  if (size != expected) {
    throw std::runtime_error(
        fmt::format("{}: header says {} tokens ({} bytes) but the file has {} bytes ({})", path,
                    count, expected, size, size < expected ? "truncated" : "extra bytes"));
  }
  std::string body(static_cast<std::size_t>(count) * id_bytes, '\0');
  if (std::fread(body.data(), 1, body.size(), file.get()) != body.size())
    throw shard_io_error(path, "read");
  std::vector<std::uint32_t> tokens(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    std::uint16_t narrow = 0;
    if (wide) {
      std::memcpy(&tokens[i], body.data() + 4 * i, 4);
    } else {
      std::memcpy(&narrow, body.data() + 2 * i, 2);
      tokens[i] = narrow;
    }
    if (tokens[i] >= static_cast<std::uint32_t>(std::max(vocab, 0))) {
      throw std::runtime_error(
          fmt::format("{}: token {} at position {} is >= vocab {}", path, tokens[i], i, vocab));
    }
  }
  return tokens;
}

TokenShardFiles list_token_shards(const std::string& spec) {
  TokenShardFiles files;
  std::error_code error;
  if (fs::is_regular_file(spec, error)) {
    files.train.push_back(spec);
    return files;
  }
  std::vector<std::string> found;
  const bool folder = fs::is_directory(spec, error);
  if (folder) {
    for (const fs::directory_entry& entry : fs::directory_iterator(spec, error)) {
      const std::string name = entry.path().filename().string();
      if (entry.is_regular_file(error) && name.ends_with(".bin") &&
          (is_train_name(name) || is_val_name(name)))
        found.push_back(entry.path().string());
    }
    if (found.empty())
      throw std::runtime_error(fmt::format("{}: no *train*.bin or *val*.bin files", spec));
  } else {
    glob_t matches{};
    const int result = glob(spec.c_str(), 0, nullptr, &matches);
    for (std::size_t i = 0; result == 0 && i < matches.gl_pathc; ++i) {
      if (fs::is_regular_file(matches.gl_pathv[i], error)) found.emplace_back(matches.gl_pathv[i]);
    }
    globfree(&matches);
    if (found.empty())
      throw std::runtime_error(fmt::format("{}: no such file, folder or matching pattern", spec));
  }
  std::sort(found.begin(), found.end());
  for (const std::string& file : found) {
    const std::string name = fs::path(file).filename().string();
    (is_val_name(name) ? files.val : files.train).push_back(file);
  }
  return files;
}

}  // namespace mpitron::nn
