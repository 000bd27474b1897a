// This process's memory as the kernel counts it.
#pragma once

namespace mpitron::app {

/// The process's peak resident set size so far, in MiB (getrusage's ru_maxrss).
double peak_rss_mib();

}  // namespace mpitron::app
