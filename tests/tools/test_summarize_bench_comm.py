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


def run(ranks, results):
    """One bench comm JSON line: results as (op, bytes, mpitron_us, mpi_us)."""
    return {"tool": "mpitron", "bench": "comm", "world_size": ranks, "device": "cpu",
            "results": [{"op": op, "bytes": n, "mpitron_us": a, "mpi_us": b}
                        for op, n, a, b in results]}


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

    def test_command_line_prints_one_line_per_row(self):
        with tempfile.TemporaryDirectory() as folder:
            path = pathlib.Path(folder) / "comm.jsonl"
            path.write_text(json.dumps(run(2, [("all-gather", 262144, 13.0, 12.5)])) + "\n")
            out = io.StringIO()
            sys.argv = ["summarize_bench_comm.py", str(path)]
            with contextlib.redirect_stdout(out):
                summarize_bench_comm.main()
        lines = out.getvalue().splitlines()
        self.assertEqual(len(lines), 2)
        self.assertRegex(lines[1], r"^ +2 all-gather +256 KiB +1 +13\.0 +12\.5 +1\.04 +1\.04-1\.04$")


if __name__ == "__main__":
    unittest.main()
