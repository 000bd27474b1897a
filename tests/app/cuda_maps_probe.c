/* Test helper, preloaded into a program with LD_PRELOAD: when the program exits, prints to stderr
 * each CUDA library mapped in it (libcuda, libcudart, libcublas, libcublasLt, read from
 * /proc/self/maps) as "cuda-maps-probe: PROGRAM: mapped PATH", or "cuda-maps-probe: PROGRAM: no
 * CUDA library mapped" when there is none. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

static int is_cuda_library(const char* path) {
  const char* name = strrchr(path, '/');
  name = name != NULL ? name + 1 : path;
  return strncmp(name, "libcuda.", 8) == 0 || strncmp(name, "libcudart.", 10) == 0 ||
         strncmp(name, "libcublas", 9) == 0;
}

__attribute__((destructor)) static void report_cuda_mappings(void) {
  FILE* maps = fopen("/proc/self/maps", "r");
  if (maps == NULL) {
    fprintf(stderr, "cuda-maps-probe: %s: cannot read /proc/self/maps\n",
            program_invocation_short_name);
    return;
  }
  char line[4096];
  char previous[4096] = "";
  int mapped = 0;
  while (fgets(line, sizeof line, maps) != NULL) {
    const char* path = strchr(line, '/');
    /* A library has several consecutive mappings: report each path once. */
    if (path == NULL || !is_cuda_library(path) || strcmp(path, previous) == 0) continue;
    snprintf(previous, sizeof previous, "%s", path);
    fprintf(stderr, "cuda-maps-probe: %s: mapped %s", program_invocation_short_name, path);
    ++mapped;
  }
  fclose(maps);
  if (mapped == 0) {
    fprintf(stderr, "cuda-maps-probe: %s: no CUDA library mapped\n", program_invocation_short_name);
  }
}
