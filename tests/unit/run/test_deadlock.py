"""A training step that deadlocks anyway (a receive no rank sends to, slipped past the static
checks by plans made by hand): each agent ends at its timeout with the nodes it was waiting
in, in its result.json, and the runner's message (waiting.stuck) names the waiting rank, its
node and the rank it waits on, and what that rank was doing. The agents run for real
(hostagent/runtime/agent.py host_main, both on one event loop as the pooled mode runs them),
their transport swapped for the in-memory loopback fabric: no root, no sockets."""
from __future__ import annotations

import asyncio
import json
import time

from hostagent.protocol.evs import EVPolicy
from hostagent.protocol.qp import QPConfig
from hostagent.runtime import agent
from hostagent.runtime.config import AgentConfig, PeerConfig, WorkloadConfig
from hostagent.workloads.graph import Graph, Node, RankPlan
from hostagent.workloads.loopback import LoopbackEndpoint, LoopbackFabric
from testbed.run.waiting import stuck

TIMEOUT = 1.0  # s: the agents' bound on the workload (and on lingering for peers)


class _Driver:
    """What the agent needs of a driver, over a loopback endpoint."""

    wall_offset = 0.0

    def __init__(self, endpoint: LoopbackEndpoint) -> None:
        self._endpoint = endpoint
        self.rank, self.world = endpoint.rank, endpoint.world
        self.register, self.write = endpoint.register, endpoint.write
        self.wait_imm = endpoint.wait_imm

    def close(self) -> None:
        pass


def _plan(rank: int) -> RankPlan:
    """Rank 0 computes, then receives from rank 1; rank 1 computes and sends nothing."""
    nodes = (Node(0, "compute", "fwd mb0", duration=0.01),) + (
        (Node(1, "recv", "bwd mb0 recv grad", bytes=16, peer=1, data_deps=(0,)),)
        if rank == 0 else ())
    return RankPlan(2, {}, {}, {(1, 0): 4}, Graph(rank, nodes))


def test_a_deadlocked_step_ends_naming_the_waiting_rank_its_node_and_the_peer(tmp_path,
                                                                              monkeypatch):
    fabric = LoopbackFabric(2)
    monkeypatch.setattr(agent, "build_qps", lambda cfg: (None, {}))
    monkeypatch.setattr(agent.driver, "Driver",
                        lambda rank, *a, **kw: _Driver(fabric.endpoint(rank)))
    start = tmp_path / "start"
    start.write_text(repr(time.time()))
    configs = []
    for rank in (0, 1):
        (tmp_path / f"h{rank}").mkdir()
        configs.append(AgentConfig(
            rank=rank, world=2, host=f"h{rank}", transport="mrc", plain=[],
            peers=[PeerConfig(1 - rank, f"h{1 - rank}", [], [], [])], qps_per_peer=1,
            qp=QPConfig(), mrc=EVPolicy(), seed=1, start_file=str(start),
            out_dir=str(tmp_path / f"h{rank}"), timeout=TIMEOUT,
            workload=WorkloadConfig("all_reduce", 0, 1, 0, steps=_plan(rank).to_dict())))

    async def both() -> list[dict]:
        return await asyncio.gather(*(agent.host_main(c) for c in configs))
    t = time.monotonic()
    asyncio.run(both())
    assert time.monotonic() - t < TIMEOUT + 3, "the agents end at their timeout"
    results = {r: json.loads((tmp_path / f"h{r}" / "result.json").read_text()) for r in (0, 1)}
    assert results[0]["status"] == "failed" and results[1]["status"] == "ok"
    (wait,) = results[0]["waiting"]
    assert (wait["node"], wait["kind"], wait["peer"], wait["on"]) == (1, "recv", 1, [1])
    assert "waiting" not in results[1]
    message = stuck(results)
    assert message == ("the step never ended: rank 0 (h0) waited in iteration 0, node 1 "
                       "(bwd mb0 recv grad): a receive from rank 1 (h1); rank 1 (h1) had "
                       "ended its iterations")


def test_no_message_when_no_rank_waited():
    assert stuck({0: {"host": "h0", "status": "ok"}, 1: {"host": "h1", "status": "failed",
                                                         "error": "transport failed"}}) is None


def test_waits_on_a_collective_say_what_each_member_was_doing():
    def wait(rank, node, name, group):
        return {"rank": rank, "iteration": 2, "node": node, "name": name, "kind": "collective",
                "collective": "all_reduce", "group": group, "peer": None,
                "on": [m for m in (0, 1, 2) if m != rank]}
    results = {0: {"host": "h0", "status": "stopped", "waiting": [wait(0, 7, "dp b0", "dp")]},
               1: {"host": "h1", "status": "stopped",
                   "waiting": [wait(1, 9, "tp rs", "tp")]},
               2: {"host": "h2", "status": "stopped", "waiting": []}}
    message = stuck(results) or ""
    assert ("rank 0 (h0) waited in iteration 2, node 7 (dp b0): all_reduce on group dp; "
            "rank 1 (h1) was in node 9 (tp rs), rank 2 (h2) waited in no communication"
            ) in message
    assert "rank 1 (h1) waited in iteration 2, node 9 (tp rs)" in message
