"""The benchmarks. Each module with a `main` is a script, run from the checkout's root as a
module (`.venv/bin/python -m bench.proto`, as root `sudo .venv/bin/python -m bench.faults`), so
that `bench` and the project's packages import from this checkout; `common` holds what they
share (the checkout's root, the results folders), `fair` what makes a comparison fair and `cpu`
the CPU accounting."""
