"""Run inside a guest by test_netem_live: topologies/dumbbell-wan.yaml under the netem
backend with the shaping of SHAPING, measured; the measurements as JSON into argv[1]."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
from pathlib import Path

from harness.topology import bring_up, load_topology
from harness.topology.calibrate import floor_path, link_path, measure

REPO = Path(__file__).resolve().parents[2]
# cold (a) -> server (b): 100 ms RTT, 240 Mbit/s (a BDP of 2,000 packets: queue limit 3,000,
# above the 1,000-packet floor), replies lost at 20 %; hot: 8 Mbit/s, nothing else
SHAPING = {"links.cold.rate_mbit": "240", "links.cold.b_to_a.loss_pct": "20",
           "links.hot.rate_mbit": "8"}
PINGS = 400
BULK_S = 3.0


def ping(prefix: list[str], address: str) -> dict:
    out = subprocess.run([*prefix, "ping", "-n", "-c", str(PINGS), "-i", "0.01", "-W", "2",
                          address], capture_output=True, text=True, check=False).stdout
    sent = int(re.search(r"(\d+) packets transmitted", out).group(1))
    rtts = [float(ms) for ms in re.findall(r"icmp_seq=\d+ .*time=([\d.]+) ms", out)]
    return {"sent": sent, "received": len(rtts), "rtt_min_ms": min(rtts),
            "rtt_median_ms": statistics.median(rtts), "rtt_max_ms": max(rtts)}


def qdiscs(handle, link) -> dict:
    """The netem qdisc of each direction as the kernel reports it (tc -s -j)."""
    shown = {}
    for direction, host, dev in (("a_to_b", link.a, link.a_dev), ("b_to_a", link.b, link.b_dev)):
        out = subprocess.run(["tc", "-s", "-j", "-n", handle.netns(host), "qdisc", "show", "dev",
                              dev], capture_output=True, text=True, check=True).stdout
        shown[direction] = next(q for q in json.loads(out) if q["kind"] == "netem")
    return shown


def main(out: Path) -> None:
    topology = load_topology(REPO / "topologies/dumbbell-wan.yaml", SHAPING)
    with bring_up(topology, "netem", calibrate=False) as handle:
        links = {link.name: link for link in handle.plan.links}
        cold_host, server = handle.role_hosts("cold")[0], handle.role_hosts("server")[0]
        cold_ping = ping(handle.exec_prefix(cold_host), links["cold"].b_addr)
        with floor_path(topology.links["hot"], handle.backend) as (floor, _):
            hot = measure(link_path(handle.plan, links["hot"]), floor, BULK_S, BULK_S)
        result = {
            "backend": handle.backend,
            "server": server,
            "cold_ping": cold_ping,
            "hot_upload_bps": hot["upload_bps"], "hot_download_bps": hot["download_bps"],
            "qdiscs": {name: qdiscs(handle, links[name]) for name in ("cold", "hot")},
            "manifest_links": handle.manifest()["links"],
        }
    out.write_text(json.dumps(result, indent=1))
