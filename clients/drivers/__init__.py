"""Drivers for external load generators: each maps a LoadSpec to argv and parses the output."""

from __future__ import annotations

from clients.drivers import httperf, wrk, wrk2

DRIVERS = {"httperf": httperf, "wrk": wrk, "wrk2": wrk2}
