"""The run registry reads back what a run recorded, emulated servers included."""
from __future__ import annotations

from pathlib import Path

from testbed.lifecycle import registry


def test_servers_and_folders_are_read_back(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(registry, "STATE_DIR", tmp_path)
    run = registry.RunRegistry("r1", tmp_path / "results", "q")
    run.add_named_netns("mrc-abc-hub")
    run.add_node("h0", 123, None)
    run.add_named_netns("mrc-abc-srv0")
    run.add_dir(tmp_path / "r1.ssh")
    run.add_node("h0", 123, 4026531999)
    (record,) = registry.read_all()
    assert record.named_netns == ["mrc-abc-hub", "mrc-abc-srv0"]
    assert record.dirs == [str(tmp_path / "r1.ssh")]
    assert record.nodes == {"h0": (123, 4026531999)}  # the later line completes the first
    run.close()
    assert registry.read_all() == []
