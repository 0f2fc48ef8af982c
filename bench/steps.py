#!/usr/bin/env python3
"""What the step executor (hostagent/workloads/steps.py) itself costs, on the in-memory
loopback fabric (hostagent/workloads/loopback.py): no root, no kernel, no fabric.

1. Compute only: a seeded random DAG of compute nodes on each of 16 ranks, every rank in one
   event loop. The step can take no less than its critical path (the longest chain of
   durations on any rank); what it takes beyond that is the executor's scheduling and the
   event loop's timers. Target: within 2%.
2. Data parallel with full overlap: 4 ranks, one DDP bucket per layer, each bucket's ring
   all-reduce shorter than one layer's backward, over a loopback whose every rank sends at
   RATE (its egress serialized: one write after another, size x 8 / RATE each). Every bucket
   but the last hides behind the next layer's backward; the last starts when the backward
   ends and is exposed whole. The arithmetic: exposed = 2 (n - 1) / n x bucket x 8 / RATE per
   rank (a ring all-reduce sends 2 (n - 1) blocks of bucket / n), the step forward + backward
   + that. Target: exposed within 10% of it.

Every collective moves and verifies real bytes, as on a fabric. The numbers are wall clock on
this machine: a loaded machine delays timers and shows here as overhead.

    .venv/bin/python -m bench.steps                 # both, 5 iterations each
    .venv/bin/python -m bench.steps --iterations 10
"""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
from dataclasses import asdict

import pandas as pd

from analysis.steps import iteration_times, rank_metrics
from bench.fair import header, table
from hostagent.protocol.endpoint import MessageStats
from hostagent.workloads.graph import Graph, Job, Node
from hostagent.workloads.loopback import LoopbackEndpoint, LoopbackFabric
from hostagent.workloads.steps import NodeRecord, StepExecutor
from hostagent.workloads.training import TrainingSpec, training_job

RANKS = 16
NODES = 30  # compute nodes per rank
# s, each node's, uniform. The event loop's timers wake up to 1 ms late (epoll waits whole
# milliseconds); the executor sleeps to deadlines from planned ends, so a chain runs about one
# wake-up over, where plain back-to-back sleeps (`bare_chains`) run one per node over.
DURATION = (0.010, 0.050)
RATE = 100e6  # bit/s each rank sends at in the data-parallel step
# A ring step of 1 MiB / 4 = 256 KiB takes 21 ms at RATE: a timer's 1 ms is a few % of it.
DP = TrainingSpec(dp=4, layers=6, layer_bytes=1 << 20, bucket_bytes=1 << 20,
                  micro_batches=1, forward=0.030, backward=0.150)


class PacedEndpoint:
    """A loopback endpoint whose writes leave one after another at `rate` bit/s: each waits
    for the ones posted before it, then for its own size's serialization."""

    def __init__(self, inner: LoopbackEndpoint, rate: float) -> None:
        self._inner, self._rate = inner, rate
        self.rank, self.world = inner.rank, inner.world
        self.register, self.wait_imm = inner.register, inner.wait_imm
        self._free = 0.0  # when the egress is done with what was posted so far

    async def write(self, peer: int, data: memoryview, remote_offset: int,
                    imm: int | None = None) -> MessageStats:
        now = time.perf_counter()
        self._free = max(now, self._free) + data.nbytes * 8 / self._rate
        await asyncio.sleep(self._free - now)
        return await self._inner.write(peer, data, remote_offset, imm)


def random_dag(rank: int, seed: int) -> tuple[Graph, list[float]]:
    """A rank's compute-only DAG (each node depends on up to two earlier ones) and the
    durations along its critical path (their sum is the path's length)."""
    rng = random.Random(seed * 1000 + rank)
    nodes, chain = [], {}
    for k in range(NODES):
        deps = tuple(sorted(rng.sample(range(k), min(k, rng.randint(0, 2)))))
        duration = rng.uniform(*DURATION)
        nodes.append(Node(k, "compute", f"c{k}", duration=duration, data_deps=deps))
        chain[k] = max((chain[d] for d in deps), key=sum, default=[]) + [duration]
    return Graph(rank, tuple(nodes)), max(chain.values(), key=sum)


def bare_chains(chains: list[list[float]]) -> list[float]:
    """Each chain run as plain back-to-back asyncio.sleep calls, all at once on one loop: what
    the event loop's timers alone make of the critical paths, without the executor."""
    async def chain(durations: list[float]) -> float:
        start = time.perf_counter()
        for d in durations:
            await asyncio.sleep(d)
        return time.perf_counter() - start

    async def main() -> list[float]:
        return await asyncio.gather(*(chain(c) for c in chains))
    return asyncio.run(main())


def run(job: Job, iterations: int, rate: float | None = None) -> pd.DataFrame:
    """Every rank of `job` in one event loop, `iterations` steps; the node records."""
    net = LoopbackFabric(job.world)
    endpoints = [net.endpoint(r) if rate is None else PacedEndpoint(net.endpoint(r), rate)
                 for r in range(job.world)]
    executors = [StepExecutor(ep, job.plan(r), seed=1, clock=time.perf_counter)  # type: ignore[arg-type]
                 for r, ep in enumerate(endpoints)]

    async def rank(ex: StepExecutor) -> list[NodeRecord]:
        out: list[NodeRecord] = []
        for it in range(iterations):
            out += await ex.run_iteration(it)
        return out

    async def main() -> list[list[NodeRecord]]:
        return await asyncio.gather(*(rank(ex) for ex in executors))
    records = [asdict(r) for per in asyncio.run(main()) for r in per]
    frame = pd.DataFrame(records)
    wrong = int((~frame["verified"]).sum())
    if wrong:
        raise SystemExit(f"{wrong} nodes did not verify: {frame[~frame['verified']].iloc[0]}")
    return frame


def compute_only(iterations: int, seed: int) -> tuple[list[list[object]], float, float,
                                                     float]:
    """Per iteration, each rank's step (its first node's start to its last node's end: with
    no communication the ranks do not wait for each other) over its own critical path, and
    over the same path slept bare (`bare_chains`); the median and largest of the first, the
    median of the second."""
    graphs, chains = zip(*(random_dag(r, seed) for r in range(RANKS)), strict=True)
    paths = [sum(c) for c in chains]
    job = Job(RANKS, {}, tuple(graphs)).validate()
    m = rank_metrics(run(job, iterations))
    m["ratio"] = m["time"] / m["rank"].map(dict(enumerate(paths)))
    bare = pd.DataFrame([{"iteration": k, "rank": r, "bare": t} for k in range(iterations)
                         for r, t in enumerate(bare_chains(list(chains)))])
    m = m.merge(bare, on=["iteration", "rank"])
    m["vs_bare"] = m["time"] / m["bare"]
    m["bare_ratio"] = m["bare"] / m["rank"].map(dict(enumerate(paths)))
    rows = [[k, f"{g['time'].min() * 1e3:.1f}-{g['time'].max() * 1e3:.1f}",
             f"{min(paths) * 1e3:.1f}-{max(paths) * 1e3:.1f}", f"{g['ratio'].median():.4f}",
             f"{g['ratio'].max():.4f}", f"{g['bare_ratio'].median():.4f}",
             f"{g['vs_bare'].median():.4f}"] for k, g in m.groupby("iteration")]
    return (rows, float(m["ratio"].median()), float(m["ratio"].max()),
            float(m["vs_bare"].median()))


def data_parallel(iterations: int) -> tuple[list[list[object]], float]:
    n = DP.dp
    bucket = 2 * (n - 1) / n * DP.bucket_bytes * 8 / RATE
    assert bucket < DP.backward, "full overlap needs each bucket shorter than a backward"
    step = DP.layers * (DP.forward + DP.backward) + bucket
    frame = run(training_job(DP), iterations, RATE)
    times = iteration_times(frame).set_index("iteration")["time"]
    exposed = rank_metrics(frame).groupby("iteration")["exposed"].mean()
    rows = [[k, f"{times[k] * 1e3:.1f}", f"{step * 1e3:.1f}", f"{times[k] / step:.4f}",
             f"{exposed[k] * 1e3:.2f}", f"{bucket * 1e3:.2f}", f"{exposed[k] / bucket:.3f}"]
            for k in times.index]
    return rows, float(exposed.median()) / bucket


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    print(header("Step executor overhead on the loopback fabric", sys.orig_argv))
    print(f"- load average: {', '.join(f'{x:.2f}' for x in os.getloadavg())} on "
          f"{os.cpu_count()} cores\n")
    rows, ratio, worst, vs_bare = compute_only(args.iterations, args.seed)
    print(f"### Compute only: {RANKS} ranks x {NODES} nodes, durations uniform "
          f"{DURATION[0] * 1e3:g}-{DURATION[1] * 1e3:g} ms (seed {args.seed})\n")
    print(table(["iteration", "rank steps (ms)", "their critical paths (ms)",
                 "step / path, median over ranks", "max", "bare sleeps / path, median",
                 "step / bare sleeps, median"], rows))
    print(f"each rank's step / its critical path: median {ratio:.4f}, max {worst:.4f} "
          f"(target <= 1.02: {'met' if worst <= 1.02 else 'NOT met'}); / the same path slept "
          f"bare on this loop: median {vs_bare:.4f}\n")
    rows, ratio = data_parallel(args.iterations)
    print(f"### Data parallel, full overlap: dp {DP.dp}, {DP.layers} layers, one "
          f"{DP.bucket_bytes >> 10} KiB bucket each, forward {DP.forward * 1e3:g} ms, backward "
          f"{DP.backward * 1e3:g} ms per layer, each rank sending at {RATE / 1e6:g} Mbit/s\n")
    print(table(["iteration", "step (ms)", "arithmetic (ms)", "ratio", "exposed per rank (ms)",
                 "arithmetic (ms)", "ratio"], rows))
    print(f"median exposed / arithmetic: {ratio:.3f} (target within 10%: "
          f"{'met' if abs(ratio - 1) <= 0.10 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
