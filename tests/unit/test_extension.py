"""The agents' C extension is required: without it `mrc-testbed` stops with exit status 3 and
says how to build it, while importing the `testbed` package still works (the extension's own
behaviour: tests/unit/hostagent/test_wire.py and test_batchio.py)."""
from __future__ import annotations

import subprocess
import sys

HIDE = "import sys; sys.modules['hostagent._fastio'] = None; "  # as if it were never built


def _without_extension(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", HIDE + code], capture_output=True, text=True,
                          timeout=60)


def test_the_command_exits_3_naming_make_dev():
    res = _without_extension("from testbed.entry import main; sys.argv[1:] = ['list']; "
                             "sys.exit(main())")
    assert res.returncode == 3, res.stderr
    assert "make dev" in res.stderr and "_fastio" in res.stderr
    assert "Traceback" not in res.stderr


def test_importing_the_package_does_not_exit():
    res = _without_extension("import testbed, testbed.errors; print('imported')")
    assert res.returncode == 0 and res.stdout == "imported\n", res.stderr


def test_the_agent_alone_names_the_fix_too():
    res = _without_extension("import hostagent.runtime.driver")
    assert res.returncode != 0 and "make dev" in res.stderr
