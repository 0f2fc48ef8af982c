"""The agent process around the protocol: UDP sockets and batched IO, namespaces, the event
loop that drives the queue pairs, its loop-lag monitor, and the pooled process that serves
many emulated hosts."""
