"""`workload.training`: a built-in parallel training step instead of one looped collective.

The fields are hostagent/workloads/training.py's TrainingSpec, with sizes as the scenario
writes them ('1MiB') and times in seconds of the real job: with fabric.real_rate the agents
stretch compute by the time-dilation factor, so compute keeps its ratio to communication.
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from hostagent.workloads.graph import MAX_BYTES, MAX_DURATION, GraphError
from hostagent.workloads.training import TrainingSpec
from testbed.scenario.units import SizeIn, TimeIn

MAX_DEGREE = 1024
MAX_LAYERS = 1024
MAX_MICRO_BATCHES = 256

Bytes = Annotated[int, SizeIn(4, MAX_BYTES)]
Seconds = Annotated[float, TimeIn(0, MAX_DURATION)]
Degree = Annotated[int, Field(ge=1, le=MAX_DEGREE)]


class Training(BaseModel):
    """dp x tp x pp ranks (ep divides dp), placed on the workload's ranks in order."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    dp: Degree = 1
    tp: Degree = 1
    pp: Degree = 1
    ep: Degree = Field(1, description="expert parallel degree, carved out of dp (MoE)")
    layers: int = Field(4, ge=1, le=MAX_LAYERS, description="layers of the whole model")
    layer_bytes: Bytes = Field(1 << 20, description="gradient bytes of one layer")
    activation_bytes: Bytes = Field(1 << 16, description="one micro-batch's activation")
    expert_bytes: Bytes = Field(1 << 16, description="one MoE all-to-all's array per rank")
    moe_every: int = Field(0, ge=0, le=MAX_LAYERS, description="every n-th layer is MoE (0: none)")
    micro_batches: int = Field(2, ge=1, le=MAX_MICRO_BATCHES)
    forward: Seconds = Field(0.001, description="compute per layer and micro-batch (the real "
                                                "job's: stretched by the time dilation)")
    backward: Seconds = Field(0.002, description="compute per layer and micro-batch (the real "
                                                 "job's: stretched by the time dilation)")
    bucket_bytes: Bytes = Field(25 << 20, description="DP gradient bucket (DDP's default)")
    schedule: Literal["1f1b", "gpipe"] = "1f1b"

    def spec(self) -> TrainingSpec:
        return TrainingSpec(**self.model_dump())


def check(training: Training, ranks: int) -> None:
    """The step fits the ranks and is well formed (a ValueError naming the field)."""
    if training.dp * training.tp * training.pp != ranks:
        raise ValueError(f"workload.training: dp x tp x pp = {training.dp} x {training.tp} x "
                         f"{training.pp} = {training.dp * training.tp * training.pp}, but the "
                         f"workload has {ranks} ranks")
    try:
        training.spec().check()
    except GraphError as exc:
        raise ValueError(f"workload.{exc}") from None
