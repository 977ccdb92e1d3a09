"""The records seen with a column the papers' series or quantities need: a series named by
two columns (BM98's curves, CM01's mechanisms), a share of one metric in another."""

from __future__ import annotations

from collections.abc import Callable

from harness.analysis.derive import KERNEL_SOCKET_LAYER, KERNEL_STACK
from harness.reproduce.verdict import Measured

View = Callable[[Measured], Measured]


def by_mechanism(m: Measured) -> Measured:
    """CM01's series are (dispatch, accept) pairs, e.g. select/multi: multi-accept select."""
    return m.with_column("mechanism", lambda f: f["dispatch"] + "/" + f["accept"])


def with_share_of(name: str, part: str, whole: str) -> View:
    """The records with part / whole (two metrics of each) as a % in column `name`."""
    return lambda m: m.with_column(name, lambda f: 100 * f[part] / f[whole])


# cpp Table 1's System Call share of the Overall Stack, per record
SYSCALL_SHARE_OF_STACK = with_share_of("syscall_share_of_stack_pct",
                                       "kernel_syscall_ns_per_packet", KERNEL_STACK)
# the paper's System Call layer (function grain: the calls less TCP's functions under them)
SOCKET_LAYER_SHARE_OF_STACK = with_share_of("socket_layer_share_of_stack_pct",
                                            KERNEL_SOCKET_LAYER, KERNEL_STACK)


def by_curve(m: Measured) -> Measured:
    """BM98 Figs 3-6's curves as (dispatch, cold connections) pairs, e.g. epoll@750."""
    return m.with_column("curve", lambda f: f["dispatch"] + "@"
                         + f["cold_conns"].astype(int).astype(str))
