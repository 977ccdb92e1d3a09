"""Benchmark: CPU the samplers themselves use while sampling a server's window (goal < 1 %)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.manifest import tsc_hz  # noqa: E402
from harness.metrics.sampler import SamplerConfig, WindowSampler  # noqa: E402

WINDOW_S = float(os.environ.get("WANBENCH_BENCH_WINDOW_S", "30"))


def self_cpu_s() -> float:
    # CLOCK_PROCESS_CPUTIME_ID is exact; getrusage is tick-sampled and aliases with 1 s wakeups.
    return time.process_time()


async def sample(pid: int, workdir: Path) -> tuple[float, float, int]:
    hz, _ = tsc_hz()
    sampler = WindowSampler(SamplerConfig(server_pid=pid, server_cpu=0, workdir=workdir,
                                          tsc_hz=hz))
    await sampler.prepare(generator_pids=(pid,))
    await sampler.start()  # its first reading pays one-off import costs: not counted
    cpu0, t0 = self_cpu_s(), time.monotonic()
    await asyncio.sleep(WINDOW_S)
    await sampler.stop()
    return self_cpu_s() - cpu0, time.monotonic() - t0, len(sampler.timeseries)


def main() -> int:
    target = subprocess.Popen(["sleep", str(WINDOW_S + 30)])
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cpu_s, wall_s, samples = asyncio.run(sample(target.pid, Path(tmp)))
    finally:
        target.kill()
        target.wait()
    pct = 100 * cpu_s / wall_s
    print(f"| window | sampler CPU | share of one core | samples | load |\n|---|---|---|---|---|\n"
          f"| {wall_s:.1f} s | {cpu_s * 1000:.1f} ms | {pct:.3f} % | {samples} | "
          f"{os.getloadavg()[0]:.2f} |")
    return 0 if pct < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
