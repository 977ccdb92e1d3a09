"""What one point × repetition measured, turned into its record: rows (harness.results.rows)
judged valid or not by the rules of clients.validity."""

from __future__ import annotations

import os
from typing import Any

from clients import validity
from harness.metrics import ktrace
from harness.results import rows
from harness.runner.context import RunContext
from harness.runner.launch import Measurement
from harness.scenario import Point, WbServer


class PointRecorder:
    """The record of one point × repetition and attempt, measured or failed."""

    def __init__(self, ctx: RunContext, point: Point, repetition: int, attempt: int = 0):
        self.ctx, self.point, self.repetition, self.attempt = ctx, point, repetition, attempt
        self.config = point.config
        self.ids = rows.point_ids(ctx.run_id, point.point_id, repetition)

    def failed(self, reason: str, lost_host: str | None = None) -> dict[str, Any]:
        """lost_host: the cluster worker whose loss cut the point short (resume measures
        it again)."""
        record = rows.failed_record(self.ids, self.ctx.scenario.name, self.point.columns, reason)
        if lost_host:
            record["point"]["lost_host"] = lost_host
        return record

    def record(self, measured: Measurement) -> dict[str, Any]:
        doc, cold_doc = measured.document, measured.cold
        rtsig = isinstance(self.config.server, WbServer) and self.config.server.dispatch == "rtsig"
        row = rows.measured_row(
            self.ids, self.config.name, self.point.columns, doc, measured.window,
            rows.server_deltas(measured.stats_before, measured.stats_after, rtsig))
        row.update(ktrace.per_reply(row))
        reasons = list(doc.get("invalid_reasons") or [])
        if (doc.get("generator") not in validity.CPU_SAYS_NOTHING
                and not any(r.startswith("generator CPU saturated") for r in reasons)):
            # the hot and cold generators share their CPU: judge the sum, less the hot
            # generator's polls that found nothing to do
            reasons.append(validity.generator_saturated(
                row.get("cpu_generator_pct"), idle_poll=row.get("generator_idle_poll_pct")))
        if cold_doc is not None:
            row["cold_held"] = rows.cold_held(cold_doc)
            reasons.append(validity.cold_lost(row["cold_held"], self.config.cold.conns))
        row["server_saturated"] = validity.server_saturated(
            row.get("reply_rate_rps"), doc.get("offered_rate_rps"), row.get("cpu_server_pct"),
            self._server_cpus(), row.get("server_wait_pct"))
        interference = [r for r in (
            validity.stolen(row.get("steal_server_cpu_pct"), row.get("steal_generator_cpu_pct")),
            # a server's own workers share its CPU: their waits are not interference
            validity.crowded(row.get("server_wait_pct"), self.config.cpus.server,
                             row.get("other_server_cpu_pct"))
            if self._server_cpus() == 1 and self._single_process_server() else None,
            validity.foreign_work(row.get("other_server_cpu_pct"), self.config.cpus.server)
            if self.config.stream is not None else None) if r]
        reasons.append(validity.closed_loop_elsewhere(
            doc.get("offered_rate_rps"), row.get("hot_conns"), row["server_saturated"],
            row.get("cpu_server_pct"), row.get("generator_wait_pct"),
            self.config.hot.server_bound)
            if self.config.stream is None else None)
        reasons.append(validity.emulated_cpu(
            self.ctx.guest is not None and self.ctx.guest.emulated))  # counts stand, timings do not
        reasons = [r for r in reasons if r]
        # late sends that another task's time on the generator's CPU explains are its
        # interference: measured again (interference_retries), not the generator's limit
        for late in [r for r in reasons if r.startswith("late sends")]:
            crowded = validity.generator_crowded(late, row.get("generator_wait_pct"),
                                                 row.get("other_generator_cpu_pct"))
            if crowded:
                reasons.remove(late)
                interference.append(crowded)
        row["valid"] = not (reasons or interference)
        row["invalid_reason"] = "; ".join(reasons + interference) or None
        row["interference_only"] = bool(interference) and not reasons
        row["attempt"] = self.attempt
        return rows.measured_record(self.ids, row, doc, measured.samples, measured.profile_rows)

    def _single_process_server(self) -> bool:
        return isinstance(self.config.server, WbServer) and self.config.server.workers == 1

    def _server_cpus(self) -> float:
        """CPUs the server may use: its budget's share of one, one when pinned, else its
        workers (at most the machine's)."""
        if self.config.cpus.server_budget_pct:
            return self.config.cpus.server_budget_pct / 100
        if self.config.cpus.server is not None:
            return 1
        workers = self.config.server.workers if isinstance(self.config.server, WbServer) else 1
        return max(1, min(workers, os.cpu_count() or 1))
