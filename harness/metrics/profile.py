"""perf record -e cpu-clock profiles, grouped by function and by layer as in the papers."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

# First matching prefix wins; order matters (e.g. "tcp_v4_rcv" is TCP, not IP).
LAYER_PREFIXES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("idle", ("pv_native_safe_halt", "native_safe_halt", "default_idle", "cpuidle", "intel_idle",
              "acpi_idle", "poll_idle", "mwait_idle", "do_idle", "cpu_idle")),
    ("driver", ("loopback_", "veth_", "tun_", "virtnet_", "virtqueue", "e1000", "ixgbe",
                "mlx5", "i40e")),
    ("tcp", ("tcp_", "__tcp_", "inet_csk", "inet_sendmsg", "inet_recvmsg", "inet_accept",
             "inet_ehash", "__inet_", "inet_", "sk_stream", "sk_")),
    ("ip", ("ip_", "__ip_", "ipv4_", "ip4_", "fib_", "dst_", "nf_", "raw_", "icmp_")),
    ("link", ("dev_", "__dev_", "netif_", "__netif", "napi_", "__napi", "net_rx_action",
              "process_backlog", "eth_", "sch_", "pfifo", "qdisc", "validate_xmit", "skb_",
              "__skb", "kfree_skb", "consume_skb", "__alloc_skb", "alloc_skb")),
    ("syscall", ("__x64_sys_", "__sys_", "do_sys", "sys_", "ksys_", "__se_sys", "entry_SYSCALL",
                 "do_syscall", "syscall_", "sock_", "__sock_", "sockfd_", "do_epoll", "ep_",
                 "do_select", "core_sys_select", "do_poll", "do_sys_poll", "fdget", "__fdget",
                 "__fget", "fput", "vfs_", "io_uring", "__io_", "io_", "do_sigtimedwait",
                 "send_sigio", "kill_fasync", "__x64_", "copy_user", "_copy_", "rep_movs",
                 "fd_install", "alloc_fd", "__alloc_fd", "get_unused_fd")),
)

REPORT_LINE = re.compile(r"^\s*([\d.]+)%\s+(\d+)\s+\[(.)\]\s+(\S.*?)\s*$")


def record_argv(cpu: int, output: Path, hardware_counters: bool = False) -> list[str]:
    """With hardware counters, sampled on cycles (an NMI: a sample lands where the cycles
    went, inside interrupt-off code too); without, on cpu-clock (a timer interrupt, which
    waits for interrupts to be on: in a guest softirq work is charged to handle_softirqs)."""
    event = "cycles" if hardware_counters else "cpu-clock"
    # 4 MB of buffer: perf counts at idle priority (perfctl) and may wait a
    # while for a CPU; at 4 kHz that is several seconds of samples. No BPF side-band: its
    # thread polls with a 1 s timeout and holds perf's exit, the point's end, up to that long;
    # what it names (BPF programs loaded while recording) is below the report's 0.1 %
    return ["perf", "record", "-q", "--no-bpf-event", "-e", event, "-C", str(cpu), "-m", "1024",
            "-o", str(output)]


def layer_of(symbol: str, kernel: bool) -> str:
    if not kernel:
        return "user"
    for layer, prefixes in LAYER_PREFIXES:
        if symbol.startswith(prefixes):
            return layer
    return "other"


def parse_report(text: str) -> list[dict[str, Any]]:
    """Rows of `perf report --stdio -n --sort sym`: symbol, layer, samples, pct."""
    rows = []
    for line in text.splitlines():
        match = REPORT_LINE.match(line)
        if not match:
            continue
        pct, samples, space, symbol = match.groups()
        rows.append({"symbol": symbol, "layer": layer_of(symbol, space == "k"),
                     "samples": int(samples), "pct": float(pct)})
    return rows


def report(data: Path) -> list[dict[str, Any]]:
    done = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "-n", "--sort", "sym",
                           "--percent-limit", "0.1"], capture_output=True, text=True,
                          timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"perf report failed: {done.stderr.strip()[:500]}")
    return parse_report(done.stdout)
