"""Both networks implement the `Network` protocol the runner and the build use: every method
it names, with its parameters, on the single-machine network and on the cluster's, and the
attributes it names set by their shared base; neither is a subclass of the other."""
from __future__ import annotations

import inspect

import pytest

from testbed.cluster.network import ClusterNetwork
from testbed.emulation.network import FabricNetwork
from testbed.emulation.network_api import Network
from testbed.emulation.shells import MininetFabric

METHODS = sorted(n for n, v in vars(Network).items()
                 if inspect.isfunction(v) and not n.startswith("_"))
ATTRIBUTES = sorted(Network.__annotations__)


def test_the_protocol_is_read():
    assert {"prepare", "add_links", "probe_evs", "spawn", "close"} <= set(METHODS)
    assert {"plan", "ifindex", "results_dir", "net"} <= set(ATTRIBUTES)


@pytest.mark.parametrize("cls", [FabricNetwork, ClusterNetwork])
@pytest.mark.parametrize("name", METHODS)
def test_each_network_has_the_method_with_its_parameters(cls: type, name: str):
    assert callable(getattr(cls, name, None)), f"{cls.__name__} has no {name}"
    want = list(inspect.signature(getattr(Network, name)).parameters)
    assert list(inspect.signature(getattr(cls, name)).parameters) == want


def test_the_attributes_come_from_the_shared_base():
    source = inspect.getsource(MininetFabric.__init__)
    for name in ATTRIBUTES:
        assert f"self.{name}" in source, f"MininetFabric does not set {name}"


def test_the_networks_are_siblings():
    assert not issubclass(ClusterNetwork, FabricNetwork)
    assert not issubclass(FabricNetwork, ClusterNetwork)
    assert FabricNetwork.__bases__ == ClusterNetwork.__bases__ == (MininetFabric,)
