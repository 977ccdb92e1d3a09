"""Emulated WAN topologies: network namespaces joined by netem or userspace-emulated links."""

from harness.topology.builder import TopologyHandle, bring_up, planned_commands
from harness.topology.model import Topology, TopologyError, load_topology

__all__ = ["Topology", "TopologyError", "TopologyHandle", "bring_up", "load_topology",
           "planned_commands"]
