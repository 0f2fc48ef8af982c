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
# Lossless mode (switch.lossless): the bytes every router port's queue together may hold, each
# port an equal share (at least its buffer). The kernel's memory for them is about twice that
# (a queued 1 KB packet's skb takes about 2 KB): about 2 GiB of the machine's 24 GiB.
LOSSLESS_MEMORY = 2**30
MAX_COLLECTIVE_BYTES = 1 << 30  # every rank holds it (and its scratch) in memory
MAX_QPS_PER_PEER = 16  # the MRC paper's largest RoCEv2 comparison

# The file itself, before anything is built from it (source.py).
MAX_SCENARIO_BYTES = 1 << 20  # the shipped scenarios are under 2 KB
MAX_YAML_NODES = 100_000  # as expanded: an alias counts its whole target at every use
MAX_YAML_DEPTH = 32  # a scenario nests about 5 deep
MAX_NUMBER_CHARS = 64  # Python refuses ints of over 4,300 digits; no setting needs 64
MAX_DESCRIPTION_CHARS = 10_000

# Counts derived from a scenario: each becomes processes, rules or timers in a run.
MAX_FAULTS = 1_000
MAX_FLAP_CYCLES = 10_000  # each cycle is two nftables rewrites in the link's nodes
MAX_FAULT_ACTIONS = 20_000  # every fault's do and undo, flaps' cycles counted
MAX_BACKGROUND_PATTERNS = 64
MAX_JOBS = 16  # each its own agents' configs, tables and solo control run
MAX_BACKGROUND_FLOWS = 256  # two iperf3 processes each (a server and a client), as root
MIN_LOSS_PROBABILITY = 1e-4  # the injector drops in steps of 1/10,000 (nftables numgen)
# s, emulated: a flap's down+up cycle (each half rewrites nftables rules in the link's nodes)
MIN_FLAP_PERIOD = 0.001
MAX_TIME = 86_400  # s: when a fault or flow may start, how long it may last
MIN_MSS = 64  # payload bytes of a packet: smaller makes headers most of every packet
MAX_WINDOW = 64 * 2**20  # bytes in flight per QP
MAX_DERIVED_TIMER = 10.0  # s: the ACK timeout and target_delay, given or derived from the buffers
# DCQCN's CNP spacing and timers in base RTTs (dcqcn.py): from a quarter of NVIDIA's shortest
# (min_time_between_cnps, 0.4 RTT) to past its longest (rpg_time_reset, 30 RTTs) and the few
# hundred RTTs a run lasts; shorter timers only make the agent step them more often per wake-up.
MIN_DCQCN_RTTS = 0.1
MAX_DCQCN_RTTS = 100.0
MAX_COMPRESS_RTTS = 1e6  # qp.compress_above_rtts: a bound on the number, not a useful value

# `rate: auto` (testbed/fabric/budget.py) picks the highest of these link rates, bit/s, that
# this machine's measured packet budget carries: a 1-2-5 series, as instruments' ranges are,
# from 200 kbit/s (below it a 100 KB buffer drains in over 4 s and the default ACK timeout
# passes MAX_DERIVED_TIMER) to 1 Gbit/s (the agents' whole rate on one path of this machine).
AUTO_RATE_LADDER = tuple(int(m * 10**6) for m in (0.2, 0.5, 1, 2, 5, 10, 25, 50, 100, 200, 500,
                                                   1000))
AUTO_RATE = "auto"
MAX_REAL_RATE = 10**13  # 10 Tbit/s: fabric.real_rate, the real link an emulated one stands for
# fabric.hop_latency and nic_latency, s: a real switch and cable take about 1 us, a long cable
# a few; a second is no fabric's (and, emulated, a second per hop would stall every timer)
MAX_LATENCY = 1.0
# What a run's estimated wall time may be (`validate` prints the estimate): by default half an
# hour, which a scenario raises with max_wall_time, up to a week
DEFAULT_MAX_WALL_TIME = 1800.0
MAX_WALL_TIME = 7 * 86_400.0
