// llm.c's token shards: the write/read round trip and its exact bytes, each one-line error of a
// bad shard (bad magic, bad version, truncated or extra bytes, a token >= vocab), and which files
// a file, folder or glob pattern names as train and val shards.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "nn/data/token_shard.h"
#include "scratch_dir_test_support.h"
#include "support/error_message.h"

namespace mpitron::test {
namespace {

class TokenShard : public ScratchDirTest {
 protected:
  std::string path(const std::string& name) const { return (dir / name).string(); }

  // Expects the shard bytes `bytes` to start with llm.c's header: magic, version, count, zeros.
  static void expect_header(const std::string& bytes, std::int32_t magic, std::int32_t version,
                            std::int32_t count) {
    ASSERT_GE(bytes.size(), 1024u);
    std::int32_t header[256];
    std::memcpy(header, bytes.data(), sizeof header);
    EXPECT_EQ(header[0], magic);
    EXPECT_EQ(header[1], version);
    EXPECT_EQ(header[2], count);
    EXPECT_TRUE(std::all_of(header + 3, header + 256, [](std::int32_t v) { return v == 0; }));
  }

  std::string read_error(const std::string& file, std::int32_t vocab = 50257) {
    return message_of<std::runtime_error>([&] { nn::read_token_shard(file, vocab); });
  }
};

TEST_F(TokenShard, WritesLlmcBytesAndReadsThemBack) {
  const std::vector<std::int32_t> tokens = {50256, 0, 1, 15496, 995, 65535};
  nn::write_token_shard(path("a.bin"), tokens);
  const std::string bytes = file_bytes(dir / "a.bin");
  ASSERT_EQ(bytes.size(), 1024 + 2 * tokens.size());
  expect_header(bytes, 20240520, 1, 6);
  EXPECT_EQ(bytes.substr(1024, 4), std::string("\x50\xc4\x00\x00", 4));  // 50256, 0 (LE)
  EXPECT_THAT(nn::read_token_shard(path("a.bin"), 65536),
              ::testing::ElementsAre(50256, 0, 1, 15496, 995, 65535));
  nn::write_token_shard(path("a.bin"), std::vector<std::int32_t>{});  // replaces it
  EXPECT_TRUE(nn::read_token_shard(path("a.bin"), 1).empty());
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);  // no temporary
}

// Llama 3's shards (llm.c's magic 20240801, version 7): uint32 ids, chosen for vocabularies
// beyond 65536 ids; the reader takes either kind and checks ids against the model's vocabulary.
TEST_F(TokenShard, WritesAndReadsUint32ShardsForLargeVocabularies) {
  EXPECT_EQ(nn::token_id_width(50257), nn::TokenIdWidth::uint16);
  EXPECT_EQ(nn::token_id_width(65536), nn::TokenIdWidth::uint16);
  EXPECT_EQ(nn::token_id_width(65537), nn::TokenIdWidth::uint32);
  EXPECT_EQ(nn::token_id_width(128256), nn::TokenIdWidth::uint32);
  const std::vector<std::int32_t> tokens = {128000, 0, 9906, 65536, 128255};
  nn::write_token_shard(path("w.bin"), tokens, nn::TokenIdWidth::uint32);
  const std::string bytes = file_bytes(dir / "w.bin");
  ASSERT_EQ(bytes.size(), 1024 + 4 * tokens.size());
  expect_header(bytes, 20240801, 7, 5);
  EXPECT_EQ(bytes.substr(1024, 4), std::string("\x00\xf4\x01\x00", 4));  // 128000 (LE)
  EXPECT_THAT(nn::read_token_shard(path("w.bin"), 128256),
              ::testing::ElementsAre(128000, 0, 9906, 65536, 128255));
  EXPECT_EQ(read_error(path("w.bin"), 128000),
            path("w.bin") + ": token 128000 at position 0 is >= vocab 128000");
  EXPECT_EQ(read_error(path("w.bin"), 50257),
            path("w.bin") + ": token 128000 at position 0 is >= vocab 50257");
  std::string version = bytes;
  version[4] = 1;
  put_file_bytes(dir / "version.bin", version);
  EXPECT_EQ(read_error(path("version.bin")),
            path("version.bin") + ": token shard version 1, expected 7 (magic 20240801)");
  put_file_bytes(dir / "short.bin", bytes.substr(0, bytes.size() - 2));
  EXPECT_THAT(read_error(path("short.bin"), 128256),
              names("header says 5 tokens (1044 bytes) but the file has 1042 bytes (truncated)"));
  EXPECT_THAT(message_of<std::invalid_argument>([&] {
                nn::write_token_shard(path("n.bin"), std::vector<std::int32_t>{-1},
                                      nn::TokenIdWidth::uint32);
              }),
              names("n.bin: token -1 at position 0 does not fit a shard's uint32"));
}

TEST_F(TokenShard, RefusesTokensThatDoNotFitUint16) {
  EXPECT_THAT(message_of<std::invalid_argument>([&] {
                nn::write_token_shard(path("a.bin"), std::vector<std::int32_t>{1, 70000});
              }),
              names("a.bin: token 70000 at position 1 does not fit a shard's uint16"));
  EXPECT_FALSE(std::filesystem::exists(dir / "a.bin"));
}

TEST_F(TokenShard, NamesEachDefectOnOneLine) {
  std::vector<std::int32_t> tokens(40, 11);
  tokens[17] = 50300;
  nn::write_token_shard(path("good.bin"), tokens);
  const std::string good = file_bytes(dir / "good.bin");
  EXPECT_EQ(read_error(path("good.bin")),
            path("good.bin") + ": token 50300 at position 17 is >= vocab 50257");

  std::string bad_magic = good;
  bad_magic[0] = 0x39;
  bad_magic[1] = 0x30;
  bad_magic[2] = bad_magic[3] = 0;
  put_file_bytes(dir / "magic.bin", bad_magic);
  EXPECT_EQ(read_error(path("magic.bin")),
            path("magic.bin") +
                ": not an llm.c token shard (magic 12345, expected 20240520 or 20240801)");
  put_file_bytes(dir / "text.bin", "hi");
  EXPECT_THAT(
      read_error(path("text.bin")),
      names("text.bin: not an llm.c token shard (2 bytes, expected magic 20240520 or 20240801)"));

  std::string version = good;
  version[4] = 2;
  put_file_bytes(dir / "version.bin", version);
  EXPECT_THAT(read_error(path("version.bin")), names("token shard version 2, expected 1"));

  put_file_bytes(dir / "short.bin", good.substr(0, good.size() - 1));
  EXPECT_EQ(read_error(path("short.bin")),
            path("short.bin") +
                ": header says 40 tokens (1104 bytes) but the file has 1103 bytes (truncated)");
  put_file_bytes(dir / "long.bin", good + "xy");
  EXPECT_THAT(
      read_error(path("long.bin")),
      names("header says 40 tokens (1104 bytes) but the file has 1106 bytes (extra bytes)"));
  std::string negative = good;  // the count, int32 at byte 8, set to -5
  negative.replace(8, 4, std::string("\xfb\xff\xff\xff", 4));
  put_file_bytes(dir / "negative.bin", negative);
  EXPECT_THAT(read_error(path("negative.bin")),
              names("header says -5 tokens: a token count cannot be negative"));
  put_file_bytes(dir / "header.bin", good.substr(0, 100));
  EXPECT_THAT(read_error(path("header.bin")),
              names("header.bin: truncated token shard header (100 of 1024 bytes)"));
  EXPECT_THAT(read_error(path("missing.bin")),
              names("missing.bin: cannot read: No such file or directory"));
  for (const char* name : {"good.bin", "magic.bin", "short.bin", "missing.bin"})
    EXPECT_EQ(read_error(path(name)).find('\n'), std::string::npos);
}

TEST_F(TokenShard, ListsTrainAndValFilesOfAFolderAPatternOrOneFile) {
  for (const char* name :
       {"x_train_000001.bin", "x_val_000000.bin", "x_train_000000.bin", "notes.txt", "other.bin"})
    put_file_bytes(dir / name, "");
  const nn::TokenShardFiles folder = nn::list_token_shards(dir.string());
  EXPECT_THAT(folder.train,
              ::testing::ElementsAre(path("x_train_000000.bin"), path("x_train_000001.bin")));
  EXPECT_THAT(folder.val, ::testing::ElementsAre(path("x_val_000000.bin")));

  const nn::TokenShardFiles pattern = nn::list_token_shards(path("x_*.bin"));
  EXPECT_EQ(pattern.train, folder.train);
  EXPECT_EQ(pattern.val, folder.val);
  EXPECT_THAT(nn::list_token_shards(path("other*")).train,
              ::testing::ElementsAre(path("other.bin")));

  const nn::TokenShardFiles one = nn::list_token_shards(path("x_val_000000.bin"));
  EXPECT_THAT(one.train, ::testing::ElementsAre(path("x_val_000000.bin")));
  EXPECT_TRUE(one.val.empty());

  EXPECT_EQ(message_of<std::runtime_error>([&] { nn::list_token_shards(path("y_*.bin")); }),
            path("y_*.bin") + ": no such file, folder or matching pattern");
  std::filesystem::create_directory(dir / "empty");
  EXPECT_EQ(message_of<std::runtime_error>([&] { nn::list_token_shards(path("empty")); }),
            path("empty") + ": no *train*.bin or *val*.bin files");
}

}  // namespace
}  // namespace mpitron::test
