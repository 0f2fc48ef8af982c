"""The C extension of the host agents (hostagent/_fastio.c); everything else is in
pyproject.toml. setuptools reads ext_modules only from here, so `pip install .` builds it."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("hostagent._fastio", ["hostagent/_fastio.c"], libraries=["z"],
                             extra_compile_args=["-O2", "-Wall", "-Werror"])])
