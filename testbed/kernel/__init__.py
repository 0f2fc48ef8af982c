"""The kernel side: netlink in a node's namespace, seg6local End next-csid, htb shaping, the
eBPF switch queue and its libbpf loading, and the probes of what this kernel has."""
