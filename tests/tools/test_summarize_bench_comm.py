"""Tests of tools/summarize_bench_comm.py on synthetic bench comm runs whose medians are known."""
import contextlib
import io
import json
import pathlib
import sys
import tempfile
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tools"))
import summarize_bench_comm  # noqa: E402


def run(ranks, results, device="cpu", match=True):
    """One bench comm JSON line: results as (op, bytes, mpitron_us, mpi_us)."""
    return {"tool": "mpitron", "bench": "comm", "world_size": ranks, "device": device,
            "results": [{"op": op, "bytes": n, "mpitron_us": a, "mpi_us": b,
                         "results_match": match} for op, n, a, b in results]}


def main_output(text):
    """Exit code, stdout and stderr of the command line on a file holding `text`."""
    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "comm.jsonl"
        path.write_text(text)
        out, err = io.StringIO(), io.StringIO()
        sys.argv = ["summarize_bench_comm.py", str(path)]
        code = 0
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                summarize_bench_comm.main()
            except SystemExit as exit_:
                code = exit_.code
    return code, out.getvalue(), err.getvalue()


class SummarizeTest(unittest.TestCase):
    def test_medians_and_ranges_per_world_size_op_and_size(self):
        runs = [run(4, [("all-reduce", 4096, 10.0, 20.0)]),
                run(2, [("all-reduce", 4096, 3.0, 2.0), ("send/recv", 1 << 20, 100.0, 100.0)]),
                run(2, [("all-reduce", 4096, 1.0, 2.0), ("send/recv", 1 << 20, 120.0, 100.0)]),
                {"tool": "mpitron", "bench": "step"},
                run(2, [("all-reduce", 4096, 2.2, 2.0), ("send/recv", 1 << 20, 90.0, 100.0)])]
        rows = summarize_bench_comm.summarize(runs)
        self.assertEqual([(r["ranks"], r["op"], r["bytes"], r["runs"]) for r in rows],
                         [(2, "all-reduce", 4096, 3), (2, "send/recv", 1 << 20, 3),
                          (4, "all-reduce", 4096, 1)])
        small = rows[0]  # ratios 1.5, 0.5, 1.1
        self.assertAlmostEqual(small["ratio"], 1.1)
        self.assertAlmostEqual(small["low"], 0.5)
        self.assertAlmostEqual(small["high"], 1.5)
        self.assertAlmostEqual(small["mpitron_us"], 2.2)
        self.assertAlmostEqual(small["mpi_us"], 2.0)
        self.assertAlmostEqual(rows[1]["ratio"], 1.0)
        self.assertAlmostEqual(rows[2]["ratio"], 0.5)

    def test_devices_are_kept_apart_and_differing_results_counted(self):
        runs = [run(2, [("all-reduce", 4096, 1.0, 1.0)]),
                run(2, [("all-reduce", 4096, 2.0, 1.0)], device="cuda", match=False)]
        rows = summarize_bench_comm.summarize(runs)
        self.assertEqual([(r["device"], r["runs"], r["differ"]) for r in rows],
                         [("cpu", 1, 0), ("cuda", 1, 1)])

    def test_command_line_prints_one_line_per_row(self):
        code, out, _ = main_output(json.dumps(run(2, [("all-gather", 262144, 13.0, 12.5)])) + "\n")
        self.assertEqual(code, 0)
        lines = out.splitlines()
        self.assertEqual(len(lines), 2)
        self.assertRegex(lines[1],
                         r"^cpu +2 all-gather +256 KiB +1 +13\.0 +12\.5 +1\.04 +1\.04-1\.04$")

    def test_bad_input_is_one_line_and_exit_2(self):
        for text in ["{not json\n", json.dumps({"bench": "comm", "world_size": 2}) + "\n",
                     json.dumps({"bench": "step"}) + "\n"]:
            code, out, err = main_output(text)
            self.assertEqual(code, 2, text)
            self.assertEqual(out, "")
            self.assertEqual(len(err.splitlines()), 1, err)
            self.assertTrue(err.startswith("summarize_bench_comm: "), err)


if __name__ == "__main__":
    unittest.main()
