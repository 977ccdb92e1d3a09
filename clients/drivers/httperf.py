"""httperf: sessions of persistent connections sending periodic requests (Chandra's client)."""

from __future__ import annotations

import re
from typing import Any

from clients.drivers.common import (
    Unsupported,
    check_command,
    prefix,
    refuse,
    search,
    tool_path,
)
from clients.schema import null_histogram, skeleton
from clients.spec import LoadSpec

TOOL = "httperf"
FD_LIMIT = 1000  # httperf is select()-bound: FD_SETSIZE 1024 minus its own descriptors
SESSION_START_RATE = 5000.0  # sessions per second: 50 hot connections open within ~10 ms
# httperf's timer wheel turns once per millisecond and a think time of T fires one tick
# after T rounded to the tick (measured here: 24 ms asked -> 25.0 ms between requests)
TIMER_TICK_S = 1e-3


def command(spec: LoadSpec) -> list[str]:
    refuse(spec, TOOL)
    if spec.hot_conns > FD_LIMIT:
        raise Unsupported(f"httperf stops near 1024 descriptors (select); {spec.hot_conns} hot "
                          f"connections need sclient")
    if spec.rate_rps is None:
        raise Unsupported("httperf has no time-bounded closed loop; give a rate or use wrk")
    if spec.arrivals == "poisson" and spec.requests_per_conn is None:
        raise Unsupported("httperf sessions pace requests by a fixed think time; Poisson "
                          "arrivals need requests_per_conn (or sclient)")
    host, port = spec.resolved_targets()[0]
    # httperf has no warm-up either: everything from the first connection is measured
    seconds = spec.warmup_s + spec.duration_s
    argv = [*prefix(spec), tool_path("httperf"), f"--server={host}", f"--port={port}",
            f"--uri={spec.path}", f"--timeout={spec.response_timeout_s:g}"]
    if spec.requests_per_conn is None:
        # one session per hot connection, each sending a request every hot_conns/rate seconds
        per_conn = spec.rate_rps / spec.hot_conns
        if 1 / per_conn < 2 * TIMER_TICK_S:
            raise Unsupported(f"httperf paces with 1 ms timer ticks; a request every "
                              f"{1e3 / per_conn:.2f} ms per connection needs more hot "
                              f"connections (or sclient)")
        calls = max(1, round(per_conn * seconds))
        think_s = 1 / per_conn - TIMER_TICK_S
        argv += [f"--wsess={spec.hot_conns},{calls},{think_s:.6f}", "--max-connections=1",
                 f"--rate={SESSION_START_RATE:g}"]
    else:
        conns = max(1, round(spec.rate_rps / spec.requests_per_conn * seconds))
        argv += [f"--num-conns={conns}", f"--num-calls={spec.requests_per_conn}",
                 f"--rate={spec.rate_rps / spec.requests_per_conn:g}"]
        if spec.arrivals == "poisson":
            argv[-1] = f"--period=e{spec.requests_per_conn / spec.rate_rps:.6f}"
    return check_command(spec, argv + (["--hog"] if spec.hog else []))


def _ints(pattern: str, text: str) -> list[int]:
    return [int(float(x)) for x in search(pattern, text, TOOL).groups()]


def parse(spec: LoadSpec, stdout: str, stderr: str) -> dict[str, Any]:
    doc = skeleton(TOOL, spec.config())
    conns, requests, replies = _ints(
        r"^Total: connections (\d+) requests (\d+) replies (\d+)", stdout)
    window_s = float(search(r"test-duration ([\d.]+) s", stdout, TOOL).group(1))
    statuses = re.findall(r"(\dxx)=(\d+)", search(r"^Reply status: (.*)$", stdout, TOOL).group(1))
    _total, client_timo, socket_timo, refused, reset = _ints(
        r"^Errors: total (\d+) client-timo (\d+) socket-timo (\d+) connrefused (\d+) "
        r"connreset (\d+)",
        stdout)
    fd_unavail, addr_unavail, ftab_full, other = _ints(
        r"^Errors: fd-unavail (\d+) addrunavail (\d+) ftab-full (\d+) other (\d+)", stdout)
    cpu = search(r"^CPU time \[s\]: user ([\d.]+) system ([\d.]+) \(user [\d.]+% system [\d.]+% "
                 r"total ([\d.]+)%\)", stdout, TOOL)
    response_ms = float(search(r"^Reply time \[ms\]: response ([\d.]+)", stdout, TOOL).group(1))
    request_rate = float(search(r"^Request rate: ([\d.]+) req/s", stdout, TOOL).group(1))
    doc.update(
        duration_s=window_s,
        warmup_s=0.0,
        request_rate_rps=request_rate,
        reply_rate_rps=replies / window_s if window_s else None,
        requests={"scheduled": None, "sent": requests, "queued": None, "dropped": None},
        replies={"total": replies, "by_status": {k: int(v) for k, v in statuses if int(v)}},
        # facts only: clients.validity judges running out of ports or descriptors
        errors={"connect_timeout": socket_timo, "refused": refused, "reset": reset,
                "response_timeout": client_timo, "no_local_port": addr_unavail,
                "no_descriptor": fd_unavail + ftab_full, "other": other},
        generator_cpu={"user_s": float(cpu.group(1)), "sys_s": float(cpu.group(2)),
                       "pct": float(cpu.group(3)), "run_delay_s": None},
        latency={"corrected": null_histogram(),
                 "uncorrected": null_histogram(mean_us=response_ms * 1e3)},
    )
    doc["config"]["connections_opened"] = conns
    doc["config"]["measured_warmup"] = "httperf measures its whole run, warm-up included"
    return doc
