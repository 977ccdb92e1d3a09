"""Derived metrics: totals, CPU shares, cycles per packet with provenance, knees, regressions."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from clients.validity import KEEP_UP_FRACTION, server_busy
from harness.results import verdict
from harness.results.format import (
    KERNEL_DISPATCH_FAMILIES,
    KERNEL_TRACE_COLUMNS,
    kernel_column,
    kernel_function_column,
    server_cpu_column,
)
from harness.results.runset import RunSet

# Symbols counted as "select functions" in the Banga & Mogul / Banga, Mogul & Druschel
# profiles: the select/poll/epoll syscalls, their scan loops, the per-socket poll callbacks
# they drive (tcp_poll, sock_poll, __pollwait) and descriptor lookup, plus the server's own
# dispatch loop (user-mode symbols naming select or poll).
SELECT_SYMBOLS = re.compile(r"select|poll|^_*fdget|^ep_")

CYCLES_MEASURED = "measured"
CYCLES_ESTIMATED = "estimated (CPU time x TSC)"
CYCLES_UNAVAILABLE = "unavailable"
# The network stack's layers at tracepoint grain, as _kernel_stack sizes them (the cycles-per-
# packet study's Table 1 and Figs. 5-6 by layer): each layer's name as figures give it, and its
# in-kernel ns per packet; the stack is their sum. The softirqs are those of the server's CPU:
# its host's own, where the topology steers each host's receive work to its own CPU.
KERNEL_LAYERS = {
    "system calls": "kernel_syscall_ns_per_packet",
    "receive softirq": server_cpu_column("rx", "ns_per_packet"),
    "transmit softirq": "kernel_tx_layer_ns_per_packet",
}
# The paper's System Call layer at function grain (fentry): the server's read and write calls
# less the TCP functions under them (tcp_recvmsg, tcp_sendmsg), per packet as the system calls
# are. Linux copies from and to the user inside those TCP functions, which the paper's socket
# layer did itself, so the copy counts as TCP here.
KERNEL_SOCKET_LAYER = "kernel_socket_layer_ns_per_packet"
KERNEL_SOCKET_LAYER_NAME = "System Call layer"  # as the paper names it; inside "system calls"
KERNEL_STACK = "kernel_stack_ns_per_packet"
KERNEL_STACK_LAYER = "whole stack"  # the stack itself, drawn beside its layers
# kernel_layers' rows by layer name: the stack's layers, the paper's System Call layer within
# its system calls, and the stack itself
KERNEL_LAYER_ROWS = {**KERNEL_LAYERS, KERNEL_SOCKET_LAYER_NAME: KERNEL_SOCKET_LAYER,
                     KERNEL_STACK_LAYER: KERNEL_STACK}
# kernel_layers' long form: one row per record and layer (the stack's own row included)
KERNEL_LAYER_NS = "kernel_layer_ns_per_packet"
KERNEL_LAYER_SHARE = "kernel_layer_share_pct"
# Metrics derived from the kernel_* columns (null where the point was not traced)
KERNEL_DERIVED = ("kernel_dispatch_ns_per_call", "kernel_dispatch_cpu_pct",
                  "kernel_dispatch_share_pct", "kernel_accept_cpu_pct",
                  "kernel_alloc_fd_cpu_pct", *KERNEL_LAYERS.values(), KERNEL_STACK,
                  KERNEL_SOCKET_LAYER,
                  "kernel_rx_packets_per_softirq", KERNEL_LAYER_NS, KERNEL_LAYER_SHARE)
# One round of one run: a run's repetitions are rounds over its sweep (scenario.order)
ROUND_COLUMNS = ("run_id", "repetition")


def _column(points: pd.DataFrame, name: str) -> pd.Series:
    if name in points.columns:
        return pd.to_numeric(points[name], errors="coerce")
    return pd.Series(np.nan, index=points.index, dtype=float)


def _values(points: pd.DataFrame, name: str) -> np.ndarray:
    """_column as an array: integers as they are, any other number as a float (null: NaN)."""
    numbers = _column(points, name)
    if numbers.dtype.kind in "iu":
        return numbers.to_numpy()
    return numbers.to_numpy(dtype=float, na_value=np.nan)


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    return numerator / np.where(denominator > 0, denominator, np.nan)


def _filled(values: np.ndarray, nulls_from: np.ndarray | float) -> np.ndarray:
    """values as floats, its nulls taken from nulls_from."""
    values = values.astype(float)
    return np.where(np.isnan(values), nulls_from, values)


class _Columns:
    """A frame's columns as arrays, each converted once, and the columns derived from them:
    asked by name, a derived one first. add_derived runs for every run a figure, table or
    comparison reads, on frames of tens of rows: arithmetic on arrays costs a fraction of
    pandas' on Series there, and deriving into a dict and joining it once a fraction of
    setting ~30 columns one by one on a wide frame."""

    def __init__(self, points: pd.DataFrame):
        self.points = points
        self.numbers: dict[str, np.ndarray] = {}
        self.derived: dict[str, np.ndarray | pd.Series] = {}

    def __call__(self, name: str) -> np.ndarray:
        if name in self.derived:
            return np.asarray(self.derived[name])
        if name not in self.numbers:
            self.numbers[name] = _values(self.points, name)
        return self.numbers[name]

    def __setitem__(self, name: str, values: np.ndarray | pd.Series) -> None:
        self.derived[name] = values

    def joined(self) -> pd.DataFrame:
        """The frame with the derived columns: a measured one replaced in its place, the
        others after the frame's, in the order they were derived."""
        out = self.points.copy()
        for name, values in self.derived.items():
            if name in out.columns:
                out[name] = values
        added = {name: values for name, values in self.derived.items()
                 if name not in self.points.columns}
        return pd.concat([out, pd.DataFrame(added, index=out.index)], axis=1)


def add_derived(points: pd.DataFrame) -> pd.DataFrame:
    """Points plus derived columns; measured columns are kept, only their nulls are filled."""
    with np.errstate(all="ignore"):  # a null in, a null out, as pandas' arithmetic gives
        return _derived(_Columns(points)).joined()


def _derived(col: _Columns) -> _Columns:
    col["total_conns"] = col("hot_conns") + col("cold_conns")
    # Stream scenarios count stream connections, web ones hot (requesting) connections.
    col["client_conns"] = _filled(col("stream_conns"), col("hot_conns"))
    col["content_throughput_mbps"] = _filled(col("stream_throughput_mbps"),
                                             col("reply_rate_rps") * col("reply_bytes") * 8e-6)
    col["reply_ratio"] = _ratio(col("reply_rate_rps"), col("offered_rate_rps"))
    # Replies per request the generator sent in the same window: what "kept up" is judged
    # on, since a Poisson schedule sends more or fewer than the nominal rate in a short window
    col["replies_per_sent"] = _ratio(col("reply_rate_rps"), col("request_rate_rps"))
    col["cpu_busy_pct"] = 100.0 - col("cpu_idle_pct")
    # Idle as the papers count it, of the server's machine: with a CPU budget standing in for
    # a slower CPU, the unused share of that budget (the rest of its CPU was never the
    # server's); without one, its CPU's idle time.
    budget = col("server_budget_pct")
    of_budget = np.clip(100.0 * (1.0 - col("cpu_server_pct") / budget), 0.0, 100.0)
    col["server_idle_pct"] = _filled(col("server_idle_pct"), np.where(
        np.isnan(budget), col("cpu_idle_pct"), of_budget))
    # Banga & Mogul's "kernel mode" time includes interrupt work: system + softirq.
    col["cpu_kernel_pct"] = col("cpu_system_pct") + _filled(col("cpu_softirq_pct"), 0.0)
    col["events_per_dispatch"] = _filled(col("events_per_dispatch"),
                                         _ratio(col("dispatch_events"), col("dispatch_calls")))
    # Server CPU per accepted connection over the sampled window (both come from the same
    # window); without the server's accept count, one request per connection makes replies
    # stand in for connections.
    cpu_s_per_s = col("cpu_server_pct") / 100
    per_accept = _ratio(cpu_s_per_s * col("sampled_window_s") * 1e6,
                        col("connections_accepted"))
    col["cpu_us_per_conn"] = _filled(per_accept, _ratio(cpu_s_per_s * 1e6,
                                                        col("reply_rate_rps")))
    # Server CPU and run periods (its wake-ups, below saturation) per reply the generator
    # counted, over the same window
    col["cpu_us_per_reply"] = _ratio(cpu_s_per_s * 1e6, col("reply_rate_rps"))
    col["run_periods_per_reply"] = _ratio(col("server_run_periods"),
                                          col("reply_rate_rps") * col("sampled_window_s"))
    packets = col("packets_in") + col("packets_out")
    col["cycles_per_packet"] = _filled(col("cycles_per_packet"),
                                       _ratio(col("cycles"), packets))
    col["instructions_per_packet"] = _filled(col("instructions_per_packet"),
                                             _ratio(col("instructions"), packets))
    col["cycles_source"] = _cycles_source(col)
    col["kernel_dispatch_ns_per_call"], col["kernel_dispatch_cpu_pct"] = _kernel_dispatch(col)
    # The dispatch call's share of the server's own CPU time (the papers' "CPU in select" on a
    # machine the server had to itself): its in-kernel time over the server's on-CPU time, both
    # counted by the tracer on one clock over one window
    col["kernel_dispatch_share_pct"] = _share_of_server(col, col("kernel_dispatch_cpu_pct"))
    col["kernel_syscall_ns_per_packet"], col["kernel_tx_layer_ns_per_packet"] = _kernel_stack(col)
    col[KERNEL_STACK] = sum(col(column) for column in KERNEL_LAYERS.values())
    col[KERNEL_SOCKET_LAYER] = _socket_layer(col)
    # The batch a receive softirq's time is spread over: its fixed costs weigh on each packet
    # in inverse proportion (runs before the count was kept: null)
    col["kernel_rx_packets_per_softirq"] = _ratio(
        col(server_cpu_column("rx", "packets")),
        col(server_cpu_column("rx", "softirqs")))
    # BM98 Table 1's ufalloc: Linux's alloc_fd, timed at function grain (fentry) where allowed,
    # as a share of one CPU over the window and of the server's CPU time
    col["kernel_alloc_fd_cpu_pct"] = _cpu_pct(
        col, col(kernel_function_column("alloc_fd", "calls"))
        * col(kernel_function_column("alloc_fd", "ns_per_call")))
    col["kernel_alloc_fd_share_pct"] = _share_of_server(col, col("kernel_alloc_fd_cpu_pct"))
    # accept's in-kernel time as a share of one CPU: alloc_fd runs inside it, so this bounds
    # alloc_fd's share from above where fentry cannot time the function itself
    col["kernel_accept_cpu_pct"] = _cpu_pct(col, col(kernel_column("accept", "calls"))
                                            * col(kernel_column("accept", "ns_per_call")))
    col["server_busy"] = _server_busy(col)
    return col


def derived_points(runs: RunSet) -> pd.DataFrame:
    """`runs`' points with their verdict and derived columns, derived once per RunSet (every
    figure and table of a scenario asks; each column is derived row by row, so a subset of
    these rows is what deriving the subset would give)."""
    return runs.memo("derived_points", lambda r: add_derived(with_verdict(r.points)))


def _kernel_dispatch(col: _Columns) -> tuple[np.ndarray, np.ndarray]:
    """The server's event-dispatch call (kernel_trace), whichever it is: of the dispatch
    families the one it called most, its in-kernel ns per call and its share of one CPU over
    the traced window (the papers' "CPU in select"). Null where nothing was traced."""
    calls = np.column_stack([np.nan_to_num(col(kernel_column(f, "calls")).astype(float))
                             for f in KERNEL_DISPATCH_FAMILIES])
    per_call = np.column_stack([col(kernel_column(f, "ns_per_call")).astype(float)
                                for f in KERNEL_DISPATCH_FAMILIES])
    chosen = calls.argmax(axis=1)
    rows = np.arange(len(col.points))
    called = calls[rows, chosen] > 0
    ns = np.where(called, per_call[rows, chosen], np.nan)
    return ns, _cpu_pct(col, ns * calls[rows, chosen])


def _cpu_pct(col: _Columns, kernel_ns: np.ndarray) -> np.ndarray:
    """In-kernel ns over the traced window as % of one CPU."""
    return 100 * kernel_ns / (1e9 * col("kernel_trace_window_s"))


def _share_of_server(col: _Columns, cpu_pct: np.ndarray) -> np.ndarray:
    """In-kernel time (% of one CPU over the traced window) as a % of the server's on-CPU time
    in that window, which the tracer counted at the server's switch edges on the same clock
    (kernel_server_on_cpu_s): at most 100 % by construction. Not schedstat's run time
    (cpu_server_pct), another clock, which the in-kernel time exceeded in records whose server
    waited for its CPU. Null where the record has no on-CPU time of the tracer's."""
    on_cpu_pct = 100 * _ratio(col("kernel_server_on_cpu_s"), col("kernel_trace_window_s"))
    return 100 * _ratio(cpu_pct, on_cpu_pct)


def _io_ns(col: _Columns) -> np.ndarray:
    """The server's read and write families' in-kernel ns over the traced window."""
    return sum(np.nan_to_num(col(kernel_column(f, "ns_per_call")).astype(float))
               * col(kernel_column(f, "calls")) for f in ("read", "write"))


def _kernel_stack(col: _Columns) -> tuple[np.ndarray, np.ndarray]:
    """The network stack's in-kernel ns per packet by layer (kernel_trace), as the cycles-per-
    packet study's layers fall at tracepoint grain (KERNEL_LAYERS): the system-call layer (the
    server's read and write families with all they call: a sender's write holds TCP's
    transmit, IP and the driver's, a receiver's read TCP's copy to the user) per packet of the
    server's (packets_in + packets_out, cycles_per_packet's count), and the transmit layer;
    with the receive softirq (IP, TCP) per packet received and the transmit softirq per packet
    sent on the server's CPU, they make the stack. Softirqs belong to no process: on the
    server's CPU they are its host's own where the topology steers each host's receive work to
    its own CPU (bulk-pair), and whatever ran there elsewhere. A transmit softirq that handled
    no packet cost none. Null where nothing was traced, or the run predates the server's CPU's
    own softirq columns."""
    syscall = _ratio(_io_ns(col), col("packets_in") + col("packets_out"))
    tx_packets = col(server_cpu_column("tx", "packets"))
    tx = np.where(tx_packets != 0, col(server_cpu_column("tx", "ns_per_packet")),
                  np.where(np.isnan(tx_packets.astype(float)), np.nan, 0.0))
    return syscall, tx


def _socket_layer(col: _Columns) -> np.ndarray:
    """KERNEL_SOCKET_LAYER: read and write less tcp_recvmsg and tcp_sendmsg, per packet of
    the server's; null where fentry did not time those functions (one timed and never
    called cost nothing)."""
    tcp_ns = 0.0
    for function in ("tcp_sendmsg", "tcp_recvmsg"):
        calls = col(kernel_function_column(function, "calls")).astype(float)
        per_call = col(kernel_function_column(function, "ns_per_call")).astype(float)
        tcp_ns = tcp_ns + np.where(calls == 0, 0.0, per_call * calls)
    return _ratio(_io_ns(col) - tcp_ns, col("packets_in") + col("packets_out"))


def _server_busy(col: _Columns) -> pd.Series:
    """clients.validity's rule, row by row: the server ran (or waited to run) through the
    CPUs it may use (server_cpus, as recorded or upgraded at load), whether or not it kept
    up. Null where its CPU or those CPUs are unknown."""
    columns = [col(c) for c in ("cpu_server_pct", "server_wait_pct", "server_cpus")]

    def judge(cpu: float, wait: float, cpus: float) -> bool | None:
        if pd.isna(cpu) or pd.isna(cpus):
            return None
        return server_busy(cpu, cpus, None if pd.isna(wait) else wait)

    return pd.Series([judge(*values) for values in zip(*columns, strict=True)],
                     index=col.points.index, dtype="boolean")


def _cycles_source(col: _Columns) -> np.ndarray:
    """Per row: whether cycles were counted by hardware, estimated, or are unavailable."""
    points = col.points
    estimated = points.get("cycles_estimated", pd.Series(False, index=points.index))
    estimated = estimated.astype("boolean").fillna(False).astype(bool).to_numpy()
    has_cycles = ~np.isnan(col("cycles_per_packet").astype(float))
    source = np.where(estimated, CYCLES_ESTIMATED, CYCLES_MEASURED)
    return np.where(has_cycles, source, CYCLES_UNAVAILABLE)


def valid_points(points: pd.DataFrame) -> pd.DataFrame:
    """Rows the runner marked valid (a generator that fell behind does not measure the server)."""
    return points[verdict.valid(points)]


def with_verdict(points: pd.DataFrame) -> pd.DataFrame:
    """points with `valid` a plain bool: the runner's verdict (a null one is not valid)."""
    return points.assign(valid=verdict.valid(points))


def shown_repetitions(reps: pd.DataFrame) -> tuple[bool, pd.DataFrame]:
    """What stands for one point (reps: its rows, `valid` a plain bool): its valid
    repetitions, or, when it has none, its invalid ones; and whether those are valid."""
    valid = reps[reps["valid"]]
    return (True, valid) if not valid.empty else (False, reps)


def summarize(points: pd.DataFrame, by: list[str], metric: str) -> pd.DataFrame:
    """Median and min/max of `metric` over repetitions for each combination of `by`."""
    values = points[[*by, metric]].dropna(subset=[metric])
    grouped = values.groupby(by, dropna=False)[metric]
    return grouped.agg(median="median", low="min", high="max", n="count").reset_index()


def saturation(points: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Saturation throughput per group: the knee of reply rate against offered rate.

    `saturation_rps` is the highest median reply rate of any offered rate; `knee_offered_rps`
    the highest offered rate the server still kept up with; `saturated` says whether the
    server itself was the bottleneck at some offered rate (clients.validity.server_saturated:
    busy, and its replies behind the offered rate). Replies that fell behind while the server
    had CPU to spare were limited by something else; then saturation_rps is a lower bound.
    """
    per_rate = summarize(points, [*by, "offered_rate_rps"], "reply_rate_rps")
    rows = []
    for key, group in per_rate.groupby(by, dropna=False) if by else [((), per_rate)]:
        group = group.sort_values("offered_rate_rps")
        keeps_up = group["median"] >= KEEP_UP_FRACTION * group["offered_rate_rps"]
        knee = group.loc[keeps_up, "offered_rate_rps"]
        key = key if isinstance(key, tuple) else (key,)
        mine = points
        for column, value in zip(by, key, strict=True):
            mine = mine[mine[column] == value]
        rows.append(
            {
                **dict(zip(by, key, strict=True)),
                "saturation_rps": group["median"].max(),
                "knee_offered_rps": knee.max() if not knee.empty else np.nan,
                "saturated": bool(mine["server_saturated"].fillna(False).astype(bool).any()),
            }
        )
    return pd.DataFrame(rows)


# The lines BM98 Tables 4-5 fit against the request rate (the check and its figure): the
# server CPU's idle time and the server's kernel-mode time, by the name each is read as
KERNEL_LINES = {"server_idle_pct": "idle", "cpu_server_sys_pct": "kernel"}


def regressions(
    points: pd.DataFrame, x: str, ys: list[str], by: list[str], min_x: float = 0.0
) -> pd.DataFrame:
    """Least-squares lines of each y against x per group (Banga & Mogul Tables 4, 5, 9, 15).

    Only points below saturation are used: the server kept up with the offered rate and had
    CPU to spare. Past saturation the request rate no longer drives CPU time; and a server
    that used its whole CPU (or budget) while still keeping up, by handling more events per
    call, has its idle time cut off at 0, so that point cannot lie on the line. The
    x-intercept (where y reaches 0) is the capacity estimate for idle time, extrapolated as
    the papers did; for busy metrics it is reported as null.

    The line is fitted within rounds: a run's repetitions are rounds over its sweep, and a
    whole round can sit a few points of idle time higher than another (the host drifts), which
    a pooled fit reads as scatter about the line. Each round's points are taken about their
    own round's means for the slope and r (one slope for every round, an offset each); the
    intercept is the line's through the means of all points. Points without rounds are one.
    """
    from scipy import stats  # here: half a second to import, and only regressions fit

    busy = points["server_busy"] if "server_busy" in points else _server_busy(_Columns(points))
    below_knee = points[(_column(points, "reply_ratio") >= KEEP_UP_FRACTION)
                        & ~busy.fillna(False).astype(bool)]
    below_knee = below_knee[_column(below_knee, x) >= min_x]
    rows = []
    groups = below_knee.groupby(by, dropna=False) if by else [((), below_knee)]
    for key, group in groups:
        key = key if isinstance(key, tuple) else (key,)
        rounds = [c for c in ROUND_COLUMNS if c in group.columns]
        for y in ys:
            data = group[[x, y]].apply(pd.to_numeric, errors="coerce")
            data = data.join(group[rounds]).dropna(subset=[x, y])
            centred = data[[x, y]] - (data.groupby(rounds, dropna=False)[[x, y]].transform("mean")
                                      if rounds else data[[x, y]].mean())
            if len(data) < 3 or centred[x].nunique() < 2:
                continue
            fit = stats.linregress(centred[x], centred[y])
            intercept = data[y].mean() - fit.slope * data[x].mean()
            is_idle = "idle" in y
            rows.append(
                {
                    **dict(zip(by, key, strict=True)),
                    "metric": y,
                    "slope": fit.slope,
                    "intercept": intercept,
                    "r": fit.rvalue,
                    "x_intercept": -intercept / fit.slope if is_idle and fit.slope else np.nan,
                    "n": len(data),
                }
            )
    return pd.DataFrame(rows)


def profile_share(profiles: pd.DataFrame, pattern: re.Pattern[str]) -> pd.DataFrame:
    """Per run, point and repetition: summed profile % of the symbols matching `pattern`."""
    matched = profiles[profiles["symbol"].astype(str).str.contains(pattern)]
    keys = ["run_id", "point_id", "repetition"]
    share = matched.groupby(keys)["pct"].sum()
    # Points with a profile but no matching symbol spent 0 % there (measured, not missing).
    all_keys = profiles[keys].drop_duplicates().set_index(keys).index
    return share.reindex(all_keys, fill_value=0.0).rename("profile_pct").reset_index()


def is_kernel_metric(column: str) -> bool:
    """A column measured inside the kernel (wb-ktrace's, or derived from them): null where a
    point was not traced, for a reason the run's manifest gives."""
    return column in KERNEL_TRACE_COLUMNS or column in KERNEL_DERIVED


def kernel_layers(points: pd.DataFrame) -> pd.DataFrame:
    """points' records once per layer of the stack (KERNEL_LAYERS, the paper's System Call
    layer within the system calls where fentry timed TCP's functions, and the stack itself):
    `layer` its name, KERNEL_LAYER_NS its in-kernel ns per packet, KERNEL_LAYER_SHARE that as a
    % of the stack's (the cycles-per-packet study's per-layer share of the Overall Stack)."""
    frames = [points.assign(layer=name, **{KERNEL_LAYER_NS: _column(points, column)})
              for name, column in KERNEL_LAYER_ROWS.items()]
    long = pd.concat(frames, ignore_index=True)
    long[KERNEL_LAYER_SHARE] = 100 * _ratio(long[KERNEL_LAYER_NS],
                                            _column(long, KERNEL_STACK))
    return long
