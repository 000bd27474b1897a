#!/usr/bin/python3
"""PyTorch peer of `mpitron bench`: the combined TP+PP+DP MLP training step, on CPU over Gloo.

The model is `--layers` MLP blocks y = fc2(gelu(fc1(x))) (hidden -> intermediate -> hidden, exact
erf GELU, biases) on an input [batch, seq, hidden], with the MSE loss against a fixed target.
One step is forward, backward and the average of the gradients over the data-parallel replicas;
no optimizer update and no micro-batching, the work `mpitron bench` times. The ranks form a
(tp, pp, dp) grid with world rank d*(pp*tp) + p*tp + t, as in mpitron:
  - TP (Megatron-LM): rank t holds rows [t I/tp, (t+1) I/tp) of fc1 and those columns of fc2;
    the partial fc2 outputs are summed with all_reduce (and the input gradients likewise);
  - PP: stage p runs layers [p L/pp, (p+1) L/pp); activations go forward and their gradients
    back with send/recv;
  - DP: replica d has its own input and target; the gradients are averaged with all_reduce.

Launch with Open MPI, one process per rank (the peer reads OMPI_COMM_WORLD_RANK and _SIZE and
meets the others over TCP at --rendezvous; without mpirun it is one rank):

    mpirun --oversubscribe -np 2 /usr/bin/python3 tools/torch_peer_mlp.py --tp 2 --pp 1 --dp 1 \
        --hidden 512 --intermediate 2048 --batch 8 --seq 128 --layers 4 --steps 5

Rank 0 prints ms/step, tokens/s and achieved GFLOP/s (model FLOPs 12 hidden intermediate layers
tokens, tokens = dp batch seq) and, with --json FILE, appends one JSON line with those figures
and the peak RSS of every rank. OpenBLAS runs one thread per rank unless OPENBLAS_NUM_THREADS
says otherwise. Needs Debian's python3-torch (and libopenblas0-pthread for a fast BLAS).
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch_peer_common import (  # noqa: E402
    finish_ranks, integer_at_least, peak_rss_mib_by_rank, start_ranks)


class SumOverGroup(torch.autograd.Function):
    """Forward all_reduce(sum) over `group`, backward identity: the end of a TP block."""

    @staticmethod
    def forward(ctx, x, group):
        x = x.clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class CopyToGroup(torch.autograd.Function):
    """Forward identity, backward all_reduce(sum) over `group`: the start of a TP block."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class ShardedMlp(torch.nn.Module):
    """One MLP block holding TP shard t of tp; `tp_group` is None when tp is 1."""

    def __init__(self, hidden, intermediate, t, tp, tp_group, generator):
        super().__init__()
        rows = slice(t * intermediate // tp, (t + 1) * intermediate // tp)
        fc1 = torch.randn(intermediate, hidden, generator=generator) / hidden ** 0.5
        fc2 = torch.randn(hidden, intermediate, generator=generator) / intermediate ** 0.5
        self.fc1_weight = torch.nn.Parameter(fc1[rows].clone())
        self.fc1_bias = torch.nn.Parameter(torch.zeros(intermediate // tp))
        self.fc2_weight = torch.nn.Parameter(fc2[:, rows].clone())
        self.fc2_bias = torch.nn.Parameter(torch.zeros(hidden))
        self.tp_group = tp_group

    def forward(self, x):
        if self.tp_group is not None:
            x = CopyToGroup.apply(x, self.tp_group)
        partial = F.linear(F.gelu(F.linear(x, self.fc1_weight, self.fc1_bias)), self.fc2_weight)
        if self.tp_group is not None:
            partial = SumOverGroup.apply(partial, self.tp_group)
        return partial + self.fc2_bias


def groups(tp, pp, dp, rank):
    """This rank's TP and DP groups (None for a group of one). Every rank creates every group,
    in the same order, as torch.distributed requires."""
    mine = {}
    for d in range(dp):
        for p in range(pp):
            members = [d * pp * tp + p * tp + t for t in range(tp)]
            group = dist.new_group(members) if tp > 1 else None
            mine.update({("tp", r): group for r in members})
    for p in range(pp):
        for t in range(tp):
            members = [d * pp * tp + p * tp + t for d in range(dp)]
            group = dist.new_group(members) if dp > 1 else None
            mine.update({("dp", r): group for r in members})
    return mine[("tp", rank)], mine[("dp", rank)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in [("tp", 1), ("pp", 1), ("dp", 1), ("hidden", 512), ("intermediate", 2048),
                          ("batch", 8), ("seq", 128), ("layers", 4), ("steps", 5)]:
        parser.add_argument(f"--{name}", type=integer_at_least(1), default=default)
    for name, default in [("warmup", 2), ("seed", 1234)]:
        parser.add_argument(f"--{name}", type=integer_at_least(0), default=default)
    parser.add_argument("--rendezvous", default=os.environ.get("TORCH_PEER_RENDEZVOUS",
                                                          "tcp://127.0.0.1:29511"))
    parser.add_argument("--threads", type=integer_at_least(1), default=1,
                        help="intra-op threads per rank (torch.set_num_threads; also set "
                             "OPENBLAS_NUM_THREADS and OMP_NUM_THREADS to it)")
    parser.add_argument("--json", help="append the figures as one JSON line (rank 0)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rank, world = start_ranks(args.rendezvous)
    tp, pp, dp = args.tp, args.pp, args.dp
    if tp * pp * dp != world:
        raise SystemExit(f"torch_peer_mlp: tp*pp*dp = {tp}*{pp}*{dp}, but there are {world} ranks")
    if args.intermediate % tp or args.layers % pp:
        raise SystemExit(f"torch_peer_mlp: --intermediate {args.intermediate} must divide by tp "
                         f"{tp} and --layers {args.layers} by pp {pp}")
    t, s, d = rank % tp, rank // tp % pp, rank // (tp * pp)
    tp_group, dp_group = groups(tp, pp, dp, rank) if world > 1 else (None, None)
    prev_stage = rank - tp if s > 0 else None
    next_stage = rank + tp if s < pp - 1 else None

    per_stage = args.layers // pp
    stage = torch.nn.Sequential(*[
        ShardedMlp(args.hidden, args.intermediate, t, tp, tp_group,
                   torch.Generator().manual_seed(args.seed + layer))
        for layer in range(s * per_stage, (s + 1) * per_stage)])
    params = list(stage.parameters())
    shape = (args.batch, args.seq, args.hidden)
    data = torch.Generator().manual_seed(args.seed + 1000 + d)
    inputs = torch.randn(shape, generator=data)
    target = 0.5 * torch.randn(shape, generator=data)

    def step():
        for param in params:
            param.grad = None
        x = inputs
        if prev_stage is not None:
            x = torch.empty(shape)
            dist.recv(x, prev_stage)
            x.requires_grad_()
        y = stage(x)
        if next_stage is None:
            F.mse_loss(y, target).backward()
        else:
            dist.send(y.detach(), next_stage)
            grad = torch.empty(shape)
            dist.recv(grad, next_stage)
            y.backward(grad)
        if prev_stage is not None:
            dist.send(x.grad, prev_stage)
        if dp_group is not None:
            flat = torch.cat([param.grad.reshape(-1) for param in params])
            dist.all_reduce(flat, group=dp_group)
            flat /= dp
            for param, chunk in zip(params, flat.split([q.numel() for q in params])):
                param.grad.copy_(chunk.view_as(param))

    for _ in range(args.warmup):
        step()
    if world > 1:
        dist.barrier()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    if world > 1:
        dist.barrier()
    seconds = time.perf_counter() - start

    rss_by_rank = peak_rss_mib_by_rank(world)
    finish_ranks(world)
    if rank != 0:
        return
    ms = 1e3 * seconds / args.steps
    tokens = dp * args.batch * args.seq
    gflop = 12 * args.hidden * args.intermediate * args.layers * tokens / 1e9
    report = {"tool": "pytorch", "torch": torch.__version__,
              "config": {"world_size": world, "tp": tp, "pp": pp, "dp": dp,
                         **{k: getattr(args, k) for k in
                            ("hidden", "intermediate", "batch", "seq", "layers")}},
              "ms_per_step": ms, "tokens_per_s": tokens / (ms / 1e3),
              "achieved_gflops": gflop / (ms / 1e3), "model_gflop_per_step": gflop,
              "peak_rss_mib_by_rank": rss_by_rank}
    print(f"torch_peer_mlp: world {world} = tp {tp} x pp {pp} x dp {dp} | hidden {args.hidden} "
          f"intermediate {args.intermediate} batch {args.batch} seq {args.seq} layers "
          f"{args.layers}\ntorch_peer_mlp: {ms:.1f} ms/step, {report['tokens_per_s']:.0f} "
          f"tokens/s, {report['achieved_gflops']:.1f} GFLOP/s achieved ({gflop:.1f} model "
          f"GFLOP/step), peak RSS {max(report['peak_rss_mib_by_rank']):.0f} MiB/rank (max)")
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    main()
