"""The packet budget's cache: per machine, kernel and agent code; stale or unreadable caches
are measured again, each with the reason said."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest

from testbed.emulation import calibration


@pytest.fixture
def cache(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setattr(calibration, "CACHE_DIR", tmp_path)
    return tmp_path


def test_numbers_of_a_measurement():
    # 2.0 s of agent CPU and 0.3 s of softirq for 20,000 packets over 3 links each:
    # 100 us and 15 us / 3 = 5 us per link
    c = calibration.from_measurement(2.0, 0.3, 20_000, 5.0, 3.0)
    assert c.agent_s == pytest.approx(100e-6)
    assert c.kernel_s_per_link == pytest.approx(5e-6)
    assert c.cost().agent_s == c.agent_s and c.method == calibration.METHOD
    with pytest.raises(ValueError, match="nothing to measure"):
        calibration.from_measurement(1.0, 0.1, 0, 5.0, 3.0)


def test_cache_round_trip_and_staleness(cache: Path, monkeypatch):
    found, why = calibration.cached()
    assert found is None and "no calibration of this machine and kernel" in why
    c = calibration.from_measurement(2.0, 0.3, 20_000, 5.0, 3.0)
    path = calibration.save(c)
    assert path.parent == cache and calibration.machine_id() in path.name
    again, why = calibration.cached()
    assert again == c and str(path) in why
    monkeypatch.setattr(calibration, "agent_code", lambda: "other")
    stale, why = calibration.cached()
    assert stale is None and "other agent code" in why
    path.write_text("{not json")
    broken, why = calibration.cached()
    assert broken is None and "unreadable" in why


def _cpu(user: float, system: float) -> dict[str, float]:
    return {"user_s": user, "system_s": system}


def test_agents_cpu_counts_a_pooled_process_once():
    results = [{"pid": 1, "cpu_start_s": 1.0, "cpu_s": 3.0,   # pooled process 1, host a
                "cpu_start": _cpu(1.0, 0.0), "cpu": _cpu(2.0, 1.0)},
               {"pid": 1, "cpu_start_s": 1.5, "cpu_s": 4.0,   # the same process, host b
                "cpu_start": _cpu(1.5, 0.0), "cpu": _cpu(3.0, 1.0)},
               {"pid": 2, "cpu_start_s": 0.5, "cpu_s": 1.5,
                "cpu_start": _cpu(0.5, 0.0), "cpu": _cpu(1.0, 0.5)}]
    assert calibration.agents_cpu(results) == pytest.approx((4.0 - 1.0) + (1.5 - 0.5))
    assert calibration.agents_cpu_split(results) == pytest.approx((2.0 + 0.5, 1.0 + 0.5))
    older = [{k: v for k, v in r.items() if k in ("pid", "cpu_s", "cpu_start_s")}
             for r in results]  # agents that report the sum only
    assert calibration.agents_cpu(older) == pytest.approx(4.0)
    assert calibration.agents_cpu_split(older) is None
    assert asdict(calibration.from_measurement(1, 0, 1, 1, 1))["agent_code"]


def test_the_user_part_is_kept_and_said():
    c = calibration.from_measurement(2.0, 0.3, 20_000, 5.0, 3.0, agent_user_s=1.2)
    assert c.agent_user_s == pytest.approx(60e-6)
    assert "agents 100.0 us (60.0 us user) + kernel 5.0 us per link" in c.line()
    assert "user" not in calibration.from_measurement(2.0, 0.3, 20_000, 5.0, 3.0).line()


def test_the_agent_code_digest_covers_subpackages_and_the_protocol_build(tmp_path: Path):
    """A calibration measured with other protocol or C extension code, or with the compiled
    build instead of the sources, is stale: the agents' per-packet cost is what it measured."""
    (tmp_path / "protocol").mkdir()
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "protocol" / "mrc.py").write_text("WINDOW = 1\n")
    first = calibration.agent_code(tmp_path, "sources: no build")
    assert calibration.agent_code(tmp_path, "sources: no build") == first
    (tmp_path / "protocol" / "mrc.py").write_text("WINDOW = 2\n")
    assert calibration.agent_code(tmp_path, "sources: no build") != first
    (tmp_path / "protocol" / "mrc.py").write_text("WINDOW = 1\n")
    assert calibration.agent_code(tmp_path, "compiled: 0123456789ab") != first
    (tmp_path / "_crc32.c").write_text("int fold;\n")  # the C extension's sources count too
    assert calibration.agent_code(tmp_path, "sources: no build") != first
