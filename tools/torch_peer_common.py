"""What the PyTorch peers (torch_peer_mlp.py, torch_peer_gpt.py) share: their ranks, their
memory report and their argument checks.

The peers are launched by Open MPI (`mpirun -np N /usr/bin/python3 tools/torch_peer_X.py ...`),
one process per rank, and talk over Gloo; run without mpirun they are one rank.
"""
import argparse
import math
import os
import resource

import torch
import torch.distributed as dist


def start_ranks(rendezvous: str) -> tuple[int, int]:
    """This process's rank and the world size from Open MPI's environment (one rank without
    it); with more than one rank, joins the Gloo process group at `rendezvous`."""
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    if world > 1:
        dist.init_process_group("gloo", init_method=rendezvous, rank=rank, world_size=world)
    return rank, world


def peak_rss_mib_by_rank(world: int) -> list[float]:
    """Every rank's peak resident set size in MiB (ru_maxrss), gathered on all ranks."""
    rss = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0])
    by_rank = [rss]
    if world > 1:
        by_rank = [torch.zeros(1) for _ in range(world)]
        dist.all_gather(by_rank, rss)
    return [r.item() for r in by_rank]


def finish_ranks(world: int) -> None:
    """Leaves the Gloo process group together: a barrier, then destroy_process_group. Left to
    the interpreter's exit, a rank could tear down its connections while another still used
    them, and that rank then died in Gloo's destructor ("terminate called without an active
    exception", about 1 run in 8 of torch_peer_mlp.py at tp 2 on 2 cores, 2026-12-04)."""
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


def integer_at_least(minimum: int):
    """An argparse type: a whole number >= minimum, else the usual one-line usage error."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text}")
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text}")
        return value
    return parse


def positive_number(text: str) -> float:
    """An argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite positive number, got {text}")
    return value
