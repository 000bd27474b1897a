#!/usr/bin/env bash
# A real single-node Slurm cluster on this machine, without systemd, and mpitron launched through
# it. Installs Debian's Slurm and munge when missing, starts munged (unless one already answers),
# slurmctld and slurmd from a private configuration (own ports, spool, pid and log files under a
# temporary folder; SLURM_CONF points there), then checks:
#   - `srun --mpi=pmix -n 4 mpitron validate --tp 2 --pp 2 --dp 1` passes;
#   - `srun -n 8` and `srun -n 2` of that topology fail with the topology error on every rank;
#   - `srun --mpi=none -n 2`, where no task can reach the others, exits non-zero at once and
#     starts no computation (MPI refuses, or mpitron's launch check reports the singletons);
#   - `sbatch --wait scripts/slurm/validate.sbatch` passes;
#   - `sbatch scripts/slurm/train.sbatch`, sent SIGUSR1 as before a time limit, saves, requeues
#     itself and resumes to the uninterrupted run's last loss;
#   - `salloc -n 4 mpirun mpitron validate` passes (mpirun finds the allocation by itself);
#   - `srun -n 4` of the multi-rank GoogleTest binary test_comm_mpi passes on every rank;
#   - the multi-rank ctest tests, configured with -DMPIEXEC_EXECUTABLE=srun
#     -DMPIEXEC_PREFLAGS=--mpi=pmix, pass (the build's own launcher settings are put back after).
# Everything it started is stopped and removed on every exit path.
#
# Usage (as root): bash scripts/ci/slurm-local.sh [BUILD_DIR]    (default: build)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/ci/common.sh
ci_begin slurm-local "starts munged, slurmctld and slurmd" "${1:-build}" tests/comm/test_comm_mpi
comm_tests=$build/tests/comm/test_comm_mpi

work=$(mktemp -d /tmp/mpitron-slurm.XXXXXX)
daemons=()  # pids of the daemons this script started (in the foreground, so it can reap them)
cache_backup=""

teardown() {
  local status=$?
  set +e
  if [[ -f $work/slurm.conf ]]; then
    SLURM_CONF=$work/slurm.conf scancel --quiet --full --user=root 2>/dev/null
  fi
  local pid
  for pid in "${daemons[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${daemons[@]}"; do
    ci_wait_until 5 not_running "$pid" || kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  [[ -n $cache_backup ]] && restore_launcher
  rm -rf "$work"
  exit "$status"
}
trap teardown EXIT
trap 'exit 130' INT TERM

not_running() { ! kill -0 "$1" 2>/dev/null; }
not_grep() { ! grep -q "$@"; }
not_queued() { ! squeue -h -j "$job" 2>/dev/null | grep -q .; }

# ---- install and start munge, slurmctld, slurmd -------------------------------------------------
ci_install slurmctld slurmd slurm-client munge

if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  install -d -o munge -g munge -m 0755 /run/munge
  setpriv --reuid=munge --regid=munge --clear-groups /usr/sbin/munged --foreground \
    >"$work/munged.out" 2>&1 &
  daemons+=($!)
  ci_wait_until 5 sh -c 'munge -n 2>/dev/null | unmunge >/dev/null 2>&1' || ci_die "munged does not answer"
fi

node=$(hostname -s)
chmod 0755 "$work"
install -d -o slurm -g slurm "$work/ctld" "$work/d"
install -o slurm -g slurm -m 0644 /dev/null "$work/slurmctld.log"
cat >"$work/slurm.conf" <<EOF
ClusterName=mpitron-ci
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=slurm
AuthType=auth/munge
StateSaveLocation=$work/ctld
SlurmdSpoolDir=$work/d
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=pmix
MailProg=/bin/true
ReturnToService=2
KillWait=2
SlurmdParameters=config_overrides
NodeName=$node NodeAddr=127.0.0.1 CPUs=8 RealMemory=1000 State=UNKNOWN
PartitionName=ci Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
export SLURM_CONF=$work/slurm.conf
slurmctld -D -c >"$work/slurmctld.out" 2>&1 &
daemons+=($!)
slurmd -D >"$work/slurmd.out" 2>&1 &
daemons+=($!)
node_idle() { [[ $(sinfo -h -N -o %t 2>/dev/null) == idle ]]; }
ci_wait_until 20 node_idle ||
  ci_die "the Slurm node did not become idle: $(tail -n 5 "$work"/*.log "$work"/*.out)"
ci_pass "Slurm cluster up: node $node idle"

# ---- runs ----------------------------------------------------------------------------------------
export OMPI_MCA_mpi_yield_when_idle=1
validate=("$mpitron" validate --tp 2 --pp 2 --dp 1 --log-dir "$work/logs")
out=$work/out.txt

# check_output NAME STATUS EXPECTED-STATUS PATTERNS FILE: PASS when STATUS is EXPECTED-STATUS (a
# number, or "nonzero" for a failure that is not a timeout) and FILE matches every line of
# PATTERNS (extended regexes, newline-separated); on FAIL the end of FILE is shown.
check_output() {
  local name=$1 status=$2 expected=$3 patterns=$4 file=$5 problem="" pattern
  if [[ $expected == nonzero ]]; then
    [[ $status -ne 0 && $status -ne 124 ]] || problem=" exit $status, expected non-zero"
  elif [[ $status -ne $expected ]]; then
    problem=" exit $status, expected $expected"
  fi
  while IFS= read -r pattern; do
    [[ -z $pattern ]] || grep -Eq -- "$pattern" "$file" || problem+=" missing /$pattern/"
  done <<<"$patterns"
  if [[ -z $problem ]]; then
    ci_pass "$name"
  else
    ci_fail "$name:$problem"
    tail -n 30 "$file" | sed 's/^/    | /'
  fi
}

# check_run NAME LIMIT EXPECTED-STATUS PATTERNS COMMAND...: runs the command (at most LIMIT s,
# output in $out) and checks it with check_output.
check_run() {
  local name=$1 limit=$2 expected=$3 patterns=$4
  shift 4
  ci_run_timed "$limit" "$out" "$@"
  check_output "$name (${ci_seconds} s)" "$ci_status" "$expected" "$patterns" "$out"
}

check_run "srun -n 4 validate --tp 2 --pp 2 --dp 1" 120 0 \
  "all parallel validations passed" \
  srun --mpi=pmix -n 4 "${validate[@]}"

check_run "srun -n 8 with a 4-rank topology: topology error on every rank" 60 nonzero \
  "$(printf 'rank %d: error: tp\\*pp\\*dp = 2\\*2\\*1 = 4, but the world size is 8\n' {0..7})" \
  srun --mpi=pmix -n 8 "${validate[@]}"

check_run "srun -n 2 with a 4-rank topology: topology error on every rank" 60 nonzero \
  "$(printf 'rank %d: error: tp\\*pp\\*dp = 2\\*2\\*1 = 4, but the world size is 2\n' 0 1)" \
  srun --mpi=pmix -n 2 "${validate[@]}"

# Tasks that cannot form one MPI world must fail fast, never compute as independent copies.
# Debian's Open MPI refuses --mpi=none by itself. Hiding the job from it (no SLURM_JOBID and
# SLURM_NODELIST) makes every task a singleton, as an MPI library without PMIx support would:
# then mpitron's launch check must name the mismatch on each task.
check_run "srun --mpi=none -n 2: refused by MPI" 60 nonzero "" \
  srun --mpi=none -n 2 "${validate[@]}"
ci_expect "srun --mpi=none -n 2: no validate check ran" not_grep PASS "$out"
check_run "srun -n 2 of singletons: the launch check stops both" 60 2 \
  "$(printf '%s\n' 'rank 0: error: the launcher started 2 tasks \(SLURM_STEP_NUM_TASKS=2\) but MPI sees a world of 1' \
    'srun --mpi=pmix -n 2')" \
  srun --mpi=none -n 2 env -u SLURM_JOBID -u SLURM_NODELIST "${validate[@]}"
ci_expect "srun -n 2 of singletons: both tasks reported" test "$(grep -c 'MPI sees a world of 1' "$out")" -eq 2
ci_expect "srun -n 2 of singletons: no validate check ran" not_grep PASS "$out"

# Both job scripts at once: `sbatch --wait` polls the controller every few seconds.
submit() {
  local job=$1
  shift
  MPITRON=$mpitron timeout 120 sbatch --wait --quiet --output="$work/$job.out" --chdir="$work" \
    "scripts/slurm/$job.sbatch" "$@" >"$work/$job.submit" 2>&1
}
start=$EPOCHREALTIME
submit validate --tp 2 --pp 2 --dp 1 &
validate_job=$!
submit train-dp --epochs 2 &
train_job=$!
validate_status=0
wait "$validate_job" || validate_status=$?
train_status=0
wait "$train_job" || train_status=$?
seconds=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
check_output "sbatch --wait scripts/slurm/validate.sbatch (${seconds} s for both jobs)" \
  "$validate_status" 0 "all parallel validations passed" "$work/validate.out"
check_output "sbatch --wait scripts/slurm/train-dp.sbatch" "$train_status" 0 \
  "$(printf '%s\n' 'rank 3 epoch 2 loss' 'train-dp done: 2 epochs .* on 4 ranks.*replicas in sync')" \
  "$work/train-dp.out"

# train.sbatch through an early warning: SIGUSR1 to the batch shell (what --signal=B:USR1@120
# sends before the time limit) stops mpitron at a step boundary with a checkpoint and exit code
# 75, the script requeues the job, and the same command line continues from that step; the last
# loss must be the one of an uninterrupted run, to the last digit printed.
train_args=(--tp 2 --pp 2 --layers 2 --hidden 32 --heads 4 --seq 16 --global-batch 8
            --micro-batch 2 --eval-interval 0 --lr 1e-3 --min-lr 1e-3 --warmup-steps 0 --steps 3000)
job=$(MPITRON=$mpitron MPITRON_CHECKPOINT=$work/train-ckpt MPITRON_LOG_DIR=$work/logs \
  sbatch --parsable --output="$work/train.out" --chdir="$work" scripts/slurm/train.sbatch \
  "${train_args[@]}")
start=$EPOCHREALTIME
ci_wait_until 60 grep -qs "step [0-9]*/3000 loss" "$work/train.out" || ci_die "train.sbatch printed no step"
scancel --signal=USR1 --batch "$job"
# Slurm holds a requeued job for a while before it may start again; a cluster's scheduler would
# wait, this check lets it start at once.
pending() { squeue -h -j "$job" -o %t 2>/dev/null | grep -q PD; }
if ci_wait_until 120 pending; then
  scontrol update JobId="$job" StartTime=now
fi
ci_wait_until 240 not_queued || true
seconds=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
check_output "train.sbatch: SIGUSR1 to the batch shell, requeued, resumed (${seconds} s)" 0 0 \
  "$(printf '%s\n' 'stopping at step [0-9]+ on SIGUSR1: saved .*train-ckpt/step_[0-9]+' \
    'mpitron stopped early and saved; requeueing' 'start 1\)' 'resuming from .*train-ckpt step' \
    'train done: steps [0-9]+\.\.3000')" "$work/train.out"
check_run "srun -n 4 train, uninterrupted" 240 0 "train done" \
  srun --mpi=pmix -n 4 "$mpitron" train "${train_args[@]}" --log-dir "$work/logs"
same_last_loss() {
  local resumed uninterrupted
  resumed=$(grep -o 'step 3000/3000 loss [0-9.]*' "$1")
  uninterrupted=$(grep -o 'step 3000/3000 loss [0-9.]*' "$2")
  [[ -n $resumed && $resumed == "$uninterrupted" ]]
}
ci_expect "train.sbatch: the requeued run's last loss is the uninterrupted run's" \
  same_last_loss "$work/train.out" "$out"

check_run "salloc -n 4 mpirun validate" 120 0 "all parallel validations passed" \
  salloc --quiet -n 4 mpirun --allow-run-as-root "${validate[@]}"

check_run "srun -n 4 test_comm_mpi (GoogleTest on every rank)" 180 0 \
  "mpi tests passed on all 4 ranks" \
  srun --mpi=pmix -n 4 "$comm_tests"

# ---- the ctest suite's multi-rank tests through srun ----------------------------------------------
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
restore_launcher() {
  cmake -S . -B "$build" "-DMPIEXEC_EXECUTABLE=$(head -1 "$cache_backup.exe")" \
    "-DMPIEXEC_PREFLAGS=$(head -1 "$cache_backup.pre")" \
    "-DMPITRON_MPIEXEC_PREFLAGS=$(head -1 "$cache_backup.mpitron")" >/dev/null
}
cache_backup=$work/cache
cache_value MPIEXEC_EXECUTABLE >"$cache_backup.exe"
cache_value MPIEXEC_PREFLAGS >"$cache_backup.pre"
cache_value MPITRON_MPIEXEC_PREFLAGS >"$cache_backup.mpitron"
cmake -S . -B "$build" "-DMPIEXEC_EXECUTABLE=$(command -v srun)" -DMPIEXEC_PREFLAGS=--mpi=pmix \
  -DMPITRON_MPIEXEC_PREFLAGS=AUTO >/dev/null
check_run "ctest with MPIEXEC_EXECUTABLE=srun MPIEXEC_PREFLAGS=--mpi=pmix" 300 0 \
  "100% tests passed, 0 tests failed out of 5" \
  ctest --test-dir "$build" --output-on-failure -j 2 \
  -R '^(test_comm_mpi_np[124]|validate_default_topology|validate_bad_hidden)$'
ci_expect "ctest ran those tests through srun --mpi=pmix" \
  grep -q "srun.*--mpi=pmix" <(ctest --test-dir "$build" -N -V -R '^test_comm_mpi_np4$')
restore_launcher
cache_backup=""

ci_summary
