"""A pooled process (hostagent/runtime/pooled.py: several hosts on one event loop) in which one
host's
RoCEv2 QP fails: that host's collective fails, and its result.json must say so at once, so that
the runner (testbed/run/traffic.py IterationWatch.failed) ends the run. The other host, waiting
for data that will never come, is stopped as the runner stops it: SIGTERM to the process.

Two hosts over loopback UDP (no root, no namespaces). h0's QP to h1 sends to a port nobody
listens on, with a retry budget of 2 timeouts, so it fails in a few tens of milliseconds; h1's QP
to h0 works (but h0's ACKs are lost too, so h1 retries, forever in its settings). Before the
fix, the failed host waited up to 30 s (agent.LINGER_MAX) for its peers to be done, which they
never are, before writing its result: the runner waited with it. And the SIGTERM then ended
the process in a CancelledError from its gather instead of every host's result."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import time
from pathlib import Path

from hostagent import compiled
from hostagent.protocol.dcqcn import REFERENCE_RTT
from hostagent.protocol.evs import EVPolicy
from hostagent.protocol.qp import QPConfig
from hostagent.protocol.rocev2 import RoceQP
from hostagent.runtime import agent, driver
from hostagent.runtime import pooled as multi
from hostagent.runtime.config import AgentConfig, PeerConfig, WorkloadConfig

QP = QPConfig(mss=512, timeout=0.005, linear_cnt=1, exp_cnt=0,
              base_rtt=REFERENCE_RTT)  # fails at the 2nd timeout
# h1's: its data is never acknowledged (h0's ACKs are lost with h0's data), and it keeps
# retrying until the runner stops it
FOREVER = QPConfig(mss=512, timeout=0.005, linear_cnt=1, exp_cnt=25, base_rtt=REFERENCE_RTT)
PROMPT = 5.0  # s: far below LINGER_MAX, far above the QP's 2 timeouts


def _udp(port: int = 0) -> socket.socket:
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.bind(("::1", port))
    s.setblocking(False)
    return s


def _configs(tmp: Path) -> list[AgentConfig]:
    start = tmp / "start"
    start.write_text(repr(time.time()))
    out = []
    for rank, host in enumerate(("h0", "h1")):
        (tmp / host).mkdir()
        peer = PeerConfig(1 - rank, f"h{1 - rank}", [], ["::1"], [])
        out.append(AgentConfig(
            rank=rank, world=2, host=host, transport="rocev2", plain=["::1"], peers=[peer],
            qps_per_peer=1, qp=QP if rank == 0 else FOREVER, mrc=EVPolicy(), seed=1,
            start_file=str(start), out_dir=str(tmp / host), timeout=60.0,
            workload=WorkloadConfig("all_reduce", 64 * 1024, 3, 0)))
    return out


def _loopback_qps(monkeypatch) -> None:
    """build_qps over loopback: h1 reaches h0's listening port, h0 reaches a closed one."""
    listens = {rank: _udp() for rank in (0, 1)}
    for s in listens.values():
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVTCLASS, 1)
    closed = _udp()
    dead = closed.getsockname()[1]
    closed.close()  # nothing listens there now: what h0 sends to h1 is lost

    def build(cfg: AgentConfig):
        peer = 1 - cfg.rank
        ours, theirs = driver.qpn(cfg.rank, peer, 0)
        qp = RoceQP(ours, theirs, memoryview(bytearray(0)), cfg.qp, seed=cfg.rank)
        to = ("::1", dead if cfg.rank == 0 else listens[peer].getsockname()[1])
        route = driver.Route(driver.ecn_socket(_udp()), {0: to}, {0: 0})
        return listens[cfg.rank], {peer: [(qp, route)]}
    monkeypatch.setattr(agent, "build_qps", build)


def test_a_host_whose_qp_failed_says_so_at_once_and_sigterm_stops_the_rest(tmp_path,
                                                                           monkeypatch):
    _loopback_qps(monkeypatch)
    configs = _configs(tmp_path)
    failed_after: list[float] = []

    async def runner() -> list[dict]:
        """What the runner does to a pooled process: watch results, SIGTERM on a failure."""
        serving = asyncio.ensure_future(agent.stop_on_signal(multi.serve(
            [(c, None) for c in configs])))
        t0 = time.monotonic()
        h0 = tmp_path / "h0" / "result.json"
        while not h0.exists() and time.monotonic() - t0 < 40 and not serving.done():
            await asyncio.sleep(0.01)
        failed_after.append(time.monotonic() - t0)
        os.kill(os.getpid(), signal.SIGTERM)  # handled by stop_on_signal's loop handler
        return await asyncio.wait_for(serving, PROMPT)

    results = asyncio.run(runner())
    assert failed_after[0] < PROMPT, f"h0's result came {failed_after[0]:.1f} s after the start"
    h0, h1 = (json.loads((tmp_path / h / "result.json").read_text()) for h in ("h0", "h1"))
    assert h0["status"] == "failed" and "transport failed" in h0["error"]
    assert h1["status"] == "stopped", "h1 waited for h0 until the runner stopped it"
    assert [r["status"] for r in results] == ["failed", "stopped"], "serve returns every host"
    for r in (h0, h1):  # what the runner records of the process, however its hosts ended
        assert r["protocol"] == compiled.BUILD, "the build this process imported"
        assert r["cpu"]["user_s"] + r["cpu"]["system_s"] == r["cpu_s"]
        now = os.times()
        assert 0 < r["cpu"]["user_s"] <= now.user and 0 <= r["cpu"]["system_s"] <= now.system
