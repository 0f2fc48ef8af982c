"""Which protocol runs: the modules mypyc compiled from their sources, or the sources.

`make install` (its `make fast`) compiles the sans-IO protocol (hostagent/protocol) and its IO
driver (hostagent/runtime/driver.py, with its delay_line.py), `MODULES`, with mypyc from the same
.py files into extension modules beside them (setup.py), which Python imports first. The .py files
stay the one definition of the protocol and run instead whenever the build is absent, turned off
(MRC_TESTBED_PURE=1) or stale: a module edited since the build makes every module import from
source, with a warning, since a build that no longer matches its source would run code nobody reads.
It is all or nothing: an interpreted class cannot subclass a compiled one (MrcQP and
RoceQP subclass QueuePair), and the driver's calls into the QPs are direct only when both are
compiled. `make pure` deletes the build.

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

PACKAGE = "hostagent"
ROOT = Path(__file__).resolve().parent  # the package's directory
PROTOCOL = ("constants", "wire", "nic", "ev_states", "endpoint", "recovery", "nscc", "dcqcn",
            "evs", "qp", "mrc", "rocev2")
MODULES = (*(f"protocol.{name}" for name in PROTOCOL), "runtime.delay_line",
           "runtime.driver")  # in PACKAGE
GROUP = f"{PACKAGE}.protocol.compiled"  # mypyc's group: one shared library every module loads
LIBRARY = f"{GROUP.removeprefix(PACKAGE + '.')}__mypyc"  # its module, as mypyc names it
PURE = "MRC_TESTBED_PURE"  # "1": the sources, even where a build is present
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def file_of(module: str, suffix: str, root: Path = ROOT) -> Path:
    """The file of `module` (a name in PACKAGE, "runtime.driver") under `root`: its source
    (suffix ".py") or its compiled build (SUFFIX)."""
    *packages, name = module.split(".")
    return root.joinpath(*packages, name + suffix)


def built(root: Path = ROOT) -> bool:
    """Whether any part of a compiled build is present under `root`."""
    return any(file_of(name, SUFFIX, root).exists() for name in (*MODULES, LIBRARY))


def outdated(root: Path = ROOT) -> list[str]:
    """The modules whose compiled build is missing, or older than its source (or than the
    shared library, missing too), under `root`."""
    library = file_of(LIBRARY, SUFFIX, root)
    out = []
    for name in MODULES:
        source, binary = file_of(name, ".py", root), file_of(name, SUFFIX, root)
        if (not (binary.exists() and library.exists())
                or source.stat().st_mtime > min(binary.stat().st_mtime, library.stat().st_mtime)):
            out.append(name)
    return out


class SourceFinder(importlib.abc.MetaPathFinder):
    """Imports the compiled modules from their .py files, passing over their builds."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.partition(".")
        if package != PACKAGE or name not in MODULES:
            return None
        return importlib.util.spec_from_file_location(fullname, file_of(name, ".py"))


def build_id(root: Path = ROOT) -> str:
    """The build's identity: the first 12 hex digits of the SHA-256 of its shared library
    (every compiled module's code is in it), so two runs name the same build alike."""
    return hashlib.sha256(file_of(LIBRARY, SUFFIX, root).read_bytes()).hexdigest()[:12]


def source_of(module: str) -> str:
    """A module's source as the repository names it: "hostagent/runtime/driver.py"."""
    return str(file_of(module, ".py", Path(PACKAGE)))


def choose(root: Path = ROOT, environ: Mapping[str, str] = os.environ) -> tuple[bool, str]:
    """Whether the build under `root` runs, and which protocol build that is, with why:
    "compiled: <build id>" or "sources: <reason>" (what every run records, meta.json)."""
    if not built(root):
        return False, "sources: no build"
    if environ.get(PURE) == "1":
        return False, f"sources: {PURE}=1"
    old = outdated(root)
    if old:
        return False, f"sources: the build is older than {source_of(old[0])}"
    return True, f"compiled: {build_id(root)}"


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
        warnings.warn(f"the compiled protocol is older than {source_of(old[0])}"
                      f"{f' and {len(old) - 1} more' if len(old) > 1 else ''}: running the "
                      "sources; `make fast` rebuilds it, `make pure` removes it",
                      RuntimeWarning, stacklevel=2)
    if not active and built():
        sys.meta_path.insert(0, SourceFinder())
    return active, build


ACTIVE, BUILD = _choose()  # BUILD: which build this process imported, and why (choose)
