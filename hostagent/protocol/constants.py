"""Every constant of MRC (evs.py, mrc.py, recovery.py) and of its congestion control (nscc.py),
each with its unit and its source: the spec (OCP MRC mrc.h / mrc_ctl.h, UET 1.0 NSCC), an RFC,
or "chosen", with what it was measured on where it was (the commit that measured it in
brackets, `git show` it). One module, so that a reader sees at once which numbers are the
spec's and which are ours. The scenario's `mrc.*` fields (testbed/scenario/schema.py) override
the EVPolicy defaults. Each constant's docstring reads "unit | source" (checked by
tests/unit/hostagent/test_constants.py).
"""
from __future__ import annotations

from typing import Final

# ---- the EV set (evs.py) ----
NO_EV: Final = -1
"""EV index | chosen: stands for no EV where a native int is wanted (EVs are 16-bit unsigned on
the wire, so never negative)"""
PROBE_INTERVAL: Final = 0.005
"""s | chosen, not measured [f0db126]; the spec's host agent probes its T0s every 1 ms, our RTTs
are ms"""
PROBE_SUCCESSES: Final = 16
"""probes | chosen; measured on the simnet, one path losing 20% for 2.5 s, seeds 1-6: condemned 1-2
times, 0.04-0.13% of the packets on it [8116614]"""
PROBE_RUN_GROWTH: Final = 2
"""x | chosen; the same measurement (the run doubles per broken run)"""
MAX_PROBE_RUN: Final = 256
"""probes | chosen; the same measurement (the 20% path's run reached it)"""
FLAP_MEMORY: Final = 1.0
"""s | chosen; measured on drill host-flap at 25 Mbit/s (a port flapping every 0.4 s) [8116614]"""
PROBE_TIMEOUT_INTERVALS: Final = 4
"""probe intervals | chosen, not measured [e119743]; the probe timeout's floor, above it RFC 6298's
srtt + 4 rttvar"""
LATE_PROBES_KEPT: Final = 64
"""probes | chosen: at 5 ms, replies up to 0.32 s past their timeout still count"""
MAX_PROBE_RTTS: Final = 1000
"""samples | chosen: a bound on what an EV records of its probes"""
CONGESTION_HOLDOFF: Final = 0.001
"""s | chosen; measured on degrade at 25 Mbit/s with the hot rule below: MRC 62-64% -> 72-76% of
ideal, 3 runs [f57936d]"""
CONGESTION_MEMORY_RTTS: Final = 8.0
"""srtt | chosen, not measured [e119743]"""
HOT_RATIO: Final = 1.5
"""x | chosen; measured on degrade at 25 Mbit/s [f57936d]"""
HOT_RTTS: Final = 4.0
"""srtt | chosen; measured on degrade at 25 Mbit/s [f57936d]"""
MARK_GAIN: Final = 1 / 16
"""per ACK | chosen; measured on degrade at 25 Mbit/s [f57936d]"""
MARK_FLOOR: Final = 0.02
"""share of ACKs | chosen; measured on degrade at 25 Mbit/s [f57936d]"""
LOSS_WINDOW: Final = 64
"""packets | chosen; measured on the simnet, 2% loss per path, 100 x 128 KB: 2.34-2.56 s ->
1.44-1.59 s, 15-23 -> 0-3 condemnations [b8acb64]"""
LOSS_MIN: Final = 3
"""losses | chosen; the same measurement [b8acb64]"""
LOSS_SIGMAS: Final = 5.0
"""standard deviations | chosen; the same measurement [b8acb64]"""
LOSS_RATE_FLOOR: Final = 0.005
"""share of packets | chosen; the same measurement [b8acb64]"""
SILENT_LOSSES: Final = 3
"""losses in a row | chosen; measured on drills leaf-down, plane-down, host-flap at 25 Mbit/s: a
dead EV condemned within RTTs, not 0.1-0.5 s [7cf428c]"""
HELD_SHIFT: Final = 2
"""x in flight | chosen; measured on paper-incast-victim-apart at 25 Mbit/s, seeds 1-3: victim
0.84-0.92 of its speed, 0.72-0.78 never passing a held plane over [e3b775f]"""
HOT_SAMPLES: Final = 4
"""RTT samples | chosen; measured on paper-incast-victim-apart at 25 Mbit/s, 2 seeds: victim 0.82
-> 0.97-0.98 [4e2aa84]"""
HOT_MEMORY_RTTS: Final = 16.0
"""the plane's best srtt | chosen; the same measurement [4e2aa84]"""

# ---- the real frame's defaults (testbed/fabric/timers.py: with fabric.real_rate, times of the
# real fabric, run D times longer) ----
ACK_TIMEOUT_EXP: Final = 8
"""x 1.024 us | OCP MRC API example (examples/mrc_qp.md, mrc_qp_attr.timeout = 8: 262 us)"""
MPR: Final = 8
"""x 128 PSNs | OCP MRC API example (examples/mrc_qp.md, mrc_qp_attr.mpr.mpr = 8); mrc.h gives
its unit (128 PSNs) but not its meaning: read here as the range of PSNs a requester may have
outstanding, from its oldest unacknowledged one (a NIC tracks that range in its SACK state)"""
MPR_UNIT: Final = 128
"""PSNs | OCP MRC API (mrc.h, mrc_qp_attr.mpr: "unit=128 PSNs")"""
EV_PROBE_TIMEOUT: Final = 0.002
"""s | OCP MRC API example (examples/mrc_ctl_ev_probes.md: EV probes sent with a 2 ms response
timeout, mrc_ctl_ep_batch_send_wait's rsp_timeout)"""
HOLDOFF_RTTS: Final = 1.0
"""base RTTs | chosen, not measured: the real frame's congestion holdoff, one round trip (the time
a mark's news takes to come back); the small regime's 1 ms was chosen on ms RTTs"""

# ---- RTT estimation and loss recovery (nscc.py's smoothed, recovery.py, evs.py) ----
SRTT_GAIN: Final = 1 / 8
"""per sample | RFC 6298 (alpha)"""
RTTVAR_GAIN: Final = 1 / 4
"""per sample | RFC 6298 (beta)"""
RTTVAR_WEIGHT: Final = 4
"""rttvar | RFC 6298 (K: RTO = srtt + 4 rttvar)"""
RACK_REORDER_SHARE: Final = 1 / 4
"""srtt | RFC 8985 6.2 (reo_wnd = min_rtt / 4)"""
TLP_SRTTS: Final = 2
"""srtt | RFC 8985 7.2 (PTO = 2 srtt)"""

# ---- NSCC (nscc.py): the knobs are mrc_ctl_cc_nscc_cfg's (UET 1.0); htsim scales its
# values to a 100 Gbit/s, 12 us network, so ours are chosen for ms RTTs at Mbit/s ----
TARGET_DELAY: Final = 0.002
"""s | chosen, not measured [e119743]"""
QA_THRESHOLD_TARGETS: Final = 4
"""target delays | chosen, not measured [e119743]"""
QA_GATE: Final = 3
"""shift of max_cwnd | chosen, not measured [e119743]"""
ETA: Final = 0.15
"""MSS per adjust period | chosen, not measured [e119743]"""
FI: Final = 1.0
"""MSS per window | chosen, not measured [e119743]"""
FI_SCALE: Final = 2.0
"""MSS per window | chosen, not measured [e119743]"""
GAMMA: Final = 0.8
"""of the overshoot | chosen, not measured [e119743]"""
MAX_MD_JUMP: Final = 0.5
"""of the window | UET 1.0 NSCC (a decrease takes at most half)"""
ADJUST_BYTES_MSS: Final = 8
"""MSS | chosen, not measured [e119743]"""
DELAY_GAIN: Final = 1 / 8
"""per sample | chosen, not measured [e119743]: an agent sees hundreds of ACKs a second, not
htsim's millions (1/80)"""
