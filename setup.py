"""The C extension of the host agents (hostagent/_fastio.c); everything else is in
pyproject.toml. setuptools reads ext_modules only from here, so `pip install .` builds it.

With MRC_TESTBED_COMPILE=1 (`make fast`) the sans-IO protocol (hostagent/protocol) and its IO
driver (hostagent/runtime/driver.py) are compiled too, by mypyc, from the same sources: the .py
files stay what the code is, and what runs when the compiled modules are absent, stale or turned
off (hostagent/compiled.py)."""
import os

from setuptools import Extension, setup

ext_modules = [Extension("hostagent._fastio", ["hostagent/_fastio.c", "hostagent/_crc32.c"],
                         libraries=["z"], extra_compile_args=["-O2", "-Wall", "-Werror"])]

if os.environ.get("MRC_TESTBED_COMPILE") == "1":
    from mypyc.build import mypycify

    from hostagent.compiled import GROUP, MODULES, source_of

    # The group's shared library inside the package (hostagent/protocol/compiled__mypyc*.so),
    # where the editable install finds it as it finds the modules.
    ext_modules += mypycify([source_of(name) for name in MODULES], group_name=GROUP,
                            opt_level="3")

setup(ext_modules=ext_modules)
