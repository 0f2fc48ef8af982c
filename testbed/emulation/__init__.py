"""The emulated network while it lives: building it in Mininet, proving every path, applying
faults, sampling port telemetry, capturing packets and running background traffic. The same
network over several servers is testbed/cluster, built on this package."""
