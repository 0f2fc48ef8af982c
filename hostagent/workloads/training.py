"""Built-in training steps: data x tensor x pipeline (x expert) parallel graphs from a few numbers.

Ranks: rank = (stage x dp + d) x tp + t (Megatron's order: tensor parallel fastest, then data,
then pipeline), placed on `hosts[rank]`, so a TP group takes consecutive hosts (one leaf when
hosts are listed leaf by leaf). Expert parallel is carved out of data parallel: the EP group of
a rank is the `ep` consecutive DP ranks of its block, with the same t and stage.

Per micro-batch and layer of a stage, forward: with tp > 1 an all-gather of the activation
inside the TP group, the layer's compute, a reduce-scatter (Megatron with sequence parallelism);
an MoE layer (every `moe_every`-th, with ep > 1) adds an all-to-all dispatch before its compute
and an all-to-all combine after. Backward mirrors it, layers in reverse. A stage receives its
input activation from the previous stage and sends its output to the next (forward), and the
gradients the other way (backward); each message is a TP rank's share of the activation.
Compute on a rank is serialized in schedule order (one compute stream), collectives of the
TP and EP groups are on its path, sends and receives are not: they wait on their own.

Schedules: "1f1b" (PipeDream-flush: stage s runs min(pp - s - 1, micro-batches) forwards, then
alternates one forward and one backward, then the remaining backwards) or "gpipe" (every
forward, then every backward, micro-batches in order both times).

Data parallel: during the last micro-batch's backward, gradients are all-reduced in buckets
over the DP group, last layer first (PyTorch DDP's order): a bucket closes once it holds
`bucket_bytes` or the stage's first layer, and its all-reduce starts when the backward compute
of its earliest layer is done, overlapping the rest of the backward. A rank holds 1/tp of each
layer's gradient. Expert weights are reduced with the rest over the whole DP group (the
expert-data-parallel group of a real MoE job is not modelled apart).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from hostagent.workloads.collectives import DTYPE, Kind
from hostagent.workloads.graph import Graph, GraphError, Job, Node, NodeKind

Schedule = Literal["1f1b", "gpipe"]


@dataclass(frozen=True)
class TrainingSpec:
    dp: int = 1
    tp: int = 1
    pp: int = 1
    ep: int = 1
    layers: int = 4  # in the whole model; each of the pp stages holds layers / pp
    layer_bytes: int = 1 << 20  # gradient bytes of one layer (all its TP shards together)
    activation_bytes: int = 1 << 16  # one micro-batch's activation at a layer boundary
    expert_bytes: int = 1 << 16  # one MoE all-to-all's whole array, per rank
    moe_every: int = 0  # every n-th layer is an MoE layer (0: none)
    micro_batches: int = 2
    forward: float = 0.001  # s of compute per layer and micro-batch, forward
    backward: float = 0.002  # and backward
    bucket_bytes: int = 25 << 20  # PyTorch DDP's default bucket
    schedule: Schedule = "1f1b"

    @property
    def world(self) -> int:
        return self.dp * self.tp * self.pp

    def check(self) -> None:
        for name in ("dp", "tp", "pp", "ep", "layers", "micro_batches"):
            if getattr(self, name) < 1:
                raise GraphError(f"training.{name} must be at least 1, not {getattr(self, name)}")
        if self.layers % self.pp:
            raise GraphError(f"training.layers {self.layers} is not a multiple of pp {self.pp}")
        if self.dp % self.ep:
            raise GraphError(f"training.ep {self.ep} does not divide dp {self.dp}")
        if self.schedule not in ("1f1b", "gpipe"):
            raise GraphError(f"training.schedule {self.schedule!r} is not 1f1b or gpipe")
        for name in ("layer_bytes", "activation_bytes", "expert_bytes", "bucket_bytes"):
            if getattr(self, name) < DTYPE.itemsize:
                raise GraphError(f"training.{name} must be at least {DTYPE.itemsize} B")

    def coords(self, rank: int) -> dict[str, int]:
        """A rank's place: its data, tensor, pipeline and expert indexes."""
        t, rest = rank % self.tp, rank // self.tp
        d, stage = rest % self.dp, rest // self.dp
        return {"dp": d, "tp": t, "pp": stage, "ep": d % self.ep}

    def rank(self, d: int, t: int, stage: int) -> int:
        return (stage * self.dp + d) * self.tp + t


def _elements(nbytes: int) -> int:
    """A size rounded down to whole float32 elements, at least one."""
    return max(DTYPE.itemsize, nbytes - nbytes % DTYPE.itemsize)


def groups(spec: TrainingSpec) -> dict[str, tuple[int, ...]]:
    """Named groups: tp<d>.<s>, dp<t>.<s>, ep<block>.<t>.<s> (groups of one rank are left out:
    nothing of theirs crosses a link)."""
    out: dict[str, tuple[int, ...]] = {}
    for s in range(spec.pp):
        for d in range(spec.dp):
            if spec.tp > 1:
                out[f"tp{d}.{s}"] = tuple(spec.rank(d, t, s) for t in range(spec.tp))
        for t in range(spec.tp):
            if spec.dp > 1:
                out[f"dp{t}.{s}"] = tuple(spec.rank(d, t, s) for d in range(spec.dp))
            if spec.ep > 1 and spec.moe_every:
                for b in range(spec.dp // spec.ep):
                    out[f"ep{b}.{t}.{s}"] = tuple(spec.rank(b * spec.ep + e, t, s)
                                                  for e in range(spec.ep))
    return out


class _Builder:
    """One rank's nodes in schedule order, compute chained on one stream."""

    def __init__(self, spec: TrainingSpec, rank: int) -> None:
        self.spec, self.rank = spec, rank
        c = spec.coords(rank)
        self.d, self.t, self.stage = c["dp"], c["tp"], c["pp"]
        self.tp = f"tp{self.d}.{self.stage}" if spec.tp > 1 else None
        self.dp = f"dp{self.t}.{self.stage}" if spec.dp > 1 else None
        self.ep = (f"ep{self.d // spec.ep}.{self.t}.{self.stage}"
                   if spec.ep > 1 and spec.moe_every else None)
        self.nodes: list[Node] = []
        self.last_compute: int | None = None
        per_stage = spec.layers // spec.pp
        self.layers = range(self.stage * per_stage, (self.stage + 1) * per_stage)
        self.message = _elements(spec.activation_bytes // spec.tp)

    def add(self, kind: NodeKind, name: str, deps: tuple[int | None, ...] = (),
            **fields: Any) -> int:
        nid = len(self.nodes)
        self.nodes.append(Node(nid, kind, name, data_deps=tuple(d for d in deps if d is not None),
                               **fields))
        return nid

    def collective(self, kind: Kind, group: str, nbytes: int, name: str, dep: int | None) -> int:
        return self.add("collective", name, (dep,), collective=kind, group=group,
                        bytes=_elements(nbytes))

    def compute(self, name: str, seconds: float, dep: int | None) -> int:
        nid = self.add("compute", name, (dep, self.last_compute), duration=seconds)
        self.last_compute = nid
        return nid

    def layer(self, layer: int, mb: int, phase: str, dep: int | None) -> int:
        """One layer of one micro-batch: TP gather, (MoE dispatch,) compute, (combine,) TP
        scatter; the last node's id."""
        spec, tag = self.spec, f"{phase} mb{mb} L{layer}"
        moe = self.ep is not None and (layer + 1) % spec.moe_every == 0
        if self.tp:
            dep = self.collective("all_gather", self.tp, spec.activation_bytes, f"{tag} tp-ag",
                                  dep)
        if moe and self.ep:
            dep = self.collective("all_to_all", self.ep, spec.expert_bytes, f"{tag} ep-dispatch",
                                  dep)
        dep = self.compute(tag, spec.forward if phase == "fwd" else spec.backward, dep)
        if moe and self.ep:
            dep = self.collective("all_to_all", self.ep, spec.expert_bytes, f"{tag} ep-combine",
                                  dep)
        if self.tp:
            dep = self.collective("reduce_scatter", self.tp, spec.activation_bytes,
                                  f"{tag} tp-rs", dep)
        return dep

    def forward(self, mb: int) -> None:
        spec, dep = self.spec, None
        if self.stage > 0:
            dep = self.add("recv", f"fwd mb{mb} recv act", bytes=self.message, group="pp",
                           peer=spec.rank(self.d, self.t, self.stage - 1))
        for layer in self.layers:
            dep = self.layer(layer, mb, "fwd", dep)
        if self.stage < spec.pp - 1:
            self.add("send", f"fwd mb{mb} send act", (dep,), bytes=self.message, group="pp",
                     peer=spec.rank(self.d, self.t, self.stage + 1))

    def backward(self, mb: int, last: bool) -> None:
        spec, dep = self.spec, None
        if self.stage < spec.pp - 1:
            dep = self.add("recv", f"bwd mb{mb} recv grad", bytes=self.message, group="pp",
                           peer=spec.rank(self.d, self.t, self.stage + 1))
        bucket, filled = 0, 0
        share = _elements(spec.layer_bytes // spec.tp)
        for layer in reversed(self.layers):
            dep = self.layer(layer, mb, "bwd", dep)
            if not (last and self.dp):
                continue
            filled += share
            if filled >= spec.bucket_bytes or layer == self.layers[0]:
                self.collective("all_reduce", self.dp, filled, f"dp bucket{bucket}",
                                self.last_compute)
                bucket, filled = bucket + 1, 0
        if self.stage > 0:
            self.add("send", f"bwd mb{mb} send grad", (dep,), bytes=self.message, group="pp",
                     peer=spec.rank(self.d, self.t, self.stage - 1))

    def build(self) -> Graph:
        spec, m = self.spec, self.spec.micro_batches
        if spec.schedule == "gpipe":
            order = [("f", k) for k in range(m)] + [("b", k) for k in range(m)]
        else:
            warm = min(spec.pp - self.stage - 1, m)
            order = [("f", k) for k in range(warm)]
            for k in range(m - warm):
                order += [("f", warm + k), ("b", k)]
            order += [("b", k) for k in range(m - warm, m)]
        for phase, mb in order:
            if phase == "f":
                self.forward(mb)
            else:
                self.backward(mb, last=mb == m - 1)
        return Graph(self.rank, tuple(self.nodes))


def training_job(spec: TrainingSpec, hosts: list[str] | tuple[str, ...] = ()) -> Job:
    """Every rank's step graph for `spec`, placed on `hosts` (rank r on hosts[r]), validated."""
    spec.check()
    if hosts and len(hosts) != spec.world:
        raise GraphError(f"dp x tp x pp = {spec.world} ranks, but {len(hosts)} hosts")
    graphs = tuple(_Builder(spec, r).build() for r in range(spec.world))
    meta = {"schedule": spec.schedule,
            "coords": [spec.coords(r) for r in range(spec.world)]}
    return Job(spec.world, groups(spec), graphs, tuple(hosts), meta).validate()
