"""Checks a `mpitron train --metrics` file against the documented format: a first line
{"config": {...}} holding the run's tp, pp and dp; then one line per step with "step" (1..N in
order), "loss", "lr", "grad_norm", "ms", "tokens_per_s" and "gflops" ("mfu" too with --mfu), all
finite numbers, and "phases_ms": the step's five phases in milliseconds, each finite and >= 0,
together at most "ms" (they are timed inside the step); and {"step",
"val_loss"} lines at the given evaluation steps. With --resumed-from K: one {"resume":
{"from_step": K, "config": {...}}} line right after the records of steps up to K, and still every
step once. Exit 1 with one line naming what differs.

    check_metrics.py FILE --topology 2 2 2 --steps 3 --eval-steps 2 3 [--mfu] [--resumed-from K]
"""
import argparse
import json
import math
import sys


def fail(message):
    print(f"check_metrics: {message}")
    sys.exit(1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("file")
    p.add_argument("--topology", type=int, nargs=3, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--eval-steps", type=int, nargs="*", default=[])
    p.add_argument("--mfu", action="store_true", help="step lines carry mfu (--peak-gflops)")
    p.add_argument("--resumed-from", type=int, help="the step the run was resumed from")
    args = p.parse_args()
    with open(args.file) as f:
        lines = [json.loads(line) for line in f]
    config = lines[0].get("config") if lines else None
    if not isinstance(config, dict):
        fail(f"{args.file}:1: not a {{\"config\": {{...}}}} object")
    topology = [config.get(axis) for axis in ("tp", "pp", "dp")]
    if topology != args.topology:
        fail(f"{args.file}:1: topology {topology}, expected {args.topology}")
    step_keys = {"step", "loss", "lr", "grad_norm", "ms", "tokens_per_s", "gflops", "phases_ms"}
    phase_keys = {"forward_backward", "gradient_reduction", "gradient_norm", "optimizer",
                  "parameter_all_gather"}
    if args.mfu:
        step_keys.add("mfu")
    steps, evals, resumes = [], [], []
    for number, line in enumerate(lines[1:], 2):
        if set(line) == {"resume"}:
            resume = line["resume"]
            if not isinstance(resume.get("config"), dict):
                fail(f"{args.file}:{number}: the resume line has no config: {line}")
            resumes.append((resume.get("from_step"), max(steps + evals, default=0)))
            continue
        phases = line.pop("phases_ms", None)
        if phases is not None:
            if not isinstance(phases, dict) or set(phases) != phase_keys:
                fail(f"{args.file}:{number}: phases_ms is not an object of {sorted(phase_keys)}")
            if not all(isinstance(v, (int, float)) and 0 <= v < math.inf for v in phases.values()):
                fail(f"{args.file}:{number}: a phase is not a finite number >= 0: {phases}")
            if sum(phases.values()) > line["ms"]:
                fail(f"{args.file}:{number}: the phases add up to {sum(phases.values())} ms, more "
                     f"than the step's {line['ms']}")
            line["phases_ms"] = phases
        values = [v for k, v in line.items() if k not in ("step", "phases_ms")]
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
            fail(f"{args.file}:{number}: a value is not a finite number: {line}")
        if set(line) == step_keys:
            steps.append(line["step"])
        elif set(line) == {"step", "val_loss"}:
            evals.append(line["step"])
        else:
            fail(f"{args.file}:{number}: unexpected keys {sorted(line)}")
    expected_resumes = [] if args.resumed_from is None else [(args.resumed_from,) * 2]
    if resumes != expected_resumes:
        fail(f"{args.file}: resumes (from step, after records up to step) {resumes}, expected "
             f"{expected_resumes}")
    if steps != list(range(1, args.steps + 1)):
        fail(f"{args.file}: steps {steps}, expected 1..{args.steps}")
    if evals != args.eval_steps:
        fail(f"{args.file}: evaluations at {evals}, expected {args.eval_steps}")
    print(f"check_metrics: {args.file}: {len(steps)} steps, {len(evals)} evaluations, as documented")


if __name__ == "__main__":
    main()
