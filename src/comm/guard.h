// How a multi-rank program ends on an error without leaving any rank waiting forever.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "comm/communicator.h"

namespace mpitron::comm {

/// Exit code of a job aborted by an unexpected exception on some rank.
inline constexpr int kErrorExitCode = 1;
/// Exit code returned by `run_guarded` for a ConfigError (every rank detects it; MPI is
/// finalized cleanly).
inline constexpr int kConfigErrorExitCode = 2;
/// Exit code of a job aborted because an operation passed its deadline (see wait.h).
inline constexpr int kDeadlineExitCode = 3;

/// "rank <rank>: error: <message>".
std::string error_line(int rank, std::string_view message);

/// Prints `line` and a newline to stderr, flushes it and ends every rank of the job with
/// MPI_Abort(MPI_COMM_WORLD, `code`). Without an initialized MPI it exits the process with
/// `code`.
[[noreturn]] void abort_job(const std::string& line, int code);

/// Ends every rank of the job with MPI_Abort(MPI_COMM_WORLD, `code`), printing nothing (the
/// caller has printed its line); without an initialized MPI it exits the process with `code`.
[[noreturn]] void end_job(int code);

/// Runs `body` (a program's main work) and returns its exit code. When it throws:
/// - ConfigError: prints `error_line(world rank, what)` to stderr on this rank and returns
///   kConfigErrorExitCode; the caller then finalizes MPI normally (every rank threw the same).
/// - anything else: prints `error_line(world rank, what)` and aborts the job with
///   kErrorExitCode, so ranks waiting for this one do not hang.
int run_guarded(const Communicator& world, const std::function<int()>& body);

}  // namespace mpitron::comm
