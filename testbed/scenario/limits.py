"""How big a fabric this testbed agrees to build, and why.

The caps are what a 2-core, 24 GiB machine can emulate with every port shaped and every path
verified in reasonable time (ref-64, 112 nodes and 384 links, is the reference). They are
checked before anything is created, so an absurd file fails in milliseconds, not after minutes.
"""
from __future__ import annotations

MAX_PLANES = 16
MAX_LEAVES_PER_PLANE = 64
MAX_SPINES_PER_PLANE = 64
MAX_HOSTS = 512
MAX_NODES = 600
MAX_LINKS = 2500
IFNAMSIZ = 15  # Linux interface names: 15 characters and a NUL
MIN_MTU = 1280  # IPv6 minimum link MTU (RFC 8200)
MAX_MTU = 9000
MIN_RATE = 100_000  # 100 kbit/s: slower links make every timer in the run meaningless
MAX_RATE = 100 * 10**9
MIN_BUFFER = 2 * MAX_MTU  # one packet must fit, whatever the MTU
MAX_BUFFER = 256 * 2**20
MAX_COLLECTIVE_BYTES = 1 << 30  # every rank holds it (and its scratch) in memory
MAX_QPS_PER_PEER = 16  # the MRC paper's largest RoCEv2 comparison
