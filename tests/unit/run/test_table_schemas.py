"""The collected tables as the schema declares them: what the agents write fits it, and a
table that does not (a field renamed, missing or of another kind) fails its collection naming
the table and the column, before any notebook reads it."""
from __future__ import annotations

import json
import random
import socket
from pathlib import Path

import pandas as pd
import pytest

from hostagent.protocol.evs import EVPolicy, EVSet
from hostagent.protocol.mrc import MrcQP
from hostagent.protocol.qp import QPConfig
from hostagent.protocol.rocev2 import RoceQP
from hostagent.runtime import driver
from hostagent.runtime.agent import path_report
from hostagent.runtime.ev_load import EV_LOAD_COLUMNS
from runcontract import TABLES
from runcontract.table_io import TableError, _kind_problem, problems
from runcontract.tables import Column
from testbed import scenario
from testbed.fabric.plan import make_plan
from testbed.run.collect import collect
from testbed.run.traffic import AgentOutcome
from tests.unit.made_runs import qp_row

SC = scenario.parse("name: c\nworkload: {size: 1KiB, iterations: 1, warmup: 0}", "t")
CFG = QPConfig(mss=256, init_cwnd=8 * 1024, max_cwnd=32 * 1024, timeout=0.002, base_rtt=1e-3)
AGENT = {"host": "h0", "rank": 0, "job": None}


def _message(rank: int) -> dict:
    """A row of messages.json as hostagent/workloads/iterations.py MessageRecord writes it."""
    return {"rank": rank, "iteration": 0, "warmup": False, "peer": (rank + 1) % 4,
            "size": 256, "start": 10.0, "end": 10.4, "retransmits": 0, "trims": 0,
            "evs_used": [0]}


DROP = object()  # a field the agents leave out


def _collect(tmp_path: Path, change: dict | None = None) -> Path:
    """A run of SC whose agents wrote whole files, each message with `change` over it."""
    out, res = tmp_path / "agents", tmp_path / "run"
    res.mkdir()
    for rank, host in enumerate(SC.rank_hosts()):
        (out / host).mkdir(parents=True)
        (out / host / "iterations.json").write_text(json.dumps([
            {"rank": rank, "kind": "all_reduce", "iteration": 0, "warmup": False,
             "start": 10.0, "end": 10.5, "bytes": 1024, "verified": True, "error": None}]))
        message = {k: v for k, v in (_message(rank) | (change or {})).items() if v is not DROP}
        (out / host / "messages.json").write_text(json.dumps([message]))
        (out / host / "paths.json").write_text(json.dumps(
            {"qps": [qp_row("mrc", (rank + 1) % 4)]}))
    collect(out, res, [AgentOutcome(h, r, 0, {}) for r, h in enumerate(SC.rank_hosts())],
            make_plan(SC), "mrc")
    return res


def test_whole_agent_files_are_collected(tmp_path: Path):
    res = _collect(tmp_path)
    assert len(pd.read_parquet(res / "messages.parquet")) == 4


def test_an_empty_table_keeps_its_columns(tmp_path: Path):
    """No EV changed state: ev_states.parquet still has the columns a notebook reads."""
    states = pd.read_parquet(_collect(tmp_path) / "ev_states.parquet")
    assert states.empty and {"time", "old", "new", "reason", "qpn"} <= set(states.columns)


@pytest.mark.parametrize(("change", "says"), [
    ({"trims": DROP}, "messages.parquet: column 'trims' is missing"),
    ({"size": "256"}, "messages.parquet: column 'size' holds str values ('256') where the "
                      "schema says int"),
    ({"start": None}, "messages.parquet: column 'start' has 4 null values"),
    ({"trims": DROP, "trimmed": 0}, "messages.parquet: column 'trims' is missing; column "
                                    "'trimmed' is not in the schema"),
])
def test_a_table_that_does_not_fit_fails_its_collection(tmp_path: Path, change: dict,
                                                        says: str):
    with pytest.raises(TableError) as info:
        _collect(tmp_path, change)
    assert says in str(info.value)


def _rows(report: dict[str, list[dict]], key: str, transport: str) -> pd.DataFrame:
    return pd.DataFrame([{**AGENT, "transport": transport, **r} for r in report[key]])


def test_what_an_agent_reports_of_its_qps_evs_and_ev_states_fits_the_schema():
    """path_report's rows of a real MRC QP (one EV denied: a state change) and RoCEv2 QP;
    collect adds the agent's columns and, to RoCEv2 QPs, the spine the runner probed."""
    evset = EVSet.build([(0, 0), (1, 1)], EVPolicy(), random.Random(0))
    evset.deny(1, 0.5)
    mrc = MrcQP(1, 2, memoryview(bytearray(1 << 16)), CFG, evset, 0)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        route = driver.Route(sock, {0: ("127.0.0.1", 4791)}, {0: 1})
        roce = RoceQP(3, 4, memoryview(bytearray(1 << 16)), CFG, 0)
        mrc_report = path_report({1: [(mrc, route)]}, 100.0)
        roce_report = path_report({1: [(roce, route)]}, 100.0)
    evs = _rows(mrc_report, "evs", "mrc").assign(spine=[0, None])
    roce_qps = _rows(roce_report, "qps", "rocev2").assign(spine=[2])
    for name, frame, transport in (("qps", _rows(mrc_report, "qps", "mrc"), "mrc"),
                                   ("qps", roce_qps, "rocev2"), ("paths", evs, "mrc"),
                                   ("ev_states", _rows(mrc_report, "transitions", "mrc"),
                                    "mrc")):
        assert not frame.empty
        assert [str(p) for p in problems(TABLES[name], frame, (transport,))] == [], name


def test_the_ev_load_sampler_columns_are_declared():
    declared = TABLES["ev_load"].names()
    assert set(EV_LOAD_COLUMNS) <= set(declared)
    assert set(declared) - set(EV_LOAD_COLUMNS) == {"host", "rank", "transport", "job", "spine"}


def test_rocev2_qps_the_runner_did_not_probe_have_no_spine(tmp_path: Path):
    """The runner probes the spine of a RoCEv2 QP that sent data only: the others' rows (all
    of them, when no QP sent any) still have the column, null."""
    out, res = tmp_path / "agents", tmp_path / "run"
    res.mkdir()
    for rank, host in enumerate(SC.rank_hosts()):
        (out / host).mkdir(parents=True)
        (out / host / "paths.json").write_text(json.dumps(
            {"qps": [qp_row("rocev2", (rank + 1) % 4) | {"data_sent": 0}]}))
    failed = {"status": "failed", "error": "boom"}
    collect(out, res, [AgentOutcome(h, r, 1, failed) for r, h in enumerate(SC.rank_hosts())],
            make_plan(SC), "rocev2")
    qps = pd.read_parquet(res / "qps.parquet")
    assert len(qps) == 4 and qps["spine"].isna().all()
    iterations = pd.read_parquet(res / "iterations.parquet")
    assert iterations["start"].isna().all() and iterations["error"].str.startswith(
        "not completed").all()


@pytest.mark.parametrize(("values", "kind", "nullable", "fits"), [
    ([1.0, float("nan")], "int", True, True),  # a nullable int, as pandas stores it
    ([1.5, 2.0], "int", False, False),
    ([True, False], "int", False, False),  # a bool is no count
    ([1, 2], "float", False, True),
    ([None, None], "float", True, True),  # all null: fits any nullable kind
    (['{"rate": 1}', "{}"], "json", False, True),
    (["{rate: 1}"], "json", False, False),
    ([[1, 2], []], "list", False, True),
    (["0, 1"], "list", False, False),
    ([1, 0], "bool", False, False),
])
def test_kinds(values: list, kind: str, nullable: bool, fits: bool):
    column = Column("c", kind, "", nullable=nullable)
    assert (_kind_problem(column, pd.Series(values)) is None) == fits
