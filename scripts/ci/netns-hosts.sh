#!/usr/bin/env bash
# A real multi-host mpitron run on one machine: three "hosts" h1, h2, h3 are Linux network
# namespaces joined by a bridge (in a fourth namespace), with addresses 10.99.0.1-3/24, their own
# host names and /etc/hosts. Open MPI starts its daemons on them through a hostfile and an rsh
# agent around `ip netns exec` (scripts/ci/netns-rsh-agent.sh, no sshd); ranks on different hosts
# can only talk TCP over the bridge. Checks:
#   - `mpitron validate --tp 2 --pp 2 --dp 2` on 8 ranks (3 + 3 + 2 per host) passes;
#   - during a longer run (`mpitron bench`, TP+PP+DP training steps on the same layout) the ranks
#     really are 3, 3 and 2 per namespace and hold TCP connections across hosts;
#   - h3's link taken down mid-run: every rank on h1 and h2 reports the deadline error and the job
#     exits non-zero within --timeout-seconds + 15 s;
#   - one rank killed (SIGKILL) mid-run: the job exits non-zero within 10 s and no process is left
#     in any namespace.
# Everything it made (namespaces, their processes, Open MPI session directories) is removed on
# every exit path, and that is checked too.
#
# Usage (as root): bash scripts/ci/netns-hosts.sh [BUILD_DIR]    (default: build)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/ci/common.sh
ci_begin netns-hosts "creates network namespaces" "${1:-build}"
agent=$PWD/scripts/ci/netns-rsh-agent.sh

prefix='mpitron-ci-'
hosts=(h1 h2 h3)
namespaces=("${prefix}br" "${hosts[@]/#/$prefix}")
timeout_seconds=5
# Training steps of ~0.2 s that keep 8 ranks on 2 cores busy for well over 10 s, so faults land
# mid-run and every rank soon waits on the missing one.
long_run=(bench --hidden 256 --intermediate 1024 --batch 4 --seq 64 --steps 100 --warmup 1)

work=$(mktemp -d /tmp/mpitron-netns.XXXXXX)
chmod 0755 "$work"

# Kills every process in our namespaces.
remove_hosts_processes() {
  local ns
  for ns in "${namespaces[@]}"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  done
}

# Kills every process in our namespaces, deletes them and Open MPI's session directories.
remove_hosts() {
  local ns
  remove_hosts_processes
  for ns in "${namespaces[@]}"; do
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf /tmp/ompi.h[123].*
}

teardown() {
  local status=$?
  set +e
  remove_hosts
  rm -rf "$work"
  exit "$status"
}
trap teardown EXIT
trap 'exit 130' INT TERM

# ---- the hosts ----------------------------------------------------------------------------------
remove_hosts # leftovers of an interrupted run
ip netns add "${prefix}br"
ip -n "${prefix}br" link add br0 type bridge
ip -n "${prefix}br" link set br0 up
printf '127.0.0.1 localhost\n' >"$work/hosts"
for i in 1 2 3; do
  ns=${prefix}h$i
  ip netns add "$ns"
  ip -n "${prefix}br" link add "vh$i" type veth peer name eth0 netns "$ns"
  ip -n "${prefix}br" link set "vh$i" master br0 up
  ip -n "$ns" addr add "10.99.0.$i/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  # Give up on unacknowledged TCP data after a few seconds instead of 15 minutes: once a rank
  # aborts, mpirun must tell every daemon, and its message to a daemon behind a dead link never
  # leaves (keepalive probes only run on idle connections).
  ip netns exec "$ns" sysctl -qw net.ipv4.tcp_retries2=2
  printf '10.99.0.%d h%d\n' "$i" "$i" >>"$work/hosts"
done
printf 'h1 slots=3\nh2 slots=3\nh3 slots=2\n' >"$work/hostfile"
export MPITRON_NETNS_PREFIX=$prefix MPITRON_NETNS_HOSTS=$work/hosts
ci_pass "hosts h1 h2 h3 up: namespaces ${namespaces[*]}"

# Sets `run` to the command that starts mpirun on h1 (the root namespace has no route to the
# hosts) for `mpitron SUBCOMMAND ARGS... --tp 2 --pp 2 --dp 2` on 8 ranks. Traffic stays on the
# bridge: Open MPI's daemons and the MPI messages (TCP between hosts, shared memory within one).
# The keepalive settings let mpirun notice a daemon that became unreachable within about 10 s
# (the default is minutes); mpitron's deadline reports the operation that stalled before that,
# and the abort delay lets every stalled rank print its line before the first abort ends the job.
mpirun_on_h1() {
  local command=(env "MPITRON_NETNS_PREFIX=$prefix" "MPITRON_NETNS_HOSTS=$work/hosts"
    mpirun --allow-run-as-root --hostfile "$work/hostfile" -np 8 --bind-to none
    --mca plm_rsh_agent "$agent" --mca plm_rsh_no_tree_spawn 1
    --mca oob_tcp_if_include 10.99.0.0/24 --mca btl "tcp,vader,self"
    --mca btl_tcp_if_include 10.99.0.0/24 --mca mpi_yield_when_idle 1
    --mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 2
    --mca oob_tcp_keepalive_probes 3 --mca mpi_abort_delay 2
    "$mpitron" "$@" --tp 2 --pp 2 --dp 2 --log-dir "$work/logs")
  run=("$agent" h1 "$(printf '%q ' "${command[@]}")")
}

# ---- a passing run across the three hosts --------------------------------------------------------
mpirun_on_h1 validate
ci_run_timed 120 "$work/pass.txt" "${run[@]}"
if [[ $ci_status -eq 0 ]] && grep -q "all parallel validations passed" "$work/pass.txt"; then
  ci_pass "validate --tp 2 --pp 2 --dp 2 on 8 ranks over h1 h2 h3 (${ci_seconds} s)"
else
  ci_fail "validate on 8 ranks over h1 h2 h3: exit $ci_status (${ci_seconds} s)"
  tail -n 30 "$work/pass.txt" | sed 's/^/    | /'
fi

# ---- helpers for the fault runs ------------------------------------------------------------------
# Pids of mpitron ranks in host namespace $1.
ranks_on() { ip netns pids "$prefix$1" | xargs -r ps -o pid=,comm= -p | awk '$2 == "mpitron" { print $1 }'; }
rank_count() { ranks_on "$1" | wc -l; }
all_ranks_started() { (($(rank_count h1) + $(rank_count h2) + $(rank_count h3) == 8)); }
not_listed() { ! ip netns list | grep -q "^$prefix"; }
no_process_left() {
  local ns
  for ns in "${namespaces[@]}"; do [[ -z $(ip netns pids "$ns") ]] || return 1; done
}
elapsed_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# Starts a long run in the background (pid in $run_pid), waits until its 8 ranks compute.
start_long_run() {
  mpirun_on_h1 "${long_run[@]}" --timeout-seconds "$timeout_seconds"
  "${run[@]}" >"$1" 2>&1 &
  run_pid=$!
  ci_wait_until 30 all_ranks_started || ci_die "the 8 ranks did not start: $(tail -n 20 "$1")"
  sleep 2
}

# Waits up to $1 s for the background run; sets run_status (124 when it did not end).
wait_run() {
  local deadline=$((SECONDS + $1)) timed_out=false
  while kill -0 "$run_pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
  if kill -0 "$run_pid" 2>/dev/null; then
    timed_out=true
    remove_hosts_processes
  fi
  run_status=0
  wait "$run_pid" || run_status=$?
  if $timed_out; then run_status=124; fi
}

# ---- fault: h3's link goes down mid-run -----------------------------------------------------------
start_long_run "$work/link.txt"
placement="$(rank_count h1)/$(rank_count h2)/$(rank_count h3)"
ci_expect "ranks per host h1/h2/h3 = 3/3/2 (saw $placement)" test "$placement" = 3/3/2
# Established connections of h3's ranks to addresses of h1 and h2.
cross_host=$(ip netns exec "${prefix}h3" ss -tnpH state established |
  awk '$4 ~ /^10\.99\.0\.[12]:/ && /"mpitron"/' | wc -l)
ci_expect "ranks on h3 hold TCP connections to h1 and h2 ($cross_host)" test "$cross_host" -gt 0
cut=$EPOCHREALTIME
ip -n "${prefix}h3" link set eth0 down
limit=$((timeout_seconds + 15))
wait_run $((limit + 30))
seconds=$(elapsed_since "$cut")
ci_expect "link down: job exits non-zero (exit $run_status)" test "$run_status" -ne 0 -a "$run_status" -ne 124
ci_expect "link down: job ends within ${limit} s of the cut (${seconds} s)" \
  awk -v s="$seconds" -v l="$limit" 'BEGIN { exit !(s <= l) }'
silent=""
for rank in 0 1 2 3 4 5; do
  grep -Eq "^(\[[^]]*\] *)?rank $rank: .* did not complete within $timeout_seconds s" "$work/link.txt" ||
    silent+=" $rank"
done
ci_expect "link down: every rank on h1 and h2 reports the deadline error (silent:${silent:- none})" \
  test -z "$silent"
if [[ -z $silent && $run_status -ne 0 ]]; then
  grep "did not complete within" "$work/link.txt" | sed 's/^/    | /'
else
  tail -n 30 "$work/link.txt" | sed 's/^/    | /'
fi
remove_hosts_processes
ip -n "${prefix}h3" link set eth0 up

# ---- fault: one rank is killed mid-run -------------------------------------------------------------
start_long_run "$work/kill.txt"
victim=$(ranks_on h2 | head -n 1)
killed=$EPOCHREALTIME
kill -9 "$victim"
wait_run 30
seconds=$(elapsed_since "$killed")
ci_expect "rank killed: job exits non-zero (exit $run_status)" test "$run_status" -ne 0 -a "$run_status" -ne 124
ci_expect "rank killed: job ends within 10 s (${seconds} s)" \
  awk -v s="$seconds" 'BEGIN { exit !(s <= 10) }'
ci_expect "rank killed: no process left in any namespace" ci_wait_until 5 no_process_left

# ---- nothing left behind ----------------------------------------------------------------------------
remove_hosts
ci_expect "cleanup: no namespace left" not_listed
ci_summary
