// llm.c's token shards (Karpathy's llm.c, dev/data/data_common.py): a header of 256 int32
// (little-endian: magic, version, token count, the rest 0), then the tokens: GPT-2's shards
// (magic 20240520, version 1) hold uint16 ids, Llama 3's (magic 20240801, version 7) uint32 ids.
// Written by `mpitron tokenize` (and llm.c's data scripts), read by training.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mpitron::nn {

/// The first int32 of an llm.c token shard of uint16 ids (GPT-2's).
inline constexpr std::int32_t kTokenShardMagic = 20240520;
/// The version of a shard of uint16 ids.
inline constexpr std::int32_t kTokenShardVersion = 1;
/// The first int32 of an llm.c token shard of uint32 ids (Llama 3's).
inline constexpr std::int32_t kTokenShard32Magic = 20240801;
/// The version of a shard of uint32 ids.
inline constexpr std::int32_t kTokenShard32Version = 7;
/// Header bytes before the tokens: 256 int32.
inline constexpr std::size_t kTokenShardHeaderBytes = 256 * sizeof(std::int32_t);

/// The width of a shard's token ids.
enum class TokenIdWidth { uint16, uint32 };

/// The width a vocabulary of `vocab` ids needs: uint16 up to 65536 ids (GPT-2's shards), uint32
/// above (Llama 3's 128256).
TokenIdWidth token_id_width(std::int64_t vocab);

/// Writes `tokens` to `path` as one shard of `width` ids (uint16: magic 20240520, version 1;
/// uint32: magic 20240801, version 7), atomically: the bytes go to "<path>.tmp.<pid>" in the
/// same folder, then are renamed over `path`, so a reader never sees a partial shard. Throws
/// std::invalid_argument for a negative token, a token >= 65536 in a uint16 shard or more than
/// 2^31-1 tokens, and std::runtime_error "<path>: cannot write: <reason>" when writing fails.
void write_token_shard(const std::string& path, std::span<const std::int32_t> tokens,
                       TokenIdWidth width = TokenIdWidth::uint16);

/// The tokens of the shard at `path` (either width), each checked to be < `vocab`. Throws
/// std::runtime_error, one line naming the path: "<path>: cannot read: <reason>", "<path>: not an
/// llm.c token shard (magic X, expected 20240520 or 20240801)", "<path>: truncated token shard
/// header (N of 1024 bytes)", "<path>: token shard version X, expected 1 (magic 20240520)" (or
/// 7 for 20240801), "<path>: header says -5 tokens: a token count cannot be negative", "<path>:
/// header says N tokens (B bytes) but the file has M bytes (truncated|extra bytes)", "<path>:
/// token 50300 at position 17 is >= vocab 50257".
std::vector<std::uint32_t> read_token_shard(const std::string& path, std::int32_t vocab);

/// Token shard files, sorted by name.
struct TokenShardFiles {
  std::vector<std::string> train;
  std::vector<std::string> val;
};

/// The shards `spec` names: one file (train, whatever its name); a folder, whose files named
/// "*train*.bin" are train and the other "*val*.bin" val (llm.c's names, e.g.
/// fineweb_train_000001.bin), the rest ignored; or a glob(3) pattern, whose matching files are
/// val when their name holds "val" but not "train", else train. Throws std::runtime_error
/// "<spec>: no such file, folder or matching pattern" when nothing exists there, and "<spec>: no
/// *train*.bin or *val*.bin files" for a folder without shards.
TokenShardFiles list_token_shards(const std::string& spec);

}  // namespace mpitron::nn
