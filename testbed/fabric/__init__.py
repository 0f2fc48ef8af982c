"""The fabric plan: nodes, ports, links, addresses, uSIDs, the EV table, each node's routes and
the fault timeline over the links (pure: plain data computed from a scenario, no kernel)."""
