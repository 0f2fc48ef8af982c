"""Background traffic with real iperf3 on the timeline: each flow an iperf3 server on its
receiver and a client on its sender, started at its time after the workload starts and stopped
by its own duration (or when the workload ends). Each iperf3 runs on the machine holding its
host (in the cluster mode, spawned by that server's agent, its report written there and
gathered back when the flows end). Every flow's iperf3 JSON report is kept in the results,
and read back: a flow counts as run only if its client's report has an `end` and no `error`
(a spawned iperf3 that could not connect is not traffic), and the windows a report shades
are the spans the flows that ran covered, not the schedule.
"""
from __future__ import annotations

import json
import subprocess
import threading
import time
from dataclasses import asdict
from pathlib import Path

from runcontract import BackgroundWindow
from testbed.lifecycle.cleanup import end_process
from testbed.scenario.background import Flow

SERVER_LEAD = 0.3  # s an iperf3 server needs to listen before its client connects


INTERRUPTED = "interrupt - the client has terminated"  # iperf3 3.x, ended by a signal


class BackgroundTraffic:
    """Starts the flows on the timeline (a thread), ends them, keeps their reports."""

    def __init__(self, network, flow_list: list[Flow], out: Path) -> None:
        self.network = network
        self.flows = flow_list
        self.out = out
        self.procs: list[subprocess.Popen] = []
        self.reports: list[tuple[str, Path]] = []  # (host, its report in the results)
        self.started: dict[int, float] = {}  # flow index -> wall-clock start of its client
        self.outcomes: list[dict] = []  # per flow, after stop(): what iperf3 says it did
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, t0: float) -> None:
        if not self.flows:
            return
        self.out.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._run, args=(t0,), name="background",
                                        daemon=True)
        self._thread.start()

    def _popen(self, host: str, args: list[str], report: Path) -> None:
        self.procs.append(self.network.spawn(host, f"iperf3-{report.stem}", ["iperf3", *args],
                                             self.network.node_path(host, report)))
        self.reports.append((host, report))

    def _run(self, t0: float) -> None:
        """Each server SERVER_LEAD ahead of its client, and every client at least that long
        after its own server was spawned: flows that start together get all their servers
        first (a client spawned before its server listens fails to connect)."""
        plan = self.network.plan
        steps = sorted([(f.start - SERVER_LEAD, 0, f) for f in self.flows]
                       + [(f.start, 1, f) for f in self.flows],
                       key=lambda step: (step[0], step[1], step[2].index))
        spawned: dict[int, float] = {}
        for when, is_client, flow in steps:
            at = t0 + when if not is_client else max(t0 + when,
                                                     spawned[flow.index] + SERVER_LEAD)
            if self._stop.wait(max(0.0, at - time.time())):
                return
            dst = str(plan.plain_address(flow.dst, flow.plane))
            if not is_client:
                self._popen(flow.dst, ["-s", "-1", "-J", "-B", dst, "-p", str(flow.port)],
                            self.out / f"flow{flow.index}-server.json")
                spawned[flow.index] = time.time()
                continue
            src = str(plan.plain_address(flow.src, flow.plane))
            args = ["-c", dst, "-B", src, "-p", str(flow.port), "-J",
                    "-t", f"{flow.duration:g}"]
            if flow.kind == "udp":
                args += ["-u", "-b", str(flow.rate)]
            elif flow.rate is not None:
                args += ["-b", str(flow.rate)]
            self._popen(flow.src, args, self.out / f"flow{flow.index}-client.json")
            self.started[flow.index] = time.time()

    def stop(self) -> None:
        """At the end of the workload: flows still running are ended (their reports say so).
        `flows.json` lists every flow with its scheduled and actual start."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        deadline = time.time() + 2  # clients about to finish their duration may do so
        # clients first: a client whose server ended first reports the server's end, not what
        # it sent; a client ended (SIGTERM) writes its report, what it sent so far included
        ordered = sorted(zip(self.procs, self.reports, strict=True),
                         key=lambda pr: not pr[1][1].stem.endswith("-client"))
        for proc, _ in ordered:
            try:
                proc.wait(max(0.0, deadline - time.time()))
            except subprocess.TimeoutExpired:
                end_process(proc)
        for host, report in self.reports:
            self.network.fetch(host, self.network.node_path(host, report), report)
        if self.flows:
            self.outcomes = [self._outcome(f) for f in self.flows]
            self.out.mkdir(parents=True, exist_ok=True)  # a run stopped before the timeline
            (self.out / "flows.json").write_text(json.dumps(self.outcomes, indent=1))

    def _outcome(self, flow: Flow) -> dict:
        """What the flow's client reported: ran (with its seconds and bytes) or why not."""
        out = {**asdict(flow), "started": self.started.get(flow.index), "ran": False,
               "seconds": None, "bytes": None, "error": None}
        if out["started"] is None:
            return out | {"error": "not started (the workload ended first)"}
        try:
            report = json.loads((self.out / f"flow{flow.index}-client.json").read_text())
            error = report.get("error")
            sent = (report.get("end") or {}).get("sum_sent" if flow.kind == "tcp" else "sum")
            if error and not (INTERRUPTED in error and sent and sent.get("bytes")):
                raise ValueError(error)
            if sent is None:
                raise ValueError("a report without its sums")
            return out | {"ran": True, "seconds": float(sent["seconds"]),
                          "bytes": int(sent["bytes"]),
                          "cut_short": bool(error)}  # ended with the workload, before its time
        except (OSError, ValueError, KeyError, TypeError) as exc:
            return out | {"error": f"iperf3: {exc}"[:300]}

    def summary(self) -> dict:
        failed = [o for o in self.outcomes if not o["ran"]]
        return {"flows": len(self.flows), "started": len(self.started),
                "ran": len(self.outcomes) - len(failed),
                "failed": [f"flow {o['index']} {o['src']}->{o['dst']}: {o['error']}"
                           for o in failed[:5]]}

    def windows(self, t0: float, scheduled: list[BackgroundWindow]) -> list[BackgroundWindow]:
        """Per pattern, from the first start to the last end of its flows that ran (s after
        `t0`); a pattern none of whose flows ran has no window."""
        out = []
        for k, window in enumerate(scheduled):
            ran = [o for o in self.outcomes if o["pattern"] == k and o["ran"]]
            if ran:
                start = min(o["started"] - t0 for o in ran)
                end = max(o["started"] - t0 + o["seconds"] for o in ran)
                out.append(BackgroundWindow(window.pattern, window.protocol, window.plane,
                                            round(start, 3), round(end, 3)))
        return out
