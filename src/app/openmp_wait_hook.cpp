// Before main, the OpenMP wait policy for the thread count this command asks for
// (kernels/cpu/openmp_wait.h chooses it and executes the program again with it). libgomp reads
// its variables while it loads, so the choice is made from the raw arguments, before the parser.
#include <string_view>

#include "kernels/cpu/openmp_wait.h"

namespace {

// The count of the last --threads N or --threads=N (as the parser reads them: "--threads= N",
// an empty value and then the count, is --threads N), or nullptr when none is given.
const char* threads_argument(int argc, char** argv) {
  const char* count = nullptr;
  constexpr std::string_view kEquals = "--threads=";
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    if ((arg == "--threads" || arg == kEquals) && i + 1 < argc) {
      count = argv[i + 1];
    } else if (arg.starts_with(kEquals)) {
      count = argv[i] + kEquals.size();
    }
  }
  return count;
}

void choose_openmp_wait_before_main(int argc, char** argv, char** envp) {
  mpitron::kernels::choose_openmp_wait(threads_argument(argc, argv), argv, envp);
}

}  // namespace

__attribute__((section(".preinit_array"),
               used)) static void (*preinit_openmp_wait)(int, char**,
                                                         char**) = choose_openmp_wait_before_main;
