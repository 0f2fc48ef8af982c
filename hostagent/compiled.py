"""Which protocol runs: the modules mypyc compiled from hostagent/protocol, or their sources.

`make fast` compiles the sans-IO protocol (`MODULES`) with mypyc from the same .py files into
extension modules beside them (setup.py), which Python imports before the sources. The .py
files stay the one definition of the protocol and run instead whenever the build is absent,
turned off (MRC_TESTBED_PURE=1) or stale: a module edited since the build makes every module
import from source, with a warning, since a build that no longer matches its source would run
code nobody reads. It is all or nothing: an interpreted class cannot subclass a compiled one
(MrcQP and RoceQP subclass QueuePair). `make pure` deletes the build.

hostagent/__init__.py imports this before any protocol module; `ACTIVE` says which runs.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

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


def _choose() -> bool:
    if not built():
        return False
    if os.environ.get(PURE) != "1":
        old = outdated()
        if not old:
            return True
        warnings.warn(f"the compiled protocol is older than hostagent/protocol/{old[0]}.py"
                      f"{f' and {len(old) - 1} more' if len(old) > 1 else ''}: running the "
                      "sources; `make fast` rebuilds it, `make pure` removes it",
                      RuntimeWarning, stacklevel=2)
    sys.meta_path.insert(0, SourceFinder())
    return False


ACTIVE = _choose()
