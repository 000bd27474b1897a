/* Test helper, preloaded into a program with LD_PRELOAD: when the program exits, prints to stderr
 * each CUDA library mapped in it (libcuda, libcudart, libcublas, libcublasLt, read from
 * /proc/self/maps) as "cuda-maps-probe: PROGRAM: mapped PATH", or "cuda-maps-probe: PROGRAM: no
 * CUDA library mapped" when there is none.
 * The driver (libcuda) is the one exception: where the parent process (the launcher) maps the
 * same file, the MPI stack loaded it, not the program (a CUDA-aware MPI library or hwloc's GPU
 * plugins map it in every process, mpirun's too), and the probe says so in a line without
 * "mapped " instead of counting it. The runtime and cuBLAS only a program's own code loads. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char* file_name(const char* path) {
  const char* name = strrchr(path, '/');
  return name != NULL ? name + 1 : path;
}

static int is_driver(const char* path) {
  return strncmp(file_name(path), "libcuda.", 8) == 0;
}

static int is_cuda_library(const char* path) {
  const char* name = file_name(path);
  return is_driver(path) || strncmp(name, "libcudart.", 10) == 0 ||
         strncmp(name, "libcublas", 9) == 0;
}

/* Whether the parent process maps `path` (a line of its maps, newline included). */
static int parent_maps(const char* path) {
  char parent_maps_path[64];
  snprintf(parent_maps_path, sizeof parent_maps_path, "/proc/%d/maps", (int)getppid());
  FILE* maps = fopen(parent_maps_path, "r");
  if (maps == NULL) return 0;
  char line[4096];
  int found = 0;
  while (!found && fgets(line, sizeof line, maps) != NULL) {
    const char* other = strchr(line, '/');
    found = other != NULL && strcmp(other, path) == 0;
  }
  fclose(maps);
  return found;
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
    if (is_driver(path) && parent_maps(path)) {
      fprintf(stderr, "cuda-maps-probe: %s: the launcher maps it too (the MPI stack's): %s",
              program_invocation_short_name, path);
      continue;
    }
    fprintf(stderr, "cuda-maps-probe: %s: mapped %s", program_invocation_short_name, path);
    ++mapped;
  }
  fclose(maps);
  if (mapped == 0) {
    fprintf(stderr, "cuda-maps-probe: %s: no CUDA library mapped\n", program_invocation_short_name);
  }
}
