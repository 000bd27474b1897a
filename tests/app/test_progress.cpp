// The progress line (app/common/progress.h): its text, and what each mode writes, captured through
// an in-memory stream.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "app/common/progress.h"

namespace mpitron::app {
namespace {

// What `write` printed through a ProgressLine's stream.
template <class Write>
std::string captured(Write write) {
  char* data = nullptr;
  std::size_t size = 0;
  std::FILE* stream = open_memstream(&data, &size);
  write(stream);
  std::fclose(stream);
  std::string text(data, size);
  std::free(data);
  return text;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

TEST(ProgressText, StepLossRateElapsedAndEta) {
  EXPECT_EQ(progress_text("train-dp", 12, 48, 0.0123456, 81234.0, "samples/s", 3.0),
            "train-dp  step 12/48 (25%)  loss 0.012346  8.12e+04 samples/s  elapsed 0:03  ETA "
            "0:09");
  // No loss, no rate; nothing done yet: no ETA; an hour and more as H:MM:SS.
  EXPECT_EQ(progress_text("bench", 0, 5, std::nullopt, std::nullopt, "", 0.4),
            "bench  step 0/5 (0%)  elapsed 0:00");
  EXPECT_EQ(progress_text("bench", 1, 3, std::nullopt, 2.0, "tokens/s", 3725.0),
            "bench  step 1/3 (33%)  2 tokens/s  elapsed 1:02:05  ETA 2:04:10");
}

TEST(ProgressLine, LinesModePrintsEveryTenthAndTheEnd) {
  const std::string text = captured([](std::FILE* out) {
    ProgressLine line("run", 25, "x/s", ProgressMode::lines, true, out);
    for (int done = 1; done <= 25; ++done)
      line.update(done, 1.0, std::nullopt);
  });
  // Tenths of 25 steps are crossed at 3, 5, 8, 10, 13, 15, 18, 20, 23 and 25.
  EXPECT_EQ(count(text, "\n"), 10u) << text;
  EXPECT_EQ(count(text, "\r"), 0u);
  EXPECT_NE(text.find("run  step 3/25 (12%)"), std::string::npos) << text;
  EXPECT_NE(text.find("run  step 25/25 (100%)"), std::string::npos) << text;
}

TEST(ProgressLine, InPlaceModeRedrawsOneLineAndClearsItForOtherOutput) {
  const std::string text = captured([](std::FILE* out) {
    ProgressLine line("run", 4, "x/s", ProgressMode::in_place, true, out);
    line.update(1, std::nullopt, std::nullopt);
    line.suspend();
    line.update(4, std::nullopt, std::nullopt);
  });
  EXPECT_EQ(text,
            "\r\033[Krun  step 1/4 (25%)  elapsed 0:00  ETA 0:00\r\033[K"
            "\r\033[Krun  step 4/4 (100%)  elapsed 0:00  ETA 0:00\n");
}

TEST(ProgressLine, OtherRanksAndOffPrintNothing) {
  for (const bool enabled : {false, true}) {
    const std::string text = captured([&](std::FILE* out) {
      ProgressLine line("run", 2, "", enabled ? ProgressMode::off : ProgressMode::lines, enabled,
                        out);
      line.update(2, std::nullopt, std::nullopt);
    });
    EXPECT_EQ(text, "");
  }
  EXPECT_EQ(parse_progress_mode("in-place"), ProgressMode::in_place);
  EXPECT_THROW(parse_progress_mode("fast"), std::invalid_argument);
}

}  // namespace
}  // namespace mpitron::app
