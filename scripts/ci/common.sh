# shellcheck shell=bash
# Helpers shared by the launch checks in scripts/ci/ (sourced, not run): named checks with a
# PASS/FAIL line each, a closing summary, package installation, and waiting with a deadline.
#
# A script calls `ci_begin`, records results with `ci_pass`/`ci_fail` (or `ci_expect`), and ends
# with `ci_summary`, whose exit code is the script's verdict.

ci_name=ci
ci_passed=0
ci_failed=0
ci_started=$SECONDS

# ci_begin NAME WHY-ROOT BUILD-DIR [FILE...]: starts the checks called NAME, which need root
# (WHY-ROOT says what for) and a build in BUILD-DIR with mpitron and the FILEs (relative to it).
# Sets `build` (absolute) and `mpitron`.
ci_begin() {
  ci_name=$1
  ci_started=$SECONDS
  echo "== $ci_name: start"
  [[ $(id -u) -eq 0 ]] || ci_die "must run as root ($2)"
  build=$(realpath -m "$3")
  # shellcheck disable=SC2034  # for the caller
  mpitron=$build/mpitron
  local file
  for file in mpitron "${@:4}"; do
    [[ -x $build/$file ]] || ci_die "$build/$file is missing: build first (bash scripts/build.sh)"
  done
}

ci_pass() {
  ci_passed=$((ci_passed + 1))
  echo "PASS  $*"
}

ci_fail() {
  ci_failed=$((ci_failed + 1))
  echo "FAIL  $*"
}

# ci_expect NAME CONDITION-COMMAND...: PASS when the command succeeds, FAIL otherwise.
ci_expect() {
  local name=$1
  shift
  if "$@"; then ci_pass "$name"; else ci_fail "$name"; fi
}

# Prints the wall time and the closing line ("NAME: N passed, N failed", the plain form test
# reports are read by) and returns non-zero when anything failed or nothing ran.
ci_summary() {
  echo "== $ci_name: done in $((SECONDS - ci_started)) s"
  echo "$ci_name: $ci_passed passed, $ci_failed failed"
  ((ci_failed == 0 && ci_passed > 0))
}

# Aborts the script (its EXIT trap still cleans up) with one FAIL line.
ci_die() {
  ci_fail "$*"
  ci_summary || true
  exit 1
}

# ci_install PACKAGE...: installs the Debian packages that are missing (apt-get update only when
# the first attempt fails, e.g. on a machine whose package lists were never fetched).
ci_install() {
  local missing=() package status
  for package in "$@"; do
    status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
    [[ "$status" == "install ok installed" ]] || missing+=("$package")
  done
  ((${#missing[@]} > 0)) || return 0
  echo "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  local install=(apt-get install -y -qq --no-install-recommends "${missing[@]}")
  "${install[@]}" >/dev/null 2>&1 || { apt-get update -qq && "${install[@]}" >/dev/null; }
}

# ci_wait_until SECONDS COMMAND...: polls the command every 0.1 s until it succeeds; returns 1
# when it has not within SECONDS.
ci_wait_until() {
  local limit=$1
  shift
  local deadline=$((SECONDS + limit))
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

# ci_run_timed SECONDS OUTPUT-FILE COMMAND...: runs the command with a hard time limit, stdout and
# stderr into OUTPUT-FILE; sets ci_status (exit code, 124 on timeout) and ci_seconds (wall time,
# fractional).
# shellcheck disable=SC2034  # ci_status and ci_seconds are the results for the caller
ci_run_timed() {
  local limit=$1 output=$2
  shift 2
  local start=$EPOCHREALTIME
  ci_status=0
  timeout --kill-after=5 "$limit" "$@" >"$output" 2>&1 || ci_status=$?
  ci_seconds=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
}
