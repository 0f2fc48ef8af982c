"""testbed/cluster/network.py under its former name, for modules that still import it from here."""
from testbed.cluster.network import ClusterNetwork, placement_lines, preflight, underlay_traffic

__all__ = ["ClusterNetwork", "placement_lines", "preflight", "underlay_traffic"]
