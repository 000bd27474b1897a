// Auto's GEMM provider (kernels/cpu/gemm_auto.h) without the clock: the rule on given rates, the
// cache file's round trip, its corrupt and unwritable cases and concurrent writers, and the
// resolution from MPITRON_GEMM_RATES or a cache file, so that no test depends on a timing.
#include "kernels/cpu/gemm_auto.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace mpitron::test {
using namespace ::mpitron::kernels;
namespace fs = std::filesystem;
namespace {

// A fresh folder under the temporary directory, removed at the end of the test.
class ScratchFolder {
 public:
  ScratchFolder() {
    path_ = fs::temp_directory_path() /
            ("mpitron_gemm_auto_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchFolder() {
    std::error_code error;
    fs::remove_all(path_, error);
  }
  const fs::path& path() const { return path_; }
  // The names of the files in the folder.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& entry : fs::directory_iterator(path_))
      out.push_back(entry.path().filename().string());
    return out;
  }

 private:
  fs::path path_;
};

// Sets an environment variable for one scope, then restores it.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedVariable() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The providers of this build.
std::vector<GemmProvider> providers() {
  std::vector<GemmProvider> out{GemmProvider::eigen, GemmProvider::mpitron};
  if (gemm_blas_available()) out.push_back(GemmProvider::blas);
  return out;
}

GemmChoice choice_of(GemmProvider provider, int threads) {
  return {provider,
          {{GemmProvider::eigen, 40.0}, {GemmProvider::mpitron, 61.5}},
          threads,
          GemmChoiceSource::measured};
}

void write_text(const fs::path& file, const std::string& text) {
  std::ofstream(file, std::ios::trunc) << text;
}

TEST(GemmAutoRule, TheFastestWinsBeyondTheTie) {
  const std::vector<GemmRate> rates{{GemmProvider::eigen, 100.0}, {GemmProvider::mpitron, 90.0}};
  EXPECT_EQ(choose_gemm_provider(rates), GemmProvider::eigen);
  // The case: OpenBLAS on another CPU's kernels at 125 GFLOP/s, mpitron's at 240.
  const std::vector<GemmRate> zen5{{GemmProvider::blas, 125.0}, {GemmProvider::mpitron, 240.0}};
  EXPECT_EQ(choose_gemm_provider(zen5), GemmProvider::mpitron);
}

TEST(GemmAutoRule, TiesGoToThePreferenceOrderWhateverTheListOrder) {
  std::vector<GemmRate> rates{
      {GemmProvider::eigen, 100.0}, {GemmProvider::blas, 98.0}, {GemmProvider::mpitron, 97.5}};
  EXPECT_EQ(choose_gemm_provider(rates), GemmProvider::mpitron);  // 2.5 % below: a tie
  std::reverse(rates.begin(), rates.end());
  EXPECT_EQ(choose_gemm_provider(rates), GemmProvider::mpitron);
  rates = {{GemmProvider::eigen, 100.0}, {GemmProvider::blas, 98.0}, {GemmProvider::mpitron, 96.0}};
  EXPECT_EQ(choose_gemm_provider(rates), GemmProvider::blas);  // mpitron 4 % below: out
  rates = {{GemmProvider::eigen, 100.0}, {GemmProvider::blas, 96.0}, {GemmProvider::mpitron, 96.0}};
  EXPECT_EQ(choose_gemm_provider(rates), GemmProvider::eigen);
  rates = {{GemmProvider::eigen, 100.0}, {GemmProvider::blas, 100.0}};
  EXPECT_EQ(choose_gemm_provider(rates), GemmProvider::blas);
}

TEST(GemmAutoRule, NeverMoreThanTenPercentSlowerThanTheBest) {
  std::mt19937 random(7);
  std::uniform_real_distribution<double> rate(1.0, 300.0);
  std::uniform_real_distribution<double> near(0.85, 1.0);
  for (int trial = 0; trial < 10000; ++trial) {
    // Half the trials put every rate near the first, where ties happen.
    const double first = rate(random);
    std::vector<GemmRate> rates;
    double best = 0.0;
    for (const GemmProvider provider :
         {GemmProvider::eigen, GemmProvider::blas, GemmProvider::mpitron}) {
      const double gflops = trial % 2 == 0 ? rate(random) : first * near(random);
      rates.push_back({provider, gflops});
      best = std::max(best, gflops);
    }
    const GemmProvider chosen = choose_gemm_provider(rates);
    for (const GemmRate& r : rates) {
      if (r.provider != chosen) continue;
      ASSERT_GE(r.gflops, 0.9 * best) << "trial " << trial;
      ASSERT_GE(r.gflops, (1.0 - kGemmTieShare) * best) << "trial " << trial;
    }
  }
}

TEST(GemmAutoRule, RefusesRatesItCannotChooseFrom) {
  EXPECT_THROW(choose_gemm_provider(std::vector<GemmRate>{}), std::invalid_argument);
  const std::vector<GemmRate> twice{{GemmProvider::eigen, 1.0}, {GemmProvider::eigen, 2.0}};
  EXPECT_THROW(choose_gemm_provider(twice), std::invalid_argument);
  const std::vector<GemmRate> zero{{GemmProvider::eigen, 0.0}};
  EXPECT_THROW(choose_gemm_provider(zero), std::invalid_argument);
  const std::vector<GemmRate> nan{{GemmProvider::eigen, std::nan("")}};
  EXPECT_THROW(choose_gemm_provider(nan), std::invalid_argument);
}

TEST(GemmAutoRates, ParsesTheVariable) {
  const std::vector<GemmRate> rates = parse_gemm_rates("eigen=40,mpitron=61.5");
  ASSERT_EQ(rates.size(), 2U);
  EXPECT_EQ(rates[0].provider, GemmProvider::eigen);
  EXPECT_EQ(rates[0].gflops, 40.0);
  EXPECT_EQ(rates[1].provider, GemmProvider::mpitron);
  EXPECT_EQ(rates[1].gflops, 61.5);
  for (const char* bad : {"", "eigen", "eigen=", "eigen=x", "eigen=-1", "eigen=inf", "mkl=3",
                          "auto=3", "eigen=1,eigen=2", "eigen=1,"}) {
    EXPECT_THROW(parse_gemm_rates(bad), std::invalid_argument) << bad;
  }
  if (!gemm_blas_available()) {
    EXPECT_THROW(parse_gemm_rates("blas=1"), std::invalid_argument);
  }
}

TEST(GemmAutoCache, RoundTripsForItsKeyOnly) {
  ScratchFolder folder;
  const fs::path file = folder.path() / "sub" / "gemm.txt";  // the folder is created
  for (const GemmProvider provider : providers()) {
    fs::remove(file);
    ASSERT_TRUE(write_gemm_cache(file, "key one", choice_of(provider, 3)));
    const std::optional<GemmChoice> read = read_gemm_cache(file, "key one");
    ASSERT_TRUE(read.has_value());
    EXPECT_EQ(read->provider, provider);
    EXPECT_EQ(read->threads, 3);
    EXPECT_EQ(read->source, GemmChoiceSource::cached);
    ASSERT_EQ(read->rates.size(), 2U);
    EXPECT_EQ(read->rates[1].provider, GemmProvider::mpitron);
    EXPECT_EQ(read->rates[1].gflops, 61.5);
    EXPECT_FALSE(read_gemm_cache(file, "key two").has_value());
    EXPECT_FALSE(read_gemm_cache(file, "key on").has_value());
  }
  EXPECT_FALSE(read_gemm_cache(folder.path() / "missing.txt", "key one").has_value());
}

TEST(GemmAutoCache, TheFirstWriterWins) {
  ScratchFolder folder;
  const fs::path file = folder.path() / "gemm.txt";
  ASSERT_TRUE(write_gemm_cache(file, "k", choice_of(GemmProvider::eigen, 1)));
  EXPECT_FALSE(write_gemm_cache(file, "k", choice_of(GemmProvider::mpitron, 1)));
  EXPECT_EQ(read_gemm_cache(file, "k")->provider, GemmProvider::eigen);
  EXPECT_EQ(folder.names(), std::vector<std::string>{"gemm.txt"});  // no temporary left
}

TEST(GemmAutoCache, ACorruptFileIsAMissAndIsReplaced) {
  ScratchFolder folder;
  const fs::path file = folder.path() / "gemm.txt";
  const std::string good = "mpitron gemm auto 1\nkey k\nthreads 2\nprovider mpitron\n";
  write_text(file, good + "rate eigen 40\n");
  ASSERT_TRUE(read_gemm_cache(file, "k").has_value());  // the format the corrupt ones break
  const std::vector<std::string> corrupt_files{
      std::string(),
      std::string("\x01\x02garbage"),
      std::string("mpitron gemm auto 2\n"),
      std::string("mpitron gemm auto 1\nkey k\n"),                    // no provider
      std::string("mpitron gemm auto 1\nkey k\nprovider mpitron\n"),  // no threads
      "mpitron gemm auto 1\nkey k\nthreads 0\nprovider mpitron\n",    // threads < 1
      "mpitron gemm auto 1\nkey k\nthreads 2\nprovider mkl\n",        // no such provider
      good + "rate eigen fast\n",
      good + "rate mkl 3\n",
      good + "rate eigen 4 5\n",
      good + "something else\n",
      "mpitron gemm auto 1\nkey k\nthreads two\nprovider eigen\n"};
  for (const std::string& corrupt : corrupt_files) {
    write_text(file, corrupt);
    EXPECT_FALSE(read_gemm_cache(file, "k").has_value()) << corrupt;
    ASSERT_TRUE(write_gemm_cache(file, "k", choice_of(GemmProvider::eigen, 2))) << corrupt;
    EXPECT_EQ(read_gemm_cache(file, "k")->provider, GemmProvider::eigen);
  }
  // Another key's file under the same name is replaced too.
  ASSERT_TRUE(write_gemm_cache(file, "other", choice_of(GemmProvider::mpitron, 2)));
  EXPECT_EQ(read_gemm_cache(file, "other")->provider, GemmProvider::mpitron);
  EXPECT_EQ(folder.names(), std::vector<std::string>{"gemm.txt"});
}

TEST(GemmAutoCache, AnUnwritableFolderIsNoError) {
  ScratchFolder folder;
  write_text(folder.path() / "not_a_folder", "x");  // (permissions do not stop root)
  EXPECT_FALSE(write_gemm_cache(folder.path() / "not_a_folder" / "gemm.txt", "k",
                                choice_of(GemmProvider::eigen, 1)));
}

TEST(GemmAutoCache, ConcurrentWritersLeaveOneReadableChoice) {
  ScratchFolder folder;
  const fs::path file = folder.path() / "gemm.txt";
  for (int repeat = 0; repeat < 20; ++repeat) {
    fs::remove(file);
    constexpr int kWriters = 8;
    std::vector<int> stored(kWriters, 0);
    std::vector<std::thread> writers;
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        const GemmProvider provider = w % 2 == 0 ? GemmProvider::eigen : GemmProvider::mpitron;
        stored[w] = write_gemm_cache(file, "k", choice_of(provider, w + 1)) ? 1 : 0;
      });
    }
    for (std::thread& writer : writers)
      writer.join();
    const std::optional<GemmChoice> read = read_gemm_cache(file, "k");
    ASSERT_TRUE(read.has_value());
    const int winner = read->threads - 1;
    EXPECT_EQ(stored[winner], 1);
    EXPECT_EQ(std::accumulate(stored.begin(), stored.end(), 0), 1) << "repeat " << repeat;
    ASSERT_EQ(folder.names(), std::vector<std::string>{"gemm.txt"});
  }
}

TEST(GemmAutoCache, TheFileFollowsTheEnvironment) {
  {
    ScopedVariable off("MPITRON_GEMM_CACHE", "off");
    EXPECT_FALSE(gemm_cache_file("k").has_value());
  }
  {
    ScopedVariable folder("MPITRON_GEMM_CACHE", "/some/folder");
    EXPECT_EQ(gemm_cache_file("k")->parent_path(), fs::path("/some/folder"));
    EXPECT_NE(gemm_cache_file("k"), gemm_cache_file("k2"));
  }
  ScopedVariable unset("MPITRON_GEMM_CACHE", "");
  {
    ScopedVariable xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(gemm_cache_file("k")->parent_path(), fs::path("/xdg/mpitron"));
  }
  ScopedVariable no_xdg("XDG_CACHE_HOME", "");
  ScopedVariable home("HOME", "/home/someone");
  EXPECT_EQ(gemm_cache_file("k")->parent_path(), fs::path("/home/someone/.cache/mpitron"));
}

TEST(GemmAutoCache, TheKeyNamesTheThreadsAndOpenBlasSettings) {
  const int threads = cpu_threads();
  set_cpu_threads(1);
  const std::string one = gemm_cache_key();
  set_cpu_threads(2);
  EXPECT_NE(gemm_cache_key(), one);
  set_cpu_threads(1);
  {
    // A core type other than the environment's (some machines set Haswell there).
    const char* set = std::getenv("OPENBLAS_CORETYPE");
    const bool haswell = set != nullptr && std::string(set) == "Haswell";
    ScopedVariable core("OPENBLAS_CORETYPE", haswell ? "SkylakeX" : "Haswell");
    EXPECT_NE(gemm_cache_key(), one);
  }
  EXPECT_EQ(gemm_cache_key(), one);
  EXPECT_EQ(one.find('\n'), std::string::npos);
  set_cpu_threads(threads);
}

TEST(GemmAutoResolve, GivenRatesDecideWithoutMeasuring) {
  ScopedVariable rates("MPITRON_GEMM_RATES", "eigen=100,mpitron=50");
  const GemmChoice choice = resolve_auto_gemm_provider();
  EXPECT_EQ(choice.provider, GemmProvider::eigen);
  EXPECT_EQ(choice.source, GemmChoiceSource::given);
  EXPECT_EQ(choice.threads, cpu_threads());
  ScopedVariable bad("MPITRON_GEMM_RATES", "eigen=fast");
  EXPECT_THROW(resolve_auto_gemm_provider(), std::invalid_argument);
}

TEST(GemmAutoResolve, ACachedChoiceIsReadWithoutMeasuring) {
  ScratchFolder folder;
  ScopedVariable cache("MPITRON_GEMM_CACHE", folder.path().string());
  const std::string key = gemm_cache_key();
  // A choice no measurement would store (a rate of 1 GFLOP/s for the winner).
  GemmChoice stored{
      GemmProvider::eigen, {{GemmProvider::eigen, 1.0}}, 5, GemmChoiceSource::measured};
  ASSERT_TRUE(write_gemm_cache(*gemm_cache_file(key), key, stored));
  const GemmChoice choice = resolve_auto_gemm_provider();
  EXPECT_EQ(choice.source, GemmChoiceSource::cached);
  EXPECT_EQ(choice.provider, GemmProvider::eigen);
  EXPECT_EQ(choice.threads, 5);
}

TEST(GemmAutoResolve, AnInstalledChoiceHoldsForItsThreadCountOnly) {
  const int threads = cpu_threads();
  constexpr int kUnused = 7;  // no other test installs a choice for 7 threads
  set_auto_gemm_provider(GemmProvider::eigen, kUnused);
  set_cpu_threads(kUnused);
  EXPECT_EQ(default_gemm_provider(), GemmProvider::eigen);
  EXPECT_EQ(parse_gemm_provider("auto"), GemmProvider::eigen);
  set_cpu_threads(1);
  EXPECT_EQ(default_gemm_provider(), fixed_gemm_provider());
  set_cpu_threads(threads);
  EXPECT_THROW(set_auto_gemm_provider(GemmProvider::eigen, 0), std::invalid_argument);
  if (!gemm_blas_available()) {
    EXPECT_THROW(set_auto_gemm_provider(GemmProvider::blas, 1), std::invalid_argument);
  }
}

}  // namespace
}  // namespace mpitron::test
