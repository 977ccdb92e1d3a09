"""The asyncio generator's result document: facts only (clients.validity judges them)."""

from __future__ import annotations

import resource
import sys
from typing import Any

from clients.asyncgen.context import Context
from clients.schema import ERROR_KINDS, skeleton


def run_delay_ns() -> int:
    """Time this process waited for a CPU (/proc/self/schedstat)."""
    try:
        with open("/proc/self/schedstat") as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def document(ctx: Context, cold_held: int, t_end: int, ru0: resource.struct_rusage,
             ru1: resource.struct_rusage, run_delay_s: float) -> dict[str, Any]:
    a, c = ctx.args, ctx.c
    counted_to = max(ctx.window_start, min(t_end, ctx.window_end))
    window_s = (counted_to - ctx.window_start) / 1e9
    user = ru1.ru_utime - ru0.ru_utime
    sys_ = ru1.ru_stime - ru0.ru_stime
    doc = skeleton("asyncio", a.config)
    span = int(a.warmup_s + window_s + 0.999)
    last = max([span, *(k + 1 for k in c.timeline)])
    doc.update(
        generator_version=f"python {sys.version.split()[0]}, {type(ctx.loop).__module__}",
        duration_s=window_s,
        window={"start_ns": ctx.window_start, "end_ns": counted_to},
        offered_rate_rps=a.rate_rps if a.rate_rps and a.hot_conns else None,
        request_rate_rps=c.sent / window_s if window_s else 0.0,
        reply_rate_rps=c.replies / window_s if window_s else 0.0,
        requests={"scheduled": c.scheduled, "sent": c.sent, "queued": c.queued,
                  "dropped": c.dropped},
        replies={"total": c.replies, "by_status": dict(c.by_status)},
        errors={k: c.errors[k] for k in ERROR_KINDS},
        late_sends=c.late,
        late_threshold_us=ctx.late_ns / 1e3,
        max_schedule_slip_us=c.max_slip_ns / 1e3,
        latency={"corrected": c.corrected.to_dict(), "uncorrected": c.uncorrected.to_dict(),
                 "tcp_srtt": c.tcp_srtt.to_dict()},
        timeline=[{"t_s": t, "sent": c.timeline[t][0], "replies": c.timeline[t][1],
                   "errors": c.timeline[t][2]} for t in range(last)],
        cold={"requested": a.cold_conns, "established": c.cold_established,
              "held": cold_held, "reconnected": c.cold_reconnected,
              "failed": c.cold_failed, "requests": c.cold_requests,
              "replies": c.cold_replies,
              "established_s": c.established_s},
        generator_cpu={"user_s": user, "sys_s": sys_,
                       "pct": 100 * (user + sys_) / window_s if window_s else None,
                       "run_delay_s": run_delay_s},
        generator_memory={"rss_kb": ru1.ru_maxrss, "bytes_per_cold_conn": None},
    )
    return doc
