"""Ledger of what a run created, written before each object exists, so a crash leaves a list.

Each object's identity goes in before the object can be mistaken for a stranger's: a process's
pid, start time and executable before its program runs (Ledger.spawn), a namespace's inode
before it has a name (harness/topology/netns.py). harness/topology/cleanup.py removes only
objects that still have the identity recorded."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from clients.atomic import leftovers, temporary_prefix, write_atomic
from harness.topology.addressing import check_prefix
from harness.topology.model import TopologyError

DEFAULT_STATE_DIR = Path("/run/wanbench/topologies")
# A ledger being created is first written whole to a claim named after its creator
# (.PREFIX.json.claim-PID-STARTTIME), then linked to its name: it never appears empty or
# half-written, and a claim whose creator died first is known as abandoned by its name alone.
CLAIM = "claim-"
# Runs the command after it only once a line arrives on its stdin; pid and start time survive
# the exec. At end of file (its creator died before writing the line) it exits instead.
GATE = ["sh", "-c", 'read -r _ && exec "$@"', "wanbench-gate"]


def state_dir() -> Path:
    """Where ledgers live; WANBENCH_TOPO_STATE moves it (tests use their own)."""
    return Path(os.environ.get("WANBENCH_TOPO_STATE", DEFAULT_STATE_DIR))


def process_start_time(pid: int) -> int | None:
    """Start time in clock ticks since boot, None when gone (or a zombie): guards pid reuse."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


def process_exe(pid: int) -> str | None:
    """The executable a process runs (/proc/PID/exe), None when gone or unreadable. A binary
    replaced on disk since (a rebuild) reads as its old path."""
    try:
        return os.readlink(f"/proc/{pid}/exe").removesuffix(" (deleted)")
    except OSError:
        return None


def process_identity(pid: int) -> dict:
    """What tells this process from a later one with its pid: start time and executable."""
    return {"pid": pid, "start_time": process_start_time(pid), "exe": process_exe(pid)}


def is_alive(identity: dict | None) -> bool:
    """True when the process with this pid and start time still runs."""
    if not isinstance(identity, dict) or not isinstance(identity.get("pid"), int):
        return False
    start_time = identity.get("start_time")
    return start_time is not None and process_start_time(identity["pid"]) == start_time


@dataclass
class Ledger:
    path: Path
    data: dict

    @classmethod
    def create(cls, prefix: str, topology_file: str | None, backend: str | None,
               directory: Path | None = None) -> Ledger:
        directory = directory or state_dir()
        directory.mkdir(parents=True, exist_ok=True)
        owner = process_identity(os.getpid())
        ledger = cls(directory / f"{prefix}.json", {
            "prefix": prefix, "topology_file": topology_file, "backend": backend,
            "owner": owner, "created_at": time.time(), "objects": [], "info": {},
        })
        claim = ledger.path.with_name(f"{temporary_prefix(ledger.path)}{CLAIM}"
                                      f"{owner['pid']}-{owner['start_time']}")
        with open(claim, "xb") as out:
            out.write(ledger.dump())
            out.flush()
            os.fsync(out.fileno())
        try:  # claims the prefix: a second run with it must not adopt the first one's objects
            os.link(claim, ledger.path)
        except FileExistsError:
            raise TopologyError(f"run prefix {prefix} is in use ({ledger.path}); choose "
                                f"another, or `wanbench topo down --prefix {prefix}`") from None
        finally:
            claim.unlink(missing_ok=True)
        return ledger

    @classmethod
    def load(cls, path: Path) -> Ledger:
        return cls(path, json.loads(path.read_text()))

    @classmethod
    def load_all(cls, directory: Path | None = None) -> list[Ledger]:
        directory = directory or state_dir()
        if not directory.is_dir():
            return []
        ledgers = []
        for path in sorted(directory.glob("wb*.json")):
            if "-linkem-" in path.name:
                continue
            try:
                ledger = cls.load(path)
            except (OSError, json.JSONDecodeError, UnicodeDecodeError):
                continue  # not one of ours: ours never appear part-written (CLAIM, saves)
            if isinstance(ledger.data, dict):
                ledgers.append(ledger)
        return ledgers

    @property
    def prefix(self) -> str:
        return str(self.data.get("prefix"))

    def problem(self) -> str | None:
        """Why this ledger must not be acted on (None: it is one wanbench wrote).

        Cleaning trusts a ledger only as far as this: its prefix is a valid run prefix and
        its file is named after it, so it can only ever name objects of its own run."""
        prefix = self.data.get("prefix")
        try:
            check_prefix(prefix if isinstance(prefix, str) and prefix.isalnum() else repr(prefix))
        except TopologyError:
            return f"{prefix!r} is not a run prefix (wb then 2-8 lowercase letters or digits)"
        if self.path.name != f"{prefix}.json":
            return f"it records prefix {prefix}, but a ledger of that run is named {prefix}.json"
        objects = self.data.get("objects")
        if not isinstance(objects, list) or not all(isinstance(e, dict) for e in objects):
            return "its objects are not a list of entries"
        return None

    def dump(self) -> bytes:
        return json.dumps(self.data, indent=1).encode()

    def save(self) -> None:
        write_atomic(self.path, self.dump())

    def add(self, entry: dict) -> dict:
        self.data["objects"].append(dict(entry))
        self.save()
        return self.data["objects"][-1]

    def update(self, entry: dict, **fields) -> None:
        entry.update(fields)
        self.save()

    def spawn(self, entry: dict, argv: list[str], **popen) -> subprocess.Popen:
        """Starts argv as the process entry stands for, its identity recorded in entry before
        argv runs, so a process of the run never runs unrecorded. argv[0] is a path."""
        proc = subprocess.Popen([*GATE, *argv], stdin=subprocess.PIPE, **popen)
        try:
            self.update(entry, pid=proc.pid, start_time=process_start_time(proc.pid),
                        exe=os.path.realpath(argv[0]))
            os.write(proc.stdin.fileno(), b"go\n")
        finally:
            proc.stdin.close()
        return proc

    def set_info(self, **info) -> None:
        self.data["info"].update(info)
        self.save()

    def detach(self) -> None:
        """The topology outlives its creator (`topo up`): no live owner from now on."""
        self.data["owner"] = None
        self.save()

    def owner_alive(self) -> bool:
        return is_alive(self.data.get("owner"))

    def entries(self, kind: str) -> list[dict]:
        return [e for e in self.data.get("objects") or [] if isinstance(e, dict)
                and e.get("kind") == kind]

    def remove(self) -> None:
        """The ledger, after what writes of it cut short by a crash left (last: until it is
        gone, a later clean finds it)."""
        for leftover in leftovers(self.path):
            leftover.unlink(missing_ok=True)
        self.path.unlink(missing_ok=True)


def abandoned_claims(directory: Path | None = None) -> list[Path]:
    """Claims of ledgers whose creator died before the ledger had its name (see CLAIM)."""
    directory = directory or state_dir()
    found = []
    for claim in sorted(directory.glob(f".wb*.json.{CLAIM}*")) if directory.is_dir() else []:
        pid, _, start_time = claim.name.rpartition(CLAIM)[2].partition("-")
        if pid.isdigit() and start_time.isdigit() and not is_alive(
                {"pid": int(pid), "start_time": int(start_time)}):
            found.append(claim)
    return found
