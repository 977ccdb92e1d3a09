"""What one point × repetition measured, turned into its record: rows (harness.results.rows)
judged valid or not by the rules of clients.validity."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from clients import validity
from harness.metrics import ktrace
from harness.results import facts, rows
from harness.runner.context import RunContext
from harness.runner.launch import Measurement
from harness.scenario import Point, WbServer


class PointRecorder:
    """The record of one point × repetition and attempt, measured or failed."""

    def __init__(self, ctx: RunContext, point: Point, repetition: int, attempt: int = 0):
        self.ctx, self.point, self.repetition, self.attempt = ctx, point, repetition, attempt
        self.config = point.config
        self.ids = rows.point_ids(ctx.run_id, point.point_id, repetition)

    def failed(self, reason: validity.Reason, lost_host: str | None = None) -> dict[str, Any]:
        """lost_host: the cluster worker whose loss cut the point short (resume measures
        it again)."""
        record = rows.failed_record(self.ids, self.ctx.scenario.name, self.point.columns, reason)
        if lost_host:
            record["point"]["lost_host"] = lost_host
        return record

    def record(self, measured: Measurement) -> dict[str, Any]:
        doc = measured.document
        rtsig = isinstance(self.config.server, WbServer) and self.config.server.dispatch == "rtsig"
        row = rows.measured_row(
            self.ids, self.config.name, self.point.columns, doc, measured.window,
            rows.server_deltas(measured.stats_before, measured.stats_after, rtsig))
        row.update(ktrace.per_reply(row))
        row.update(rows.window_columns(measured.interval.start_ns, measured.interval.end_ns,
                                       measured.edges))
        row["cold_held"] = measured.cold_held
        row["server_carried_over"] = measured.carried_over
        row["server_cpus"] = self._server_cpus()
        window = facts.window_facts(row, self._setup(),
                                    f"points row of {self.point.point_id} r{self.repetition}")
        verdict = validity.judge(dataclasses.replace(measured.facts, window=window))
        row["server_saturated"] = verdict.server_saturated
        row.update(rows.verdict_columns(verdict))
        row["attempt"] = self.attempt
        return rows.measured_record(self.ids, row, doc, measured.samples, measured.profile_rows)

    def _setup(self) -> validity.WindowFacts:
        """How the point was set up, the facts no sampler measures."""
        cfg = self.config
        return validity.WindowFacts(
            server_cpu=cfg.cpus.server,
            single_process=isinstance(cfg.server, WbServer) and cfg.server.workers == 1,
            stream=cfg.stream is not None, server_bound=cfg.hot.server_bound,
            emulated=self.ctx.guest is not None and self.ctx.guest.emulated,
            cold_asked=cfg.cold.conns)

    def _server_cpus(self) -> float:
        cfg = self.config
        workers = cfg.server.workers if isinstance(cfg.server, WbServer) else 1
        return validity.server_cpus(cfg.cpus.server_budget_pct, cfg.cpus.server is not None,
                                    workers, os.cpu_count() or 1)
