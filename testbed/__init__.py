"""The testbed: scenario files in, an emulated multi-plane Clos with SRv6 uSIDs built, run and
torn down, a results folder out.

Sub-packages, each importing only those listed before it (tests/unit/test_layers.py):
- `scenario`: the scenario language (schema, units, limits, faults, background; pure);
- `fabric`: the plan of one scenario's fabric (addresses, EVs, routes, fault timeline; pure);
- `kernel`: netlink, seg6local, htb, the eBPF queue, feature probes;
- `lifecycle`: the registry of what a run creates, cleanup, signals, workers, progress;
- `emulation`: the Mininet network, verification, faults, telemetry, captures, background flows;
- `run`: one run's phases, the agents, the results folder and its tables.
`cli` wires them together. `errors` is shared by all.
"""
from __future__ import annotations
