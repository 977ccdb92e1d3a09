"""Load generators behind one interface: wb-sclient, the asyncio generator, httperf, wrk, wrk2.

`command(spec)` gives the generator's argv (so a runner can prefix `ip netns exec` or
`taskset`), `parse_result(spec, stdout, stderr)` turns its output into the result document
(clients/SCHEMA.md), `run(spec, timeout)` does both.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from clients import validity
from clients.paths import binary
from clients.schema import validate
from clients.spec import GENERATORS, LoadSpec, native_argv

__all__ = [
    "GENERATORS", "LoadSpec", "GeneratorFailed", "command", "parse_result", "run", "validate",
]


class GeneratorFailed(RuntimeError):
    pass


def _driver(generator: str):
    from clients.drivers import DRIVERS

    return DRIVERS[generator]


def command(spec: LoadSpec) -> list[str]:
    """argv of the generator process for spec."""
    if spec.generator == "sclient":
        return [str(binary("wb-sclient")), *native_argv(spec)]
    if spec.generator == "asyncio":
        return [sys.executable, "-m", "clients.asyncgen", *native_argv(spec)]
    return _driver(spec.generator).command(spec)


def _last_json_line(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{") and '"schema_version"' in line:
            return json.loads(line)
    return None


def parse_result(spec: LoadSpec, stdout: str, stderr: str) -> dict[str, Any]:
    """The result document of a finished generator run, judged by clients.validity."""
    return judged(spec, _document(spec, stdout, stderr))


def _document(spec: LoadSpec, stdout: str, stderr: str) -> dict[str, Any]:
    if spec.generator in ("sclient", "asyncio"):
        if spec.json_path:
            path = Path(spec.json_path)
            if not path.is_file():
                raise GeneratorFailed(
                    f"{spec.generator} wrote no result to {path}: {stderr.strip()}")
            return json.loads(path.read_text())
        doc = _last_json_line(stdout)
        if doc is None:
            raise GeneratorFailed(f"{spec.generator} printed no result document: {stderr.strip()}")
        return doc
    return _driver(spec.generator).parse(spec, stdout, stderr)


def judged(spec: LoadSpec, doc: dict[str, Any]) -> dict[str, Any]:
    """The document with the verdict of clients.validity on its facts (the generators
    report facts only)."""
    doc.update(validity.judge(validity.Facts.of_one(spec.facts(doc))).document_fields())
    return doc


def run(spec: LoadSpec, timeout: float | None = None) -> dict[str, Any]:
    """Run the generator to completion and return its result document.

    timeout defaults to warm-up + duration + 30 s; the generator is killed past it."""
    if spec.duration_s == 0:
        raise ValueError("duration_s=0 holds connections until signalled: start command(spec) "
                         "yourself and send SIGTERM")
    if timeout is None:
        timeout = spec.warmup_s + spec.duration_s + 30
    with tempfile.TemporaryDirectory(prefix="wb-load-") as tmp:
        if spec.generator in ("sclient", "asyncio") and not spec.json_path:
            spec = dataclasses.replace(spec, json_path=os.path.join(tmp, "result.json"))
        proc = subprocess.Popen(command(spec), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise GeneratorFailed(
                f"{spec.generator} did not finish within {timeout:.0f} s; killed") from None
        if proc.returncode != 0:
            raise GeneratorFailed(
                f"{spec.generator} exited with {proc.returncode}: {stderr.strip()}")
        return parse_result(spec, stdout, stderr)
