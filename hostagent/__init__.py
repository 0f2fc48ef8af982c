"""The program each emulated host runs: MRC and RoCEv2 transports, collectives, its own logs."""
