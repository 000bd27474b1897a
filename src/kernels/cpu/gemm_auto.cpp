// Auto's GEMM provider: the rule, the measurement and the cache file (gemm_auto.h).
#include "kernels/cpu/gemm_auto.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "kernels/build_info.h"
#include "kernels/device.h"

namespace mpitron::kernels {
namespace {

constexpr const char* kCacheHeader = "mpitron gemm auto 1";

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

// The providers of this build, in the order auto's rates are listed.
std::vector<GemmProvider> built_providers() {
  std::vector<GemmProvider> out{GemmProvider::eigen};
  if (gemm_blas_available()) out.push_back(GemmProvider::blas);
  out.push_back(GemmProvider::mpitron);
  return out;
}

// `name` as a provider of this build, or std::nullopt ("auto" is no provider here).
std::optional<GemmProvider> provider_named(const std::string& name) {
  for (const GemmProvider provider : built_providers())
    if (to_string(provider) == name) return provider;
  return std::nullopt;
}

// The first "model name" of /proc/cpuinfo, or "unknown CPU".
std::string cpu_model() {
  std::ifstream info("/proc/cpuinfo");
  std::string line;
  while (std::getline(info, line)) {
    if (!line.starts_with("model name")) continue;
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const std::size_t first = line.find_first_not_of(" \t", colon + 1);
    return first == std::string::npos ? std::string("unknown CPU") : line.substr(first);
  }
  return "unknown CPU";
}

// The kernels library this code runs from, as "path size mtime": any rebuild changes it.
std::string build_identity() {
  static const int anchor = 0;
  Dl_info info{};
  std::string path = "unknown build";
  if (dladdr(&anchor, &info) != 0 && info.dli_fname != nullptr) path = info.dli_fname;
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  if (error) return path;
  const auto time = std::filesystem::last_write_time(path, error);
  if (error) return path;
  return path + " " + std::to_string(size) + " " + std::to_string(time.time_since_epoch().count());
}

// A one-line field: line breaks become spaces.
std::string one_line(std::string text) {
  std::replace_if(
      text.begin(), text.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  return text;
}

// One product of auto's measurement, with its operands.
struct TimedProduct {
  bool trans_a, trans_b;
  std::size_t m, n, k;
  Buffer a, b, c;

  TimedProduct(bool ta, bool tb, std::size_t rows, std::size_t columns, std::size_t depth)
      : trans_a(ta),
        trans_b(tb),
        m(rows),
        n(columns),
        k(depth),
        a(rows * depth, DType::f32, Device::cpu),
        b(depth * columns, DType::f32, Device::cpu),
        c(rows * columns, DType::f32, Device::cpu) {
    fill(a, 0.5);
    fill(b, 0.25);
  }

  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * k; }

  // Seconds of one call: at one thread, where every provider runs the whole product on this
  // thread, this thread's CPU time, so that time slices other processes take from a shared core
  // do not count (by the wall clock a loaded 2-core machine once measured mpitron's GEMM at a
  // tenth of its rate and chose another provider); at more threads, the wall clock.
  double time() {
    const bool one_thread = cpu_threads() == 1;
    const double start = one_thread ? thread_cpu_seconds() : wall_seconds();
    gemm(trans_a, trans_b, m, n, k, 1.0, a, b, 0.0, c);
    return (one_thread ? thread_cpu_seconds() : wall_seconds()) - start;
  }

  static double wall_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  static double thread_cpu_seconds() {
    timespec now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
  }
};

}  // namespace

std::string to_string(GemmChoiceSource source) {
  switch (source) {
    case GemmChoiceSource::measured:
      return "measured";
    case GemmChoiceSource::cached:
      return "cached";
    case GemmChoiceSource::given:
      return "given";
    case GemmChoiceSource::fixed:
      break;
  }
  return "fixed";
}

GemmProvider choose_gemm_provider(std::span<const GemmRate> rates) {
  if (rates.empty()) throw std::invalid_argument("no GEMM rates to choose from");
  double best = 0.0;
  for (std::size_t i = 0; i < rates.size(); ++i) {
    const GemmRate& rate = rates[i];
    if (!(std::isfinite(rate.gflops) && rate.gflops > 0.0)) {
      throw std::invalid_argument("the GEMM rate of " + to_string(rate.provider) +
                                  " is not a finite number above 0");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (rates[j].provider == rate.provider) {
        throw std::invalid_argument("the GEMM rates name " + to_string(rate.provider) + " twice");
      }
    }
    best = std::max(best, rate.gflops);
  }
  for (const GemmProvider preferred : kGemmPreference) {
    for (const GemmRate& rate : rates) {
      if (rate.provider == preferred && rate.gflops >= (1.0 - kGemmTieShare) * best) {
        return preferred;
      }
    }
  }
  throw std::logic_error("choose_gemm_provider: no provider within the tie of the best");
}

std::vector<GemmRate> measure_gemm_providers(double seconds) {
  // A GPT-2 MLP's c_fc at half its width, on 128 tokens: forward, input and weight gradient.
  std::vector<TimedProduct> products;
  products.emplace_back(false, true, 128, 1536, 384);
  products.emplace_back(false, false, 128, 384, 1536);
  products.emplace_back(true, false, 1536, 384, 128);
  const std::vector<GemmProvider> providers = built_providers();
  const GemmProvider before = gemm_provider();
  // fastest[p][i]: provider p's fastest call of product i.
  std::vector<std::vector<double>> fastest(providers.size(),
                                           std::vector<double>(products.size(), HUGE_VAL));
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (int round = 0; round < 3 || std::chrono::steady_clock::now() < end; ++round) {
    for (std::size_t p = 0; p < providers.size(); ++p) {
      set_gemm_provider(providers[p]);
      for (std::size_t i = 0; i < products.size(); ++i) {
        const double elapsed = products[i].time();
        if (round > 0) fastest[p][i] = std::min(fastest[p][i], elapsed);
      }
    }
  }
  set_gemm_provider(before);
  double flops = 0.0;
  for (const TimedProduct& product : products)
    flops += product.flops();
  std::vector<GemmRate> rates;
  for (std::size_t p = 0; p < providers.size(); ++p) {
    double total = 0.0;
    for (const double elapsed : fastest[p])
      total += elapsed;
    rates.push_back({providers[p], flops / std::max(total, 1e-9) / 1e9});
  }
  return rates;
}

std::string gemm_cache_key() {
  return one_line("cpu=" + cpu_model() + ";build=" + build_identity() + " " +
                  cpu_vector_extensions() + ";threads=" + std::to_string(cpu_threads()) + ";blas=" +
                  gemm_blas_kernel() + ";OPENBLAS_CORETYPE=" + environment("OPENBLAS_CORETYPE") +
                  ";OPENBLAS_L2_SIZE=" + environment("OPENBLAS_L2_SIZE"));
}

std::optional<std::filesystem::path> gemm_cache_file(const std::string& key) {
  const std::string setting = environment("MPITRON_GEMM_CACHE");
  if (setting == "off") return std::nullopt;
  std::filesystem::path folder;
  if (!setting.empty()) {
    folder = setting;
  } else if (const std::string xdg = environment("XDG_CACHE_HOME"); !xdg.empty()) {
    folder = std::filesystem::path(xdg) / "mpitron";
  } else if (const std::string home = environment("HOME"); !home.empty()) {
    folder = std::filesystem::path(home) / ".cache" / "mpitron";
  } else {
    return std::nullopt;
  }
  std::ostringstream name;
  name << "gemm-auto-" << std::hex << std::hash<std::string>{}(key) << ".txt";
  return folder / name.str();
}

std::optional<GemmChoice> read_gemm_cache(const std::filesystem::path& file,
                                          const std::string& key) {
  std::ifstream in(file);
  if (!in.is_open()) return std::nullopt;
  std::string line;
  if (!std::getline(in, line) || line != kCacheHeader) return std::nullopt;
  if (!std::getline(in, line) || line != "key " + key) return std::nullopt;
  GemmChoice choice;
  choice.source = GemmChoiceSource::cached;
  bool have_provider = false, have_threads = false;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string field, name, extra;
    fields >> field;
    if (field == "provider" && fields >> name && !(fields >> extra)) {
      const auto provider = provider_named(name);
      if (!provider) return std::nullopt;
      choice.provider = *provider;
      have_provider = true;
    } else if (field == "threads" && fields >> choice.threads && !(fields >> extra)) {
      have_threads = true;
    } else if (field == "rate" && fields >> name) {
      GemmRate rate;
      const auto provider = provider_named(name);
      if (!provider || !(fields >> rate.gflops) || (fields >> extra)) return std::nullopt;
      rate.provider = *provider;
      choice.rates.push_back(rate);
    } else {
      return std::nullopt;
    }
  }
  if (!have_provider || !have_threads || choice.threads < 1) return std::nullopt;
  return choice;
}

bool write_gemm_cache(const std::filesystem::path& file, const std::string& key,
                      const GemmChoice& choice) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (read_gemm_cache(file, key)) return false;
  fs::create_directories(file.parent_path(), error);
  std::random_device random;
  const fs::path temporary =
      file.parent_path() / (file.filename().string() + ".tmp." + std::to_string(::getpid()) + "." +
                            std::to_string(random()));
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << kCacheHeader << "\nkey " << key << "\nthreads " << choice.threads << "\nprovider "
        << to_string(choice.provider) << "\n";
    for (const GemmRate& rate : choice.rates)
      out << "rate " << to_string(rate.provider) << " " << rate.gflops << "\n";
    out.close();
    if (!out.good()) {
      fs::remove(temporary, error);
      return false;
    }
  }
  // An unreadable file (corrupt, another key's under the same hash) is replaced; a readable one
  // that appeared meanwhile wins.
  if (fs::exists(file, error) && !read_gemm_cache(file, key)) fs::remove(file, error);
  fs::create_hard_link(temporary, file, error);
  bool stored = !error;
  if (error && error != std::errc::file_exists) {  // a file system without hard links
    fs::rename(temporary, file, error);
    stored = !error;
  }
  fs::remove(temporary, error);
  return stored;
}

std::vector<GemmRate> parse_gemm_rates(const std::string& text) {
  const auto reject = [&text](const std::string& why) {
    return std::invalid_argument("GEMM rates '" + text + "': " + why +
                                 " (expected e.g. eigen=40,mpitron=61.5)");
  };
  if (text.ends_with(',')) throw reject("an empty item");
  std::vector<GemmRate> rates;
  std::istringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    const std::size_t equals = item.find('=');
    if (equals == std::string::npos) throw reject("'" + item + "' has no '='");
    const std::string name = item.substr(0, equals);
    const auto provider = provider_named(name);
    if (!provider) throw reject("'" + name + "' is not a GEMM provider of this build");
    const std::string number = item.substr(equals + 1);
    char* end = nullptr;
    const double gflops = std::strtod(number.c_str(), &end);
    if (number.empty() || *end != '\0' || !std::isfinite(gflops) || gflops <= 0.0) {
      throw reject("'" + number + "' is not a rate above 0");
    }
    for (const GemmRate& rate : rates)
      if (rate.provider == *provider) throw reject(name + " is named twice");
    rates.push_back({*provider, gflops});
  }
  if (rates.empty()) throw reject("no rates");
  return rates;
}

GemmChoice resolve_auto_gemm_provider() {
  const int threads = cpu_threads();
  if (const std::string given = environment("MPITRON_GEMM_RATES"); !given.empty()) {
    std::vector<GemmRate> rates;
    try {
      rates = parse_gemm_rates(given);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("MPITRON_GEMM_RATES: ") + e.what());
    }
    const GemmProvider provider = choose_gemm_provider(rates);
    return {provider, std::move(rates), threads, GemmChoiceSource::given};
  }
  const std::string key = gemm_cache_key();
  const std::optional<std::filesystem::path> file = gemm_cache_file(key);
  if (file) {
    if (std::optional<GemmChoice> cached = read_gemm_cache(*file, key)) return *cached;
  }
  std::vector<GemmRate> rates = measure_gemm_providers();
  GemmChoice choice{choose_gemm_provider(rates), std::move(rates), threads,
                    GemmChoiceSource::measured};
  if (file && !write_gemm_cache(*file, key, choice)) {
    // Another process stored its choice first: take it, so that runs here agree.
    if (std::optional<GemmChoice> stored = read_gemm_cache(*file, key)) return *stored;
  }
  return choice;
}

}  // namespace mpitron::kernels
