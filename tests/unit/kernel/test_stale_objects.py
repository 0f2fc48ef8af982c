"""An eBPF object older than its C source is refused by name, before anything loads it: after
a pull that changed the program, a run would otherwise measure the old one."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from testbed.errors import EnvironmentProblem
from testbed.kernel import tc_bpf


def _pair(tmp_path: Path, source_newer: bool) -> Path:
    obj, src = tmp_path / "prog.o", tmp_path / "prog.c"
    obj.write_bytes(b"not loaded")
    src.write_text("int x;")
    os.utime(obj, (1000, 1000))
    os.utime(src, (2000, 2000) if source_newer else (500, 500))
    return obj


def test_an_object_older_than_its_source_is_refused(tmp_path: Path):
    obj = _pair(tmp_path, source_newer=True)
    assert tc_bpf.stale(obj)
    with pytest.raises(EnvironmentProblem) as info:
        tc_bpf.load(obj, "prog", (), "the test program", "run `make bpf`", "kernel")
    assert "older than its source prog.c" in str(info.value) and "make bpf" in str(info.value)


def test_an_object_built_after_its_source_is_not_stale(tmp_path: Path):
    assert not tc_bpf.stale(_pair(tmp_path, source_newer=False))
    assert not tc_bpf.stale(tmp_path / "absent.o")


def test_the_shipped_objects_are_current_where_built():
    bpf = Path(tc_bpf.__file__).resolve().parent / "bpf"
    assert not [o.name for o in bpf.glob("*.o") if tc_bpf.stale(o)], "run `make bpf`"
