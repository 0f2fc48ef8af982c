"""The server agent under the module name runs recorded before it moved to
testbed/emulation/cluster/server_agent.py: a crashed run's record holds the command that
cleans its servers (`python -m testbed.emulation.server_agent --clean ...`), and
`mrc-testbed clean` replays it as recorded."""
from testbed.emulation.cluster.server_agent import main

if __name__ == "__main__":
    main()
