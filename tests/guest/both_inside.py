"""One boot of Debian's 6.12 kernel for three things that need it: wb-ktrace's function grain
(ktrace_inside), live netem (netem_inside) and the run `wanbench run --kernel` gives a guest
(run_inside), each into its own file in OUT_DIR. A part that fails writes its traceback there
instead, so that each test reports its own failure and the others' results stand. One boot,
not three: under TCG a boot and the Python start inside it cost a minute of the suite."""

from __future__ import annotations

import json
import sys
import threading
import time
import traceback
from pathlib import Path

from tests.guest import ktrace_inside, netem_inside, run_inside

# ktrace first: it needs only loopback, netem_inside brings a topology up and down
PARTS = {"ktrace.json": ktrace_inside.main, "netem.json": netem_inside.main,
         "run.json": run_inside.main}
TOOK = "took.json"
MEMORY_SAMPLE_S = 0.5


class LowestAvailableMemory(threading.Thread):
    """The guest's lowest MemAvailable while the parts run, sampled: how close its memory came
    to the OOM killer (whose kills, and a panic, reach the console at the loglevel the host
    gives)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.lowest_mb: float | None = None

    def run(self) -> None:
        while True:
            for line in Path("/proc/meminfo").read_text().splitlines():
                if line.startswith("MemAvailable:"):
                    mb = int(line.split()[1]) / 1024
                    self.lowest_mb = mb if self.lowest_mb is None else min(self.lowest_mb, mb)
            time.sleep(MEMORY_SAMPLE_S)


def main(out_dir: Path) -> None:
    memory = LowestAvailableMemory()
    memory.start()
    took: dict[str, float | None] = {}
    for name, measure in PARTS.items():
        start = time.monotonic()
        try:
            measure(out_dir / name)
        except Exception:  # noqa: BLE001 - the test that reads this file reports it
            (out_dir / name).write_text(json.dumps({"error": traceback.format_exc()}))
        took[name] = round(time.monotonic() - start, 1)
    took["mem_available_min_mb"] = memory.lowest_mb and round(memory.lowest_mb)
    # what each part cost inside the guest, and its memory's low point: printed by the fixture
    (out_dir / TOOK).write_text(json.dumps(took))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
