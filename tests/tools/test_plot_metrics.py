"""Tests of tools/plot_metrics.py on synthetic metrics files (exit code 77, ctest's skip, when
matplotlib is missing)."""
import contextlib
import io
import json
import pathlib
import struct
import sys
import tempfile
import unittest

try:
    import matplotlib  # noqa: F401
except ImportError:
    print("matplotlib is missing (Debian: python3-matplotlib): skipped")
    sys.exit(77)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tools"))
import plot_metrics  # noqa: E402


def write_run(folder, name, topology, losses, val_every=2, ms=50.0, tokens_per_s=1000.0):
    """A metrics file: config, then one line per step and an evaluation every `val_every`."""
    tp, pp, dp = topology
    lines = [{"config": {"tp": tp, "pp": pp, "dp": dp, "model": "gpt"}}]
    for step, loss in enumerate(losses, 1):
        lines.append({"step": step, "loss": loss, "lr": 1e-3, "grad_norm": 1.0, "ms": ms,
                      "tokens_per_s": tokens_per_s * step})
        if step % val_every == 0:
            lines.append({"step": step, "val_loss": loss + 0.5})
    path = pathlib.Path(folder) / name
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


class PlotMetricsTest(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.TemporaryDirectory()
        self.addCleanup(self.folder.cleanup)
        self.one = write_run(self.folder.name, "one.jsonl", (1, 1, 1), [4.0, 3.0, 2.5, 2.0])
        self.eight = write_run(self.folder.name, "eight.jsonl", (2, 2, 2), [4.0, 3.1, 2.4, 2.1])

    def run_main(self, *args):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = plot_metrics.main([str(a) for a in args])
        return code, err.getvalue()

    def test_reads_steps_evaluations_and_tokens_seen(self):
        run = plot_metrics.read_run(self.one)
        self.assertEqual(run["label"], "(1, 1, 1)")
        self.assertEqual(run["steps"], [1, 2, 3, 4])
        self.assertEqual(run["loss"], [4.0, 3.0, 2.5, 2.0])
        self.assertEqual(run["val_steps"], [2, 4])
        self.assertEqual(run["val_loss"], [3.5, 2.5])
        # 50 ms at 1000, 2000, 3000, 4000 tokens/s: 50, 150, 300, 500 tokens seen.
        self.assertEqual(run["tokens"], [50.0, 150.0, 300.0, 500.0])
        self.assertEqual(run["val_tokens"], [150.0, 500.0])

    def test_a_resumed_run_is_one_continuous_curve_with_its_resume_marked(self):
        # Steps 1-4 at (1, 1, 1); an interrupted run went on to steps 5-6 after its last save at
        # step 4; the run resumed from step 4 at (2, 2, 2) wrote steps 5-6 again.
        lines = [{"config": {"tp": 1, "pp": 1, "dp": 1}}]
        step_line = lambda step, loss: {"step": step, "loss": loss, "lr": 1e-3, "grad_norm": 1.0,
                                        "ms": 100.0, "tokens_per_s": 1000.0}
        lines += [step_line(s, 5.0 - s) for s in range(1, 7)] + [{"step": 6, "val_loss": 9.0}]
        lines.append({"resume": {"from_step": 4, "config": {"tp": 2, "pp": 2, "dp": 2}}})
        lines += [step_line(5, 0.5), step_line(6, 0.25), {"step": 6, "val_loss": 1.0}]
        path = pathlib.Path(self.folder.name) / "resumed.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        run = plot_metrics.read_run(path)
        self.assertEqual(run["steps"], [1, 2, 3, 4, 5, 6])
        self.assertEqual(run["loss"], [4.0, 3.0, 2.0, 1.0, 0.5, 0.25])
        self.assertEqual(run["val_steps"], [6])
        self.assertEqual(run["val_loss"], [1.0])
        self.assertEqual(run["tokens"], [100.0, 200.0, 300.0, 400.0, 500.0, 600.0])
        self.assertEqual(run["resumes"], [4])
        self.assertEqual(run["resume_tokens"], [400.0])
        self.assertEqual(run["label"], "(1, 1, 1) -> (2, 2, 2)")
        figure = plot_metrics.plot([run])
        marks = [line for line in figure.axes[0].get_lines() if line.get_linestyle() == ":"]
        self.assertEqual(len(marks), 1)
        self.assertEqual(list(marks[0].get_xdata()), [4, 4])

    def test_figure_has_one_curve_pair_per_run_labelled_by_topology(self):
        runs = [plot_metrics.read_run(self.one), plot_metrics.read_run(self.eight)]
        loss_axes, rate_axes = plot_metrics.plot(runs).axes
        labels = [line.get_label() for line in loss_axes.get_lines()]
        self.assertEqual(labels, ["(1, 1, 1) train", "(1, 1, 1) val", "(2, 2, 2) train",
                                  "(2, 2, 2) val"])
        train = loss_axes.get_lines()[2]
        self.assertEqual(list(train.get_xdata()), [1, 2, 3, 4])
        self.assertEqual(list(train.get_ydata()), [4.0, 3.1, 2.4, 2.1])
        self.assertEqual(loss_axes.get_lines()[0].get_color(), loss_axes.get_lines()[1].get_color())
        self.assertEqual([line.get_label() for line in rate_axes.get_lines()],
                         ["(1, 1, 1)", "(2, 2, 2)"])
        self.assertEqual(list(rate_axes.get_lines()[0].get_ydata()), [1000, 2000, 3000, 4000])
        tokens_axes = plot_metrics.plot(runs, x_axis="tokens").axes[0]
        self.assertEqual(list(tokens_axes.get_lines()[0].get_xdata()), [50, 150, 300, 500])
        self.assertEqual(tokens_axes.get_xlabel(), "tokens")

    def test_same_topology_twice_is_told_apart(self):
        runs = [plot_metrics.read_run(self.one), plot_metrics.read_run(self.one)]
        labels = [line.get_label() for line in plot_metrics.plot(runs).axes[1].get_lines()]
        self.assertEqual(labels, ["(1, 1, 1) #1", "(1, 1, 1) #2"])

    def test_writes_a_png_of_the_stated_size(self):
        png = pathlib.Path(self.folder.name) / "loss.png"
        code, _ = self.run_main(self.one, self.eight, "-o", png, "--title", "GPL-3 text")
        self.assertEqual(code, 0)
        header = png.read_bytes()[:24]
        self.assertEqual(header[:8], b"\x89PNG\r\n\x1a\n")
        self.assertEqual(struct.unpack(">II", header[16:24]), (1320, 504))  # 11 x 4.2 in, 120 dpi

    def test_bad_files_are_named_with_their_line(self):
        folder = pathlib.Path(self.folder.name)
        cases = {
            "no_config.jsonl": ('{"step": 1, "loss": 2}\n', "no_config.jsonl:1: the first line"),
            "broken.jsonl": ('{"config": {"tp": 1, "pp": 1, "dp": 1}}\n{"step": \n',
                             "broken.jsonl:2: not JSON"),
            "no_topology.jsonl": ('{"config": {"tp": 1}}\n', "no_topology.jsonl:1: the config"),
            "bad_step.jsonl": ('{"config": {"tp": 1, "pp": 1, "dp": 1}}\n{"step": 1, "loss": 2}\n',
                               "bad_step.jsonl:2: a step needs"),
            "empty_run.jsonl": ('{"config": {"tp": 1, "pp": 1, "dp": 1}}\n',
                                "empty_run.jsonl: no training steps"),
        }
        for name, (text, message) in cases.items():
            (folder / name).write_text(text)
            code, err = self.run_main(folder / name, "-o", folder / "x.png")
            self.assertEqual(code, 2, name)
            self.assertIn("plot_metrics: error: ", err)
            self.assertIn(message, err, name)
        code, err = self.run_main(folder / "missing.jsonl", "-o", folder / "x.png")
        self.assertEqual(code, 2)
        self.assertIn("missing.jsonl: cannot read", err)


if __name__ == "__main__":
    unittest.main()
