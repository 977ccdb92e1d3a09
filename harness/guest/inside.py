"""Runs inside the guest, as its command: loads the kernel modules the run needs, then runs
the command with the guest's record in its environment. Marker lines on the console tell
the host how far the guest got (harness.guest.machine reads them)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from harness.guest import record

STARTED = "wanbench-guest: started"
MISSING_MODULE = "wanbench-guest: missing module"
EXITED = "wanbench-guest: exit status"
MISSING_MODULE_STATUS = 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.guest.inside")
    parser.add_argument("--record", required=True, help="the GuestRecord as JSON")
    parser.add_argument("--module", action="append", default=[], help="kernel module needed")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    print(STARTED, flush=True)
    for module in args.module:
        # modprobe succeeds for a module built into the kernel too
        loaded = subprocess.run(["modprobe", module], capture_output=True, text=True)
        if loaded.returncode != 0:
            print(f"{MISSING_MODULE} {module}: {loaded.stderr.strip()}", flush=True)
            return MISSING_MODULE_STATUS
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    env = {**os.environ, record.ENV: args.record}
    status = subprocess.run(command, env=env).returncode
    print(f"{EXITED} {status}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
