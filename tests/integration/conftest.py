"""Fixtures for tests that build real fabrics, and a leak check around every test.

The leak check is the point: after each test, no namespace, veth, process or registry entry
made by the testbed may remain. It compares with what existed before the test, so a machine's
unrelated namespaces never make a test fail and are never touched.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import build, leftovers, snapshot


@pytest.fixture(autouse=True)
def no_leftovers():
    before = snapshot()
    yield
    extra = leftovers(before)
    assert not extra, f"the test left these behind: {extra}"


@pytest.fixture
def results_dir(tmp_path: Path) -> Path:
    return tmp_path / "results"


@pytest.fixture
def quickstart(tmp_path: Path):
    network = build("name: quickstart", tmp_path)
    yield network
    network.close()
