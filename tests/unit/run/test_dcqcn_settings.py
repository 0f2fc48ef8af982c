"""The scenario's `dcqcn` ratios: validated, carried through the agent's config file into every
RoCEv2 QP's DCQCN (the reaction point's timers and the notification point's CNP spacing), and
recorded in the run's meta."""
from __future__ import annotations

import dataclasses
import socket
from pathlib import Path

import pytest

from hostagent.protocol.rocev2 import RoceQP
from hostagent.runtime import agent, driver
from hostagent.runtime.config import AgentConfig
from testbed.errors import ScenarioError
from testbed.fabric.plan import make_plan
from testbed.run.results import RunResults
from testbed.run.traffic import agent_configs, base_rtt
from testbed.scenario.schema import parse

SCENARIO = """name: d
fabric: {host_link: {rate: 25Mbit}, fabric_link: {rate: 25Mbit}, mtu: 4200}
qp: {mss: 4096}
"""
PAPER_CNP, PAPER_TIMER, PAPER_RTT = 50e-6, 55e-6, 10e-6  # s: Zhu et al. 2015, its fabric's RTT


def _roce_qps(cfg: AgentConfig, tmp: Path, monkeypatch) -> list[RoceQP]:
    """The QPs the agent builds from `cfg` as it reads it from its file, over loopback (no
    namespaces: every plain address is ::1, the listening socket any free port)."""
    path = tmp / "agent.json"
    cfg.dump(path)
    cfg = AgentConfig.load(path)
    cfg.plain = ["::1"] * len(cfg.plain)
    cfg.peers = [dataclasses.replace(p, plain=["::1"] * len(p.plain)) for p in cfg.peers]
    listen = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    listen.bind(("::1", 0))
    monkeypatch.setattr(driver, "listen_socket", lambda: listen)
    _, peers = agent.build_qps(cfg)
    qps = []
    for entries in peers.values():
        for qp, route in entries:
            route.sock.close()
            assert isinstance(qp, RoceQP)
            qps.append(qp)
    listen.close()
    return qps


def test_the_scenario_ratios_reach_every_rocev2_qp(tmp_path, monkeypatch):
    sc = parse(SCENARIO + "dcqcn: {cnp_rtts: 1.5, timer_rtts: 7}\n", "d")
    rtt = base_rtt(sc)
    qps = _roce_qps(agent_configs(make_plan(sc), sc, "rocev2", tmp_path)["h0"], tmp_path,
                    monkeypatch)
    assert len(qps) == 3 * sc.fabric.planes  # one QP per plane to each of 3 peers
    for qp in qps:
        assert qp.cc.cfg.cnp_interval == pytest.approx(1.5 * rtt)
        assert qp.cc.cfg.period == pytest.approx(7 * rtt)
        assert qp._cnp_interval == pytest.approx(1.5 * rtt), "the receiver spaces CNPs by it"


def test_without_the_section_the_qps_run_the_papers_values_over_its_rtt(tmp_path, monkeypatch):
    sc = parse(SCENARIO, "d")
    rtt = base_rtt(sc)
    for qp in _roce_qps(agent_configs(make_plan(sc), sc, "rocev2", tmp_path)["h0"], tmp_path,
                        monkeypatch):
        assert qp.cc.cfg.cnp_interval == pytest.approx(PAPER_CNP / PAPER_RTT * rtt)
        assert qp.cc.cfg.period == pytest.approx(PAPER_TIMER / PAPER_RTT * rtt)


def test_the_run_says_which_ratios_it_ran(tmp_path):
    text = SCENARIO + "dcqcn: {cnp_rtts: 2, timer_rtts: 0.5}\n"
    sc = parse(text, "d")
    roce = RunResults(tmp_path, sc, text, 1, "rocev2")
    assert roce.meta.dcqcn == {"cnp_rtts": 2, "timer_rtts": 0.5}
    assert RunResults(tmp_path, sc, text, 1, "mrc").meta.dcqcn is None, "MRC runs no DCQCN"
    assert agent_configs(make_plan(sc), sc, "mrc", tmp_path)["h0"].dcqcn is None


@pytest.mark.parametrize("section, field, says", [
    ("{cnp_rtts: 0}", "dcqcn.cnp_rtts", "greater than or equal to 0.1"),
    ("{cnp_rtts: -5}", "dcqcn.cnp_rtts", "greater than or equal to 0.1"),
    ("{timer_rtts: 0.05}", "dcqcn.timer_rtts", "greater than or equal to 0.1"),
    ("{timer_rtts: 1000}", "dcqcn.timer_rtts", "less than or equal to 100"),
    ("{cnp_rtts: .nan}", "dcqcn.cnp_rtts", "less than or equal to 100"),
    ("{cnp_rtts: '5'}", "dcqcn.cnp_rtts", "valid number"),
    ("{timer_rtts: true}", "dcqcn.timer_rtts", "valid number"),
    ("{cnp_rts: 5}", "dcqcn.cnp_rts", "did you mean 'cnp_rtts'"),
    ("5", "dcqcn", "valid dictionary"),
])
def test_bad_ratios_are_refused_naming_the_field(section: str, field: str, says: str):
    with pytest.raises(ScenarioError) as err:
        parse(SCENARIO + f"dcqcn: {section}\n", "d.yaml")
    lines = str(err.value).splitlines()
    assert lines[0] == "d.yaml: invalid scenario (1 problem):"
    assert lines[1].startswith(f"  {field}: ") and says in lines[1]
