#include "app/common/options.h"

#include <fmt/format.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/basic_file_sink.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string_view>

#include "app/common/gemm_agreement.h"
#include "app/common/help.h"
#include "comm/algorithm_table.h"
#include "comm/errors.h"
#include "comm/guard.h"
#include "comm/placement.h"
#include "kernels/cpu/openmp_wait.h"
#include "kernels/ops.h"
#include "nn/fault_injection.h"

namespace mpitron::app {

void add_common_options(CLI::App& command, CommonOptions& options) {
  if (CLI::Option* help = command.get_help_ptr()) help->group(kCommonGroup);
  command
      .add_option("--tp", options.tp,
                  "Tensor-parallel degree. With --tp, --pp and --dp all omitted, a world "
                  "divisible by 4 runs (2, 2, world/4), an even one (2, 1, world/2), any other "
                  "(1, 1, world); an omitted --tp or --pp alone is 1")
      ->group(kCommonGroup);
  command.add_option("--pp", options.pp, "Pipeline-parallel degree (stages)")->group(kCommonGroup);
  command
      .add_option("--dp", options.dp,
                  "Data-parallel degree (replicas; omitted: world / (tp pp cp))")
      ->group(kCommonGroup);
  add_run_options(command, options);
}

void add_run_options(CLI::App& command, CommonOptions& options) {
  command.add_option("--device", options.device, "Compute device")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str()
      ->group(kCommonGroup);
  command
      .add_option("--comm", options.comm_mode,
                  "How CUDA buffers reach MPI: staged via host, direct or auto")
      ->check(CLI::IsMember({"auto", "staged", "direct"}))
      ->capture_default_str()
      ->group(kCommonGroup);
  command
      .add_option(
          "--gemm", options.gemm,
          "auto: the fastest here, measured by rank 0 at start-up and cached per CPU, build and "
          "thread count (default: MPITRON_GEMM)")
      ->check(CLI::IsMember({"auto", "eigen", "blas", "mpitron"}))
      ->group(kCommonGroup);
  command
      .add_option("--threads", options.threads,
                  "CPU threads per rank (default: MPITRON_CPU_THREADS, else 1)")
      ->check(integer_in(1, kernels::kMaxCpuThreads))
      ->group(kCommonGroup);
  command
      .add_option("--timeout-seconds", options.timeout_seconds,
                  "Deadline of every communication operation, in seconds")
      ->capture_default_str()
      ->group(kCommonGroup);
  command.add_option("--log-dir", options.log_dir, "Directory for rank_<N>.log files")
      ->capture_default_str()
      ->group(kCommonGroup);
  command.add_option("--filemode", options.filemode, "Log file mode: a (append) or w (overwrite)")
      ->check(CLI::IsMember({"a", "w"}))
      ->capture_default_str()
      ->group(kCommonGroup);
  command
      .add_option("--seed", options.seed,
                  "Seed of every generated weight and input, and of generate's sampling")
      ->check(integer_in(0, std::numeric_limits<std::uint64_t>::max()))
      ->capture_default_str()
      ->group(kCommonGroup);
  command.add_option("--json", options.json, "Write a JSON report to this file (rank 0)")
      ->group(kCommonGroup);
  command
      .add_option("--comm-table", options.comm_table,
                  "Collective algorithm table (default: MPITRON_COMM_TABLE)")
      ->type_name("FILE")
      ->group(kCommonGroup);
  command.add_option("--init-timeout")
      ->description(
          "Deadline of MPI_Init in seconds (default: MPITRON_INIT_TIMEOUT, else 120); read "
          "before MPI starts")
      ->type_name("SECONDS")
      ->group(kCommonGroup);
}

CLI::Validator at_least(double minimum) {
  return CLI::Validator(
      [minimum](const std::string& text) {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        const bool number = !text.empty() && *end == '\0' && std::isfinite(value);
        if (number && value >= minimum) return std::string();
        return fmt::format("must be a finite number >= {:g}, got {}", minimum, text);
      },
      "");
}

namespace {

// `text` as a whole decimal integer in [minimum, maximum].
bool integer_within(const std::string& text, std::int64_t minimum, std::uint64_t maximum) {
  const char* first = text.data();
  const char* last = first + text.size();
  if (text.starts_with('-')) {
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(first, last, value);
    return error == std::errc() && end == last && value >= minimum;
  }
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(first, last, value);
  return error == std::errc() && end == last && value <= maximum &&
         (minimum <= 0 || value >= static_cast<std::uint64_t>(minimum));
}

}  // namespace

CLI::Option* add_switch(CLI::App& command, const std::string& names, bool& value,
                        const std::string& help) {
  // What CLI11 hands the check: "true" for the bare flag, else the text after '='.
  const CLI::Validator boolean_word(
      [](const std::string& text) {
        std::string word = text;
        std::transform(word.begin(), word.end(), word.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        for (const char* accepted : {"true", "false", "on", "off", "yes", "no", "1", "0"})
          if (word == accepted) return std::string();
        return fmt::format("must be true or false (or on/off, yes/no, 1/0), got {}", text);
      },
      "");
  if (names.find('!') != std::string::npos) {
    throw std::logic_error("add_switch: '" + names + "' has a negated name, which it cannot check");
  }
  return command.add_flag(names, value, help)->check(boolean_word);
}

CLI::Validator integer_in(std::int64_t minimum, std::uint64_t maximum) {
  return CLI::Validator(
      [minimum, maximum](const std::string& text) {
        if (integer_within(text, minimum, maximum)) return std::string();
        return fmt::format("must be an integer in [{}, {}], got {}", minimum, maximum, text);
      },
      "");
}

CLI::Validator size_at_most_max() {
  return CLI::Validator(
      [](const std::string& text) {
        std::int64_t value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        const bool too_large = error == std::errc::result_out_of_range
                                   ? !text.starts_with('-')
                                   : error == std::errc() && value > kMaxSize;
        if (!too_large) return std::string();
        return fmt::format("must be at most {}, got {}", kMaxSize, text);
      },
      "");
}

CommTableSource comm_table_source(const CLI::App& app) {
  const CLI::App* leaf = &app;
  while (!leaf->get_subcommands().empty())
    leaf = leaf->get_subcommands().front();
  const CLI::Option* flag = leaf->get_option_no_throw("--comm-table");
  if (flag != nullptr && flag->count() > 0) return {flag->as<std::string>(), false};
  const char* variable = std::getenv(comm::kAlgorithmTableVariable);
  if (variable != nullptr && *variable != '\0') return {variable, true};
  return {};
}

ParallelSizes resolve_parallel_sizes(const CommonOptions& options, int world_size) {
  ParallelSizes sizes{options.tp.value_or(1), options.pp.value_or(1), options.dp.value_or(1),
                      options.cp.value_or(1)};
  if (sizes.tp < 1 || sizes.pp < 1 || sizes.dp < 1) {
    throw comm::ConfigError(fmt::format("--tp, --pp and --dp must be >= 1, got {}, {} and {}",
                                        sizes.tp, sizes.pp, sizes.dp));
  }
  if (sizes.cp < 1) throw comm::ConfigError(fmt::format("--cp must be >= 1, got {}", sizes.cp));
  if (world_size % sizes.cp != 0) {
    throw comm::ConfigError(
        fmt::format("world size {} is not divisible by cp {}", world_size, sizes.cp));
  }
  const int rest = world_size / sizes.cp;  // the ranks tp, pp and dp share
  const std::string model_axes = sizes.cp > 1 ? "tp*cp*pp" : "tp*pp";
  if (!options.tp && !options.pp && !options.dp) {
    if (rest % 4 == 0) {
      sizes.tp = 2, sizes.pp = 2, sizes.dp = rest / 4;
    } else if (rest % 2 == 0) {
      sizes.tp = 2, sizes.pp = 1, sizes.dp = rest / 2;
    } else {
      sizes.tp = 1, sizes.pp = 1, sizes.dp = rest;
    }
  } else if (!options.dp) {  // Megatron-LM's rule: the replicas take what the model axes leave
    const long long model_parallel = static_cast<long long>(sizes.tp) * sizes.pp * sizes.cp;
    if (world_size % model_parallel != 0) {
      throw comm::ConfigError(
          fmt::format("world size {} is not divisible by {} = {} (tp {}, {}pp {}, --dp omitted)",
                      world_size, model_axes, model_parallel, sizes.tp,
                      sizes.cp > 1 ? fmt::format("cp {}, ", sizes.cp) : std::string(), sizes.pp));
    }
    sizes.dp = static_cast<int>(world_size / model_parallel);
  }
  const long long product = static_cast<long long>(sizes.tp) * sizes.pp * sizes.dp * sizes.cp;
  if (product != world_size) {
    throw comm::ConfigError(
        sizes.cp > 1 ? fmt::format("tp*cp*pp*dp = {}*{}*{}*{} = {}, but the world size is {}",
                                   sizes.tp, sizes.cp, sizes.pp, sizes.dp, product, world_size)
                     : fmt::format("tp*pp*dp = {}*{}*{} = {}, but the world size is {}", sizes.tp,
                                   sizes.pp, sizes.dp, product, world_size));
  }
  return sizes;
}

kernels::Device resolve_device(const std::string& device) {
  if (device == "cpu") return kernels::Device::cpu;  // no driver probe: nothing CUDA is mapped
  const int gpus = kernels::cuda_device_count();
  if (device == "auto" && gpus == 0) return kernels::Device::cpu;
  if (gpus == 0) {
    throw comm::ConfigError(fmt::format(
        "--device cuda was requested, but no CUDA device is available (mpitron was built {} "
        "CUDA)",
        kernels::cuda_built() ? "with" : "without"));
  }
  if (gpus > 1) {
    throw comm::ConfigError(fmt::format(
        "{} CUDA devices are visible; every rank computes on GPU 0, so make exactly one visible, "
        "e.g. CUDA_VISIBLE_DEVICES=0",
        gpus));
  }
  try {
    // Loads the CUDA module now, so that a device it cannot use (no runtime for the driver, a
    // compute capability below 8.0) is one agreed line rather than a failure at the first tensor.
    const kernels::Buffer probe(1, kernels::DType::f32, kernels::Device::cuda);
  } catch (const std::runtime_error& e) {
    throw comm::ConfigError(fmt::format("--device {}: {}", device, e.what()));
  }
  return kernels::Device::cuda;
}

std::string requested_gemm(const CommonOptions& options) {
  if (!options.gemm.empty()) return options.gemm;
  const char* env = std::getenv("MPITRON_GEMM");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string("auto");
}

bool wants_auto_gemm(const CommonOptions& options, bool even_if_pinned) {
  if ((!even_if_pinned && requested_gemm(options) != "auto") || options.device == "cuda")
    return false;
  try {
    if (options.threads) kernels::set_cpu_threads(*options.threads);
    kernels::cpu_threads();  // reads MPITRON_CPU_THREADS when --threads is not given
  } catch (const std::invalid_argument&) {
    return false;
  }
  return true;
}

namespace {

void configure_communication(const CommonOptions& options, comm::Communicator& world) {
  if (!(options.timeout_seconds > 0.0 &&
        options.timeout_seconds <= comm::Communicator::kMaxTimeoutSeconds)) {
    throw comm::ConfigError(fmt::format("--timeout-seconds must be in (0, {:g}], got {}",
                                        comm::Communicator::kMaxTimeoutSeconds,
                                        options.timeout_seconds));
  }
  world.set_timeout(options.timeout_seconds);
  try {
    world.set_transfer_mode(comm::parse_transfer_mode(options.comm_mode));
  } catch (const comm::ConfigError& e) {
    throw comm::ConfigError(fmt::format("--comm {}: {}", options.comm_mode, e.what()));
  }
  try {
    if (options.threads) {
      kernels::set_cpu_threads(*options.threads);
    } else {
      kernels::cpu_threads();  // reads MPITRON_CPU_THREADS
    }
  } catch (const std::invalid_argument& e) {
    throw comm::ConfigError(e.what());
  }
  // After the threads: auto's provider is the one rank 0 measured for them
  // (agree_auto_gemm_provider), else the fixed rule (kernels::default_gemm_provider).
  const std::string gemm = requested_gemm(options);
  try {
    kernels::set_gemm_provider(kernels::parse_gemm_provider(gemm));
  } catch (const std::invalid_argument& e) {
    throw comm::ConfigError(
        fmt::format("{} {}: {}", options.gemm.empty() ? "MPITRON_GEMM" : "--gemm", gemm, e.what()));
  }
  try {
    kernels::bf16_gemm_path();  // reads MPITRON_BF16_GEMM
  } catch (const std::invalid_argument& e) {
    throw comm::ConfigError(e.what());
  }
  if (kernels::cpu_threads() > 1 && !kernels::cpu_openmp_available()) {
    throw comm::ConfigError(fmt::format(
        "{} {}: this build of mpitron has no OpenMP (the compiler's OpenMP was not found), so "
        "its CPU kernels run on one thread",
        options.threads ? "--threads" : "MPITRON_CPU_THREADS", kernels::cpu_threads()));
  }
}

void check_json_writable(const CommonOptions& options, int rank) {
  if (rank != 0 || options.json.empty()) return;
  if (std::filesystem::is_directory(options.json) ||
      !std::ofstream(options.json, std::ios::app).good()) {
    throw comm::ConfigError(fmt::format("cannot write the --json file '{}'", options.json));
  }
}

// The console: info lines to stdout, warnings and errors to stderr (the diagnostics stay out of
// what a command writes to stdout, such as generate's text). Errors are written as every other
// error line of a rank is (comm::error_line: "rank 1: error: ..."), the rest with the sink's
// pattern.
class ConsoleSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit ConsoleSink(int rank) : rank_(rank) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t line;
    if (msg.level >= spdlog::level::err) {
      std::string_view text(msg.payload.data(), msg.payload.size());
      if (text.starts_with("error: ")) text.remove_prefix(std::string_view("error: ").size());
      const std::string error = comm::error_line(rank_, text) + "\n";
      line.append(error.data(), error.data() + error.size());
    } else {
      formatter_->format(msg, line);
    }
    std::FILE* stream = msg.level >= spdlog::level::warn ? stderr : stdout;
    std::fwrite(line.data(), 1, line.size(), stream);
    std::fflush(stream);
  }
  void flush_() override {
    std::fflush(stdout);
    std::fflush(stderr);
  }

 private:
  int rank_;
};

std::shared_ptr<spdlog::logger> make_rank_logger(const CommonOptions& options, int rank) {
  const auto path = std::filesystem::path(options.log_dir) / fmt::format("rank_{}.log", rank);
  std::shared_ptr<spdlog::sinks::basic_file_sink_mt> file;
  try {
    std::filesystem::create_directories(options.log_dir);
    file =
        std::make_shared<spdlog::sinks::basic_file_sink_mt>(path.string(), options.filemode == "w");
  } catch (const std::exception& e) {
    throw comm::ConfigError(fmt::format("cannot open log file {}: {}", path.string(), e.what()));
  }
  file->set_pattern("%Y-%m-%d %H:%M:%S.%e %l %v");
  auto console = std::make_shared<ConsoleSink>(rank);
  console->set_pattern(fmt::format("[rank {}] %v", rank));
  console->set_level(rank == 0 ? spdlog::level::info : spdlog::level::warn);
  auto logger = std::make_shared<spdlog::logger>(fmt::format("rank{}", rank),
                                                 spdlog::sinks_init_list{file, console});
  logger->set_level(spdlog::level::debug);
  logger->flush_on(spdlog::level::debug);
  return logger;
}

}  // namespace

void inject_fault(const std::string& name) {
  try {
    nn::inject_fault(nn::parse_fault(name));
  } catch (const std::invalid_argument& e) {
    throw comm::ConfigError(e.what());
  }
}

void write_json(const std::string& path, const nlohmann::json& report, bool append) {
  std::ofstream file(path, append ? std::ios::app : std::ios::trunc);
  file << (append ? report.dump() : report.dump(2)) << "\n";
  if (!file.good())
    throw std::runtime_error(fmt::format("writing the --json file '{}' failed", path));
}

std::string device_text(kernels::Device device, kernels::DType dtype) {
  if (device != kernels::Device::cpu) return kernels::to_string(device);
  const int threads = kernels::cpu_threads();
  const std::string gemm = kernels::to_string(kernels::gemm_provider_for(dtype));
  if (threads == 1) return fmt::format("cpu ({} GEMM, 1 thread)", gemm);
  return fmt::format("cpu ({} GEMM, {} threads; {})", gemm, threads, kernels::openmp_wait_text());
}

std::shared_ptr<spdlog::logger> prepare_run(const CommonOptions& options,
                                            comm::Communicator& world) {
  configure_communication(options, world);
  check_json_writable(options, world.rank());
  auto logger = make_rank_logger(options, world.rank());
  logger->debug("placement: {}", comm::placement_text(comm::this_placement(world)));
  if (requested_gemm(options) == "auto")
    logger->debug("gemm auto: {}", gemm_choice_text(agreed_auto_gemm_choice()));
  if (const auto warning = kernels::cpu_mask_warning(kernels::cpu_threads()))
    logger->warn("warning: {}", *warning);
  return logger;
}

}  // namespace mpitron::app
