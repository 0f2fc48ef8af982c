"""How a router port marks ECN: RED's profile on the bytes queued ahead of a packet, as
switches configure it for DCQCN (WRED with ECN). No mark at or below K_min, a probability
rising linearly from 0 at K_min to P_max at K_max, every ECN-capable packet above K_max.

The defaults are the DCQCN paper's (Zhu et al., "Congestion Control for Large-Scale RDMA
Deployments", SIGCOMM 2015): K_min = 5 KB, K_max = 200 KB, P_max = 1%. They are bytes of a
real switch's queue and stay what they are whatever the emulated rate (time dilation scales
times, not sizes). A step at one threshold is K_min = K_max.
"""
from __future__ import annotations

from dataclasses import dataclass

DCQCN_KMIN = 5_000  # bytes
DCQCN_KMAX = 200_000  # bytes
DCQCN_PMAX = 0.01


@dataclass(frozen=True)
class RedProfile:
    """K_min and K_max in bytes queued ahead of a packet, P_max a probability in (0, 1];
    K_max 0: no marking."""

    kmin: int
    kmax: int
    pmax: float

    @property
    def marks(self) -> bool:
        return self.kmax > 0


OFF = RedProfile(0, 0, 0.0)
DCQCN_PROFILE = RedProfile(DCQCN_KMIN, DCQCN_KMAX, DCQCN_PMAX)
