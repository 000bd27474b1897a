// This process's memory as the kernel counts it, in the MiB the reports print.
#pragma once

namespace mpitron::app {

/// The process's peak resident set size so far, in MiB (getrusage's ru_maxrss).
double peak_rss_mib();

/// `bytes` in MiB (2^20 bytes).
double mib(double bytes);

}  // namespace mpitron::app
