"""Run inside a guest by test_kernels: the command `wanbench run --kernel IMAGE` gives a guest
(the runner's child entry, harness.runner.child) on scenarios/kernels-smoke.yaml, its results
under the folder given; its exit status and result file as JSON into argv[1]."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.runner.child import child_argv
from harness.runner.outcome import RunRequest

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "scenarios/kernels-smoke.yaml"


def main(path: Path) -> None:
    out = path.parent / "runs"
    result = path.parent / "run-result.json"
    request = RunRequest(scenario=SMOKE, out=out, allow_invalid=True)
    status = subprocess.run(child_argv(request, result)).returncode
    path.write_text(json.dumps({"status": status, "result": str(result)}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
