#!/usr/bin/python3
"""Plots training metrics (`--metrics` JSONL files) into one PNG.

Each file is one run: a first line {"config": {...}} whose config holds the topology (tp, pp,
dp), then one line per training step {"step", "loss", "lr", "grad_norm", "ms", "tokens_per_s"}
and one per evaluation {"step", "val_loss"}. A run resumed from a checkpoint of step k adds a
line {"resume": {"from_step": k, "config": {...}}}: the file stays one continuous run, records of
steps after k written before that line (by an interrupted run) are dropped, and the resume is
marked with a dotted vertical line. The picture has two panels: training loss (solid) and
validation loss (dashed, dots) against the step, or against the tokens seen (--x tokens), one
colour per run labelled with its topology "(tp, pp, dp)" (or "(1, 1, 1) -> (2, 2, 2)" when a
resume changed it); and tokens/s per step.

    /usr/bin/python3 tools/plot_metrics.py run_111.jsonl run_222.jsonl -o loss.png

Needs matplotlib (Debian: python3-matplotlib); run it with the system interpreter.
"""
import argparse
import json
import pathlib
import sys


class MetricsError(Exception):
    """A metrics file that cannot be plotted; the message names the file and line."""


def read_run(path):
    """One run: {"label", "steps", "loss", "tokens", "tokens_per_s", "val_steps", "val_tokens",
    "val_loss", "resumes" (the from_step of each resume), "resume_tokens"} from a metrics JSONL
    file. Raises MetricsError for bad content."""
    path = pathlib.Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as error:
        raise MetricsError(f"{path}: cannot read ({error.strerror})") from error
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append((number, json.loads(line)))
        except json.JSONDecodeError as error:
            raise MetricsError(f"{path}:{number}: not JSON ({error.msg})") from error
    if not records or not isinstance(records[0][1], dict) or "config" not in records[0][1]:
        raise MetricsError(f'{path}:1: the first line must be {{"config": {{...}}}}')
    topologies = [topology_of(records[0][1]["config"], path, 1)]
    run = {"steps": [], "loss": [], "tokens": [], "tokens_per_s": [], "val_steps": [],
           "val_tokens": [], "val_loss": [], "resumes": [], "resume_tokens": []}
    for number, record in records[1:]:
        try:
            if "resume" in record:
                resume(run, int(record["resume"]["from_step"]))
                topology = topology_of(record["resume"]["config"], path, number)
                if topology != topologies[-1]:
                    topologies.append(topology)
            elif "val_loss" in record:
                run["val_steps"].append(record["step"])
                run["val_tokens"].append(run["tokens"][-1] if run["tokens"] else 0.0)
                run["val_loss"].append(float(record["val_loss"]))
            elif "loss" in record:
                seen = run["tokens"][-1] if run["tokens"] else 0.0
                run["steps"].append(record["step"])
                run["loss"].append(float(record["loss"]))
                # tokens trained on so far: tokens/s times the step's seconds, summed
                run["tokens"].append(seen + float(record["tokens_per_s"]) * float(record["ms"]) / 1e3)
                run["tokens_per_s"].append(float(record["tokens_per_s"]))
            else:
                raise KeyError("loss, val_loss or resume")
        except (KeyError, TypeError, ValueError) as error:
            raise MetricsError(f"{path}:{number}: a step needs step, loss, ms and tokens_per_s, "
                               f"an evaluation step and val_loss, a resume from_step and config "
                               f"({error!r})") from error
    run["label"] = " -> ".join(topologies)
    if not run["steps"]:
        raise MetricsError(f"{path}: no training steps")
    return run


def topology_of(config, path, number):
    """ "(tp, pp, dp)" of a config object, or MetricsError naming the line."""
    try:
        return f"({config['tp']}, {config['pp']}, {config['dp']})"
    except (KeyError, TypeError) as error:
        raise MetricsError(f"{path}:{number}: the config has no tp, pp and dp") from error


def resume(run, from_step):
    """Continues `run` after step `from_step`: drops its records of later steps."""
    keep = sum(1 for step in run["steps"] if step <= from_step)
    for key in ("steps", "loss", "tokens", "tokens_per_s"):
        del run[key][keep:]
    keep = sum(1 for step in run["val_steps"] if step <= from_step)
    for key in ("val_steps", "val_tokens", "val_loss"):
        del run[key][keep:]
    run["resumes"].append(from_step)
    run["resume_tokens"].append(run["tokens"][-1] if run["tokens"] else 0.0)


def plot(runs, x_axis="step", title=None):
    """A matplotlib Figure with the loss panel and the tokens/s panel of `runs` (from read_run).
    Runs with the same topology get their position appended to the label ("(1, 1, 1) #2")."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (loss_axes, rate_axes) = plt.subplots(1, 2, figsize=(11, 4.2))
    labels = [run["label"] for run in runs]
    for index, run in enumerate(runs):
        label = run["label"]
        if labels.count(label) > 1:
            label += f" #{index + 1}"
        x = run["tokens"] if x_axis == "tokens" else run["steps"]
        # Earlier runs drawn wider, so identical curves stay visible under later ones.
        width = max(1.0, 3.0 - index)
        line, = loss_axes.plot(x, run["loss"], linewidth=width, label=f"{label} train")
        if run["val_loss"]:
            val_x = run["val_tokens"] if x_axis == "tokens" else run["val_steps"]
            loss_axes.plot(val_x, run["val_loss"], "--o", color=line.get_color(), markersize=3,
                           linewidth=width, label=f"{label} val")
        rate_axes.plot(run["steps"], run["tokens_per_s"], color=line.get_color(), label=label)
        resumes = run["resume_tokens"] if x_axis == "tokens" else run["resumes"]
        for number, at in enumerate(resumes):
            loss_axes.axvline(at, color=line.get_color(), linestyle=":", linewidth=1,
                              label=f"{label} resumed" if number == 0 else None)
    loss_axes.set_xlabel("tokens" if x_axis == "tokens" else "step")
    loss_axes.set_ylabel("loss")
    loss_axes.set_title("loss (topology: tp, pp, dp)")
    loss_axes.legend()
    rate_axes.set_xlabel("step")
    rate_axes.set_ylabel("tokens/s")
    rate_axes.set_title("throughput")
    rate_axes.set_ylim(bottom=0)
    rate_axes.legend()
    for axes in (loss_axes, rate_axes):
        axes.grid(alpha=0.3)
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    return figure


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("metrics", nargs="+", help="metrics JSONL files, one per run")
    parser.add_argument("-o", "--output", required=True, help="PNG file to write")
    parser.add_argument("--x", choices=["step", "tokens"], default="step",
                        help="x axis of the loss panel (default: step)")
    parser.add_argument("--title", help="title above both panels")
    args = parser.parse_args(argv)
    try:
        runs = [read_run(path) for path in args.metrics]
    except MetricsError as error:
        print(f"plot_metrics: error: {error}", file=sys.stderr)
        return 2
    plot(runs, args.x, args.title).savefig(args.output, dpi=120)
    print(f"plot_metrics: wrote {args.output} ({len(runs)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
