"""One declarative figure spec per reproduction target (REPRODUCTION.md)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.analysis.derive import KERNEL_LINES

# The papers' "% of the CPU" (BM98 Fig. 1 and Tables 1-2, BMD99 Table 2): a share of the
# server machine's CPU time at the paper's load, idle time included, not of the server's own
# CPU time. The dispatch call's in-kernel time over the traced window as % of one CPU is that
# share on a server given one CPU, as every profile scenario's server is (cpus.server).
CPU_TIME_SHARE = "kernel_dispatch_cpu_pct"
# BM98 Table 1's ufalloc() on a kernel without function grain (fentry): accept's whole
# in-kernel time, alloc_fd's and the rest, an upper bound of it, on the same denominator
ACCEPT_CPU_TIME_SHARE = "kernel_accept_cpu_pct"

# Axis labels with units, by column name.
LABELS = {
    "cold_conns": "cold (idle) connections",
    "hot_conns": "hot connections",
    "total_conns": "concurrent connections (hot + cold)",
    "offered_rate_rps": "offered request rate [req/s]",
    "request_rate_rps": "request rate [req/s]",
    "reply_rate_rps": "reply rate [replies/s]",
    "saturation_rps": "saturation throughput [replies/s]",
    "cpu_server_pct": "server CPU [% of one CPU]",
    "cpu_idle_pct": "CPU idle [%]",
    "server_idle_pct": "server CPU idle [% of its CPU or budget]",
    "cpu_kernel_pct": "CPU kernel mode (system + softirq) [%]",
    "cpu_user_pct": "CPU user mode [%]",
    "cpu_us_per_conn": "server CPU per connection [µs]",
    "resp_time_mean_ms": "mean response time [ms]",
    "resp_time_p99_ms": "p99 response time [ms]",
    "resp_time_uncorrected_p99_ms": "p99 response time, uncorrected [ms]",
    "signals_dequeued": "signals dequeued (sigwaitinfo calls)",
    "sigio_overflows": "SIGIO (signal queue overflows)",
    "cycles_per_packet": "cycles per packet",
    "kernel_dispatch_ns_per_call": "dispatch call, in the kernel [ns per call]",
    "kernel_dispatch_cpu_pct": "dispatch call, in the kernel [% of one CPU's time]",
    "kernel_accept_cpu_pct": "accept, in the kernel (bounds ufalloc) [% of one CPU's time]",
    "cpu_server_sys_pct": "server CPU, kernel mode [% of one CPU]",
    "kernel_rx_ns_per_packet": "receive softirq [ns per packet]",
    "kernel_dispatch_share_pct": "dispatch call, in the kernel [% of the server's CPU]",
    "kernel_accept_ns_per_call": "accept, in the kernel [ns per call]",
    "kernel_stack_ns_per_packet": "network stack, in the kernel [ns per packet]",
    "kernel_layer_ns_per_packet": "in the kernel, by layer [ns per packet]",
    "kernel_layer_share_pct": "layer's share of the stack's in-kernel time [%]",
    "instructions_per_packet": "instructions per packet",
    "stream_throughput_mbps": "stream throughput [Mbit/s]",
    "content_throughput_mbps": "content throughput [Mbit/s]",
    "client_conns": "client connections",
    "stream_conns": "connections",
    "stream_mbps": "offered stream bandwidth, all connections [Mbit/s]",
    "one_way_delay_ms": "one-way delay [ms]",
    "pct": "share of profile samples [%]",
    "tail": "percentile",
    "latency_corrected_ms": "response time, corrected [ms]",
    "latency_uncorrected_ms": "response time, uncorrected [ms]",
    "t_s": "seconds since the generator started",
    "response_time_ms": "response time [ms]",
    "cdf_corrected": "fraction of responses, corrected",
    "cdf_uncorrected": "fraction of responses, uncorrected",
    "generator.replies": "replies [per s]",
    "generator.late": "late sends [per s]",
    "server_proc.cpu_pct": "server CPU [% of one CPU]",
    "errors_total": "errors",
    "resp_time_p50_ms": "median response time [ms]",
    "reply_bytes": "reply [bytes]",
    "hot_conns_per_client": "hot connections per client",
}

PAPERS = {
    "bm98": "Banga & Mogul 1998, Scalable kernel performance for Internet servers",
    "bmd99": "Banga, Mogul & Druschel 1999, A scalable and explicit event delivery mechanism",
    "cm01": "Chandra & Mosberger 2001, Scalability of Linux event-dispatch mechanisms",
    "cpp": "Network stack vs connections and latency (cycles per packet)",
}


@dataclass(frozen=True)
class FigureSpec:
    """What to plot for one target; `source` names how rows are derived (see prepare.py).

    kind: line (x vs median y over repetitions, min-max bars), bars (a paper's table: one
    group of bars per y column, ours beside the paper's, at the spec's one x), regression
    (scatter + least-squares lines, with a table), spectrum (response time against 1/(1-p), as
    HdrHistogram plots it), cdf (the fraction of responses at or below each response time).
    Points the runner marked invalid are drawn hollow, their reasons in the notes.
    """

    id: str
    paper: str
    target: str
    scenario: str
    title: str
    x: str
    y: tuple[str, ...]
    series: tuple[str, ...] = ()
    facets: tuple[str, ...] = ()
    kind: str = "line"
    source: str = "points"
    only: tuple[tuple[str, tuple[object, ...]], ...] = ()  # keep rows whose column is in values
    log_x: bool = False
    # Overload targets: why points the runner marked invalid (a generator that could not
    # send the offered rate) still measure what is plotted. They are drawn hollow all the
    # same: invalid looks invalid on every figure, and the notes say why it still counts
    keep_invalid: str | None = None
    # Mechanisms of the paper that no Linux has (keys of
    # harness.analysis.paper_values.ABSENT_FROM_LINUX): the figure says what stands in
    absent: tuple[str, ...] = ()
    # The paper's own words where its text gives no number to draw (papers/*.csv has none)
    words_only: str | None = None


FIG3_6 = "bm98-fig3-6-naive-vs-realistic"
CM01_RATE = "cm01-fig6-9-vs-rate"
CPP_THROUGHPUT = "cpp-fig2-3-throughput"

SPECS: tuple[FigureSpec, ...] = (
    FigureSpec(
        id="bm98-fig1",
        paper="bm98",
        target="Banga & Mogul 1998, Fig. 1",
        scenario="bm98-fig1-select-cpu-vs-cold",
        title="select's in-kernel time vs cold connections, about 100 req/s",
        x="cold_conns",
        y=(CPU_TIME_SHARE,),
        series=("hot_conns",),
    ),
    FigureSpec(
        id="bm98-table1-2",
        paper="bm98",
        target="Banga & Mogul 1998, Tables 1-2",
        scenario="bm98-table1-profile",
        title="CPU profile, 750 cold / 50 hot connections, 220 req/s",
        x="cold_conns",
        y=(CPU_TIME_SHARE, ACCEPT_CPU_TIME_SHARE, "server_idle_pct"),
        series=("dispatch",),
        kind="bars",
    ),
    FigureSpec(
        id="bm98-fig3-5",
        paper="bm98",
        target="Banga & Mogul 1998, Fig. 3 and 5",
        scenario=FIG3_6,
        title="Response time vs request rate, naive (0 cold) and realistic (750 cold)",
        x="offered_rate_rps",
        y=("resp_time_mean_ms",),
        series=("dispatch", "cold_conns"),
        facets=("reply_bytes",),
        # 50 to 12,000 req/s: the realistic select curve's low rates stay readable
        log_x=True,
        words_only="'adding slow connections in the realistic benchmark drastically reduces "
                   "the throughput achieved with the unmodified kernel' (§5.1)",
    ),
    FigureSpec(
        id="bm98-fig4-6",
        paper="bm98",
        target="Banga & Mogul 1998, Fig. 4 and 6",
        scenario=FIG3_6,
        title="CPU idle vs request rate, naive (0 cold) and realistic (750 cold)",
        x="offered_rate_rps",
        y=("server_idle_pct",),
        series=("dispatch", "cold_conns"),
        facets=("reply_bytes",),
        # 50 to 12,000 req/s: the realistic select curve's low rates stay readable
        log_x=True,
    ),
    FigureSpec(
        id="bm98-fig9",
        paper="bm98",
        target="Banga & Mogul 1998, Fig. 9",
        scenario="bm98-fig9-saturation-vs-cold",
        title="Saturation throughput vs cold connections",
        x="cold_conns",
        y=("saturation_rps",),
        series=("dispatch", "hot_conns"),
        facets=("reply_bytes",),
        source="saturation",
    ),
    FigureSpec(
        id="bm98-tables-4-5",
        paper="bm98",
        target="Banga & Mogul 1998, Tables 4, 5, 9, 15",
        scenario=FIG3_6,
        title="Idle and kernel-mode CPU vs request rate at 750 cold: linear regressions",
        x="request_rate_rps",
        # the lines its check fits (claims.kernel_regressions), one per kernel
        y=tuple(KERNEL_LINES),
        series=("dispatch",),
        facets=("reply_bytes",),
        kind="regression",
        source="regression",
        only=(("cold_conns", (750,)),),
    ),
    FigureSpec(
        id="bm98-ufalloc",
        paper="bm98",
        target="Banga & Mogul 1998, Section 4.2 (ufalloc)",
        scenario="bm98-ufalloc",
        title="accept's in-kernel time vs open descriptors",
        x="cold_conns",
        y=("kernel_accept_ns_per_call",),
        series=("dispatch",),
        words_only="'The cost of this search is roughly proportional to the number of open "
                   "file descriptors' (§2.3)",
    ),
    FigureSpec(
        id="bmd99-fig8",
        paper="bmd99",
        target="Banga, Mogul & Druschel 1999, Fig. 8",
        scenario="bmd99-fig8-reply-rate-vs-cold",
        title="Reply rate vs cold connections, 32 hot, 1 KB",
        x="cold_conns",
        y=("reply_rate_rps",),
        series=("dispatch",),
        words_only="'our new API performs independently of the number of cold connections, "
                   "while select() does not' (§ Performance of a live system)",
    ),
    FigureSpec(
        id="bmd99-fig9",
        paper="bmd99",
        target="Banga, Mogul & Druschel 1999, Fig. 9",
        scenario="bmd99-fig9-resp-time-vs-rate",
        title="Response time vs request rate, 750 cold connections",
        x="offered_rate_rps",
        # p99 from the intended send time and from the actual one: the gap is what
        # coordinated omission would hide near saturation.
        y=("resp_time_mean_ms", "resp_time_p99_ms", "resp_time_uncorrected_p99_ms"),
        series=("dispatch",),
    ),
    FigureSpec(
        id="bmd99-table2",
        paper="bmd99",
        target="Banga, Mogul & Druschel 1999, Table 2",
        scenario="bmd99-table2-profile",
        title="CPU profile, 750 cold / 50 hot connections, 400 req/s",
        x="cold_conns",
        y=(CPU_TIME_SHARE, "server_idle_pct"),
        series=("dispatch",),
        kind="bars",
    ),
    FigureSpec(
        id="cm01-fig3-5",
        paper="cm01",
        target="Chandra & Mosberger 2001, Fig. 3, 4, 5",
        scenario="cm01-fig3-5-vs-connections",
        title="Reply rate, CPU and response time vs concurrent connections",
        x="total_conns",
        y=("reply_rate_rps", "cpu_server_pct", "resp_time_mean_ms"),
        series=("dispatch",),
        facets=("offered_rate_rps",),
        absent=("dev_poll",),
    ),
    FigureSpec(
        id="cm01-fig6-9",
        paper="cm01",
        target="Chandra & Mosberger 2001, Fig. 6, 7, 8, 9",
        scenario=CM01_RATE,
        title="Reply rate, CPU and response time vs offered rate",
        x="offered_rate_rps",
        y=("reply_rate_rps", "cpu_server_pct", "resp_time_mean_ms"),
        series=("dispatch", "accept"),
        facets=("cold_conns", "reply_bytes"),
        absent=("dev_poll", "signal_per_fd"),
    ),
    FigureSpec(
        id="cm01-table1",
        paper="cm01",
        target="Chandra & Mosberger 2001, Table 1",
        scenario="cm01-table1-sigio",
        title="RT signals: signals dequeued and SIGIO overflows vs request rate",
        x="request_rate_rps",
        y=("signals_dequeued", "sigio_overflows"),
        series=("dispatch", "cold_conns"),
        only=(("dispatch", ("rtsig",)),),
        keep_invalid="past saturation the generator falls behind too; the server's counters "
                     "are plotted against the rate actually sent",
    ),
    FigureSpec(
        id="cpp-fig4",
        paper="cpp",
        target="Cycles per packet, Fig. 4",
        scenario="cpp-fig4-cpp-vs-bandwidth",
        title="Stack time and instructions per packet vs single-connection bandwidth",
        x="stream_mbps",
        y=("kernel_stack_ns_per_packet", "instructions_per_packet"),
    ),
    FigureSpec(
        id="cpp-fig5",
        paper="cpp",
        target="Cycles per packet, Fig. 5",
        scenario="cpp-fig5-cpp-vs-connections",
        title="Stack time and instructions per packet vs connections, constant bandwidth",
        x="stream_conns",
        y=("kernel_layer_ns_per_packet", "instructions_per_packet"),
        series=("layer",),
        source="kernel_layers",
        log_x=True,
    ),
    FigureSpec(
        id="cpp-fig6",
        paper="cpp",
        target="Cycles per packet, Fig. 6",
        scenario="cpp-fig6-cpp-vs-latency",
        title="Stack time and instructions per packet vs one-way latency, 2048 connections",
        x="one_way_delay_ms",
        y=("kernel_layer_ns_per_packet", "instructions_per_packet"),
        series=("layer",),
        source="kernel_layers",
        words_only="'the cycle count of TCP almost doubles. The cycles per packet of the rest "
                   "of the network stack remains fairly constant as network latency is "
                   "increased.' (§5.3)",
    ),
    FigureSpec(
        id="cpp-fig2",
        paper="cpp",
        target="Cycles per packet, Fig. 2",
        scenario=CPP_THROUGHPUT,
        title="Content throughput vs connections",
        x="client_conns",
        y=("content_throughput_mbps",),
        series=("one_way_delay_ms",),
        log_x=True,
    ),
    FigureSpec(
        id="cpp-fig3",
        paper="cpp",
        target="Cycles per packet, Fig. 3",
        scenario=CPP_THROUGHPUT,
        title="Content throughput vs one-way latency",
        x="one_way_delay_ms",
        y=("content_throughput_mbps",),
        series=("client_conns",),
    ),
    FigureSpec(
        id="cpp-table1",
        paper="cpp",
        target="Cycles per packet, Table 1",
        scenario="cpp-table1-layers",
        title="Stack time per packet by layer",
        x="stream_conns",
        y=("kernel_layer_ns_per_packet", "kernel_layer_share_pct"),
        series=("layer",),
        source="kernel_layers",
        log_x=True,
    ),
)

BY_ID = {spec.id: spec for spec in SPECS}


def label(column: str) -> str:
    return LABELS.get(column, column)


def _named(column: str, value: str) -> str:
    """One part of a series label as a reader says it: a mechanism by its name ("epoll"),
    a number with its axis' label ("750 cold (idle) connections", "delay 10 ms")."""
    try:
        float(value)
    except ValueError:
        return value
    name, _, unit = label(column).partition(" [")
    if unit:
        return f"{name} {value} {unit.rstrip(']')}"
    return f"{value} {name}"


def readable(series: str) -> str:
    """A series or facet label of prepare.py ("dispatch=epoll, cold_conns=750") as legends
    and panel titles show it ("epoll, 750 cold (idle) connections")."""
    if series == "all":
        return series
    parts = (part.partition("=") for part in series.split(", "))
    return ", ".join(_named(column, value) if sep else column for column, sep, value in parts)
