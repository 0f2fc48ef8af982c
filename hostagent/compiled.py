"""Which protocol runs: the modules mypyc compiled from hostagent/protocol, or their sources.

`make install` (its `make fast`) compiles the sans-IO protocol (`MODULES`) with mypyc from the
same .py files into extension modules beside them (setup.py), which Python imports first. The .py
files stay the one definition of the protocol and run instead whenever the build is absent,
turned off (MRC_TESTBED_PURE=1) or stale: a module edited since the build makes every module
import from source, with a warning, since a build that no longer matches its source would run
code nobody reads. It is all or nothing: an interpreted class cannot subclass a compiled one
(MrcQP and RoceQP subclass QueuePair). `make pure` deletes the build.

hostagent/__init__.py imports this before any protocol module; `ACTIVE` says which runs, `BUILD`
names it and why (every agent reports it, every run records it).
"""
from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

PACKAGE = "hostagent.protocol"
SOURCES = Path(__file__).resolve().parent / "protocol"
MODULES = ("constants", "wire", "nic", "ev_states", "endpoint", "recovery", "nscc", "dcqcn",
           "evs", "qp", "mrc", "rocev2")
GROUP = f"{PACKAGE}.compiled"  # mypyc's group: one shared library that every module loads
LIBRARY = f"{GROUP.rpartition('.')[2]}__mypyc"  # its file's name, as mypyc names it
PURE = "MRC_TESTBED_PURE"  # "1": the sources, even where a build is present
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def built(directory: Path = SOURCES) -> bool:
    """Whether any part of a compiled build is present in `directory`."""
    return any((directory / f"{name}{SUFFIX}").exists() for name in (*MODULES, LIBRARY))


def outdated(directory: Path = SOURCES) -> list[str]:
    """The modules whose compiled build is missing, or older than its source (or than the
    shared library, missing too), in `directory`."""
    library = directory / f"{LIBRARY}{SUFFIX}"
    out = []
    for name in MODULES:
        source, binary = directory / f"{name}.py", directory / f"{name}{SUFFIX}"
        if not (binary.exists() and library.exists()) \
                or source.stat().st_mtime > min(binary.stat().st_mtime, library.stat().st_mtime):
            out.append(name)
    return out


class SourceFinder(importlib.abc.MetaPathFinder):
    """Imports the protocol's modules from their .py files, passing over the compiled ones."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != PACKAGE or name not in MODULES:
            return None
        return importlib.util.spec_from_file_location(fullname, SOURCES / f"{name}.py")


def build_id(directory: Path = SOURCES) -> str:
    """The build's identity: the first 12 hex digits of the SHA-256 of its shared library
    (every compiled module's code is in it), so two runs name the same build alike."""
    library = directory / f"{LIBRARY}{SUFFIX}"
    return hashlib.sha256(library.read_bytes()).hexdigest()[:12]


def choose(directory: Path = SOURCES, environ: Mapping[str, str] = os.environ) -> tuple[bool, str]:
    """Whether the build in `directory` runs, and which protocol build that is, with why:
    "compiled: <build id>" or "sources: <reason>" (what every run records, meta.json)."""
    if not built(directory):
        return False, "sources: no build"
    if environ.get(PURE) == "1":
        return False, f"sources: {PURE}=1"
    old = outdated(directory)
    if old:
        return False, f"sources: the build is older than {old[0]}.py"
    return True, f"compiled: {build_id(directory)}"


def agreement(builds: Mapping[str, str | None]) -> dict[str, Any]:
    """What a run's agents reported (host -> its process's `BUILD`, None: no report): the one
    build they all ran, or "mixed" when they disagree, and how many agents ran each."""
    counts = Counter("not reported" if b is None else b for b in builds.values())
    only = next(iter(counts)) if len(counts) == 1 else "mixed"
    return {"build": only, "agents": dict(counts.most_common())}


def line(record: Mapping[str, Any] | None) -> str:
    """A run's protocol build in one line, from its meta.json `protocol` (None: the run did not
    record it); agents that disagree are said loudly, with each build's count."""
    if not record:
        return "not recorded"
    agents = record.get("agents") or {}
    if record.get("build") != "mixed":
        total = sum(agents.values())
        return f"{record.get('build')} (all {total} agents)" if total else str(record["build"])
    return "AGENTS DISAGREE: " + ", ".join(f"{b} on {n}" for b, n in agents.items())


def _choose() -> tuple[bool, str]:
    active, build = choose()
    if not active and build.startswith("sources: the build is older"):
        old = outdated()
        warnings.warn(f"the compiled protocol is older than hostagent/protocol/{old[0]}.py"
                      f"{f' and {len(old) - 1} more' if len(old) > 1 else ''}: running the "
                      "sources; `make fast` rebuilds it, `make pure` removes it",
                      RuntimeWarning, stacklevel=2)
    if not active and built():
        sys.meta_path.insert(0, SourceFinder())
    return active, build


ACTIVE, BUILD = _choose()  # BUILD: which build this process imported, and why (choose)
