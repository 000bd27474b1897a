#include "app/report/memory.h"

#include <sys/resource.h>

namespace mpitron::app {

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

double mib(double bytes) {
  return bytes / (1024.0 * 1024.0);
}

}  // namespace mpitron::app
