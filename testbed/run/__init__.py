"""One run from start to end: the phases and their teardown, starting the agents, turning their
output into the results contract's tables, and the results folder itself."""
