"""The program each emulated host runs: MRC and RoCEv2 transports, collectives, its own logs.

`compiled` chooses, before any protocol module is imported, between the protocol compiled by
mypyc (`make fast`) and its sources."""
from hostagent import compiled as compiled
