#include "app/common/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

namespace mpitron::app {

void add_progress_option(CLI::App& command, std::string& mode, std::string_view elsewhere) {
  command
      .add_option(
          "--progress", mode,
          fmt::format("auto (in place on a terminal, else {}), in-place, lines or off", elsewhere))
      ->check(CLI::IsMember({"auto", "in-place", "lines", "off"}).description(""))
      ->capture_default_str();
}

ProgressMode parse_progress_mode(const std::string& text) {
  if (text == "auto") return ProgressMode::automatic;
  if (text == "in-place") return ProgressMode::in_place;
  if (text == "lines") return ProgressMode::lines;
  if (text == "off") return ProgressMode::off;
  throw std::invalid_argument("--progress must be auto, in-place, lines or off, not '" + text +
                              "'");
}

bool stdout_is_terminal() {
  if (isatty(STDOUT_FILENO) == 0) return false;
  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) return true;
  std::array<char, 256> target{};
  const std::string link = fmt::format("/proc/{}/fd/1", getppid());
  const ssize_t length = readlink(link.c_str(), target.data(), target.size() - 1);
  if (length <= 0) return false;
  const std::string_view path(target.data(), static_cast<std::size_t>(length));
  return path.starts_with("/dev/pts/") || path.starts_with("/dev/tty");
}

namespace {

std::string clock_text(double seconds) {
  const auto total = static_cast<long long>(std::llround(std::max(seconds, 0.0)));
  if (total >= 3600)
    return fmt::format("{}:{:02}:{:02}", total / 3600, total / 60 % 60, total % 60);
  return fmt::format("{}:{:02}", total / 60, total % 60);
}

}  // namespace

std::string progress_text(const std::string& label, std::int64_t done, std::int64_t total,
                          std::optional<double> loss, std::optional<double> rate,
                          const std::string& rate_unit, double elapsed_seconds) {
  std::string text = fmt::format("{}  step {}/{} ({}%)", label, done, total, 100 * done / total);
  if (loss) text += fmt::format("  loss {:.6f}", *loss);
  if (rate) text += fmt::format("  {:.3g} {}", *rate, rate_unit);
  text += "  elapsed " + clock_text(elapsed_seconds);
  if (done > 0) {
    const double left =
        elapsed_seconds / static_cast<double>(done) * static_cast<double>(total - done);
    text += "  ETA " + clock_text(left);
  }
  return text;
}

ProgressLine::ProgressLine(std::string label, std::int64_t total, std::string rate_unit,
                           ProgressMode mode, bool enabled, std::FILE* out)
    : label_(std::move(label)), total_(total), rate_unit_(std::move(rate_unit)), out_(out) {
  if (total < 1) throw std::invalid_argument("ProgressLine: total must be >= 1");
  if (mode == ProgressMode::automatic)
    mode = stdout_is_terminal() ? ProgressMode::in_place : ProgressMode::lines;
  mode_ = enabled ? mode : ProgressMode::off;
}

ProgressLine::~ProgressLine() {
  if (drawn_) std::fputs("\n", out_);
}

void ProgressLine::update(std::int64_t done, std::optional<double> loss,
                          std::optional<double> rate) {
  if (mode_ == ProgressMode::off) return;
  const auto now = std::chrono::steady_clock::now();
  const bool last = done >= total_;
  if (mode_ == ProgressMode::lines) {
    if (!last && done * 10 < next_tenth_ * total_) return;
    while (next_tenth_ * total_ <= done * 10)
      ++next_tenth_;
  } else if (!last && drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) {
    return;
  }
  last_draw_ = now;
  print(progress_text(label_, done, total_, loss, rate, rate_unit_,
                      std::chrono::duration<double>(now - start_).count()));
}

void ProgressLine::suspend() {
  if (!drawn_) return;
  std::fputs("\r\033[K", out_);
  std::fflush(out_);
  drawn_ = false;
}

void ProgressLine::print(const std::string& text) {
  if (mode_ == ProgressMode::lines) {
    std::fprintf(out_, "%s\n", text.c_str());
  } else {
    std::fprintf(out_, "\r\033[K%s", text.c_str());
    drawn_ = true;
  }
  std::fflush(out_);
}

}  // namespace mpitron::app
