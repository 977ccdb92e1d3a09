"""One boot of Debian's 6.12 kernel for three things that need it: wb-ktrace's function grain
(ktrace_inside), live netem (netem_inside) and the run `wanbench run --kernel` gives a guest
(run_inside), each into its own file in OUT_DIR. A part that fails writes its traceback there
instead, so that each test reports its own failure and the others' results stand. One boot,
not three: under TCG a boot and the Python start inside it cost a minute of the suite."""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

from tests.guest import ktrace_inside, netem_inside, run_inside

# ktrace first: it needs only loopback, netem_inside brings a topology up and down
PARTS = {"ktrace.json": ktrace_inside.main, "netem.json": netem_inside.main,
         "run.json": run_inside.main}
TOOK = "took.json"


def main(out_dir: Path) -> None:
    took = {}
    for name, measure in PARTS.items():
        start = time.monotonic()
        try:
            measure(out_dir / name)
        except Exception:  # noqa: BLE001 - the test that reads this file reports it
            (out_dir / name).write_text(json.dumps({"error": traceback.format_exc()}))
        took[name] = round(time.monotonic() - start, 1)
    # what each part cost inside the guest: the suite's longest setup, printed by its fixture
    (out_dir / TOOK).write_text(json.dumps(took))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
