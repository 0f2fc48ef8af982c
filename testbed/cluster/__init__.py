"""The cluster mode: the fabric spread over several servers (Mininet's cluster mode, VXLAN
between servers), the runner's client of each server's agent over ssh, the agent itself, and
emulated servers for trying it all on one machine."""
