"""`wanbench topo up|status|exec|down|clean`: topologies from the command line."""

from __future__ import annotations

import argparse
import json
import os
import sys

from clients.paths import MissingBinary
from harness.topology import cgroups, netns
from harness.topology.backend_probe import probe_here
from harness.topology.backends import CHOICES as BACKEND_CHOICES
from harness.topology.builder import bring_up, planned_commands
from harness.topology.cleanup import (
    Cleaned,
    clean_dead_runs,
    remove_abandoned_claims,
    remove_run,
    untrusted,
)
from harness.topology.ledger import Ledger, is_alive
from harness.topology.model import TopologyError, load_topology, parse_override


def register(subparsers) -> None:
    topo = subparsers.add_parser("topo", help="bring emulated WAN topologies up and down")
    sub = topo.add_subparsers(dest="topo_command", metavar="ACTION", required=True)

    up = sub.add_parser("up", help="build a topology and leave it up")
    up.add_argument("file", help="topology YAML, e.g. topologies/dumbbell-wan.yaml")
    up.add_argument("--backend", choices=BACKEND_CHOICES, default="auto",
                    help="how links are emulated (default: auto, the best this machine has: "
                         "`wanbench doctor`)")
    up.add_argument("--set", dest="overrides", action="append", default=[],
                    metavar="KEY=VALUE", help="override a field, e.g. links.cold.delay_ms=50")
    up.add_argument("--prefix", help="run prefix (wb + 2-8 lowercase letters/digits)")
    up.add_argument("--no-calibrate", action="store_true", help="skip RTT/rate measurement")
    up.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    up.set_defaults(func=cmd_up)

    status = sub.add_parser("status", help="list topologies wanbench has up")
    status.add_argument("--json", action="store_true",
                        help="print them as JSON (a list, one object per ledger)")
    status.set_defaults(func=cmd_status)

    ex = sub.add_parser("exec", help="run a command in a host's namespace")
    ex.add_argument("host", help="a host of the topology, e.g. server")
    ex.add_argument("--prefix", help="which topology, when more than one is up")
    ex.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD ...",
                    help="the command, after --")
    ex.set_defaults(func=cmd_exec)

    down = sub.add_parser("down", help="tear a topology down")
    down.add_argument("--prefix", help="which topology, when more than one is up")
    down.set_defaults(func=cmd_down)

    sub.add_parser("clean", help="remove what crashed or detached runs left: their "
                   "namespaces (and what runs in them), emulators, CPU-budget cgroups and "
                   "ledgers; never what their ledgers did not record").set_defaults(func=cmd_clean)


def _fail(message: str) -> int:
    print(f"wanbench topo: {message}", file=sys.stderr)
    return 2


def cmd_up(args: argparse.Namespace) -> int:
    try:
        overrides = dict(parse_override(text) for text in args.overrides)
        topology = load_topology(args.file, overrides, origin="--set")
        if args.dry_run:
            backend, probe = probe_here(topology, args.backend)
            print(f"# backend {backend} ({probe['reason']}); run prefix "
                  f"{args.prefix or 'wbdryrun'}")
            for line in planned_commands(topology, backend, args.prefix or "wbdryrun"):
                print(line)
            return 0
        handle = bring_up(topology, args.backend, args.prefix, calibrate=not args.no_calibrate)
    except (TopologyError, MissingBinary) as exc:
        return _fail(str(exc))
    handle.detach()
    summary = {k: handle.manifest()[k] for k in ("prefix", "backend", "hosts", "calibration")}
    summary["probe_reason"] = handle.probe.get("reason")
    print(json.dumps(summary, indent=1))
    return 0


def _group(ledger: Ledger, entry: dict) -> str:
    try:
        group = cgroups.recorded_group(ledger, entry)
    except cgroups.CgroupError:
        return f"{entry.get('name')!r} (gone: no CPU hierarchy here)"
    if group is None:
        return f"{entry.get('name')!r} (not the run's)"
    return f"{group} ({'present' if group.is_dir() else 'gone'})"


def _describe(ledger: Ledger, present: set[str]) -> dict:
    problem = ledger.problem()
    if problem:
        return {"ledger": str(ledger.path), "ignored": problem}
    hosts = ledger.data["info"].get("hosts", {})
    owner = ledger.data.get("owner")
    return {"prefix": ledger.prefix, "topology": ledger.data.get("topology_file"),
            "backend": ledger.data["info"].get("backend", ledger.data["backend"]),
            "owner": ("detached" if owner is None else
                      f"pid {owner['pid']} ({'alive' if ledger.owner_alive() else 'dead'})"),
            "hosts": {h: ns if ns in present else f"{ns} (missing)" for h, ns in hosts.items()},
            "emulators": {e["link"]: f"pid {e.get('pid')} "
                                     f"({'running' if is_alive(e) else 'gone'})"
                          for e in ledger.entries("process")},
            "cgroups": [_group(ledger, e) for e in ledger.entries("cgroup")]}


def cmd_status(args: argparse.Namespace) -> int:
    ledgers = Ledger.load_all()
    present = set(netns.names())
    described = [_describe(ledger, present) for ledger in ledgers]
    if args.json:
        print(json.dumps(described, indent=1))
    elif not described:
        print("no topology up")
    else:
        _print_status(described)
    return 0


def _print_status(described: list[dict]) -> None:
    """One row per ledger: what `topo down --prefix` and `topo clean` would act on."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="topologies up", box=None, pad_edge=False)
    for column in ("prefix", "topology", "backend", "owner", "hosts", "emulators", "cgroups"):
        table.add_column(column, overflow="fold")
    for entry in described:
        if "ignored" in entry:
            table.add_row("?", entry["ledger"], "", "", f"ignored: {entry['ignored']}", "", "")
            continue
        table.add_row(entry["prefix"], entry["topology"] or "—", entry["backend"],
                      entry["owner"],
                      "\n".join(f"{h}: {ns}" for h, ns in entry["hosts"].items()) or "—",
                      "\n".join(f"{link}: {p}" for link, p in entry["emulators"].items())
                      or "—", "\n".join(entry["cgroups"]) or "—")
    Console().print(table, highlight=False)


def _pick(prefix: str | None) -> Ledger:
    """The one topology up (a ledger with hosts; a CPU budget's has none), or prefix's."""
    ledgers = [ledger for ledger in Ledger.load_all()
               if not ledger.problem() and ledger.data["info"].get("hosts")]
    if prefix:
        ledgers = [ledger for ledger in ledgers if ledger.prefix == prefix]
    if len(ledgers) != 1:
        found = ", ".join(ledger.prefix for ledger in ledgers) or "none"
        raise TopologyError(f"{'no' if not ledgers else 'more than one'} topology up "
                            f"(found: {found}); pass --prefix PREFIX (see `wanbench topo status`)")
    return ledgers[0]


def cmd_exec(args: argparse.Namespace) -> int:
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        return _fail("exec needs a command: wanbench topo exec HOST -- CMD ...")
    try:
        hosts = _pick(args.prefix).data["info"].get("hosts", {})
    except TopologyError as exc:
        return _fail(str(exc))
    if args.host not in hosts:
        return _fail(f"unknown host {args.host!r}; hosts are {', '.join(hosts)}")
    os.execvp("ip", ["ip", "netns", "exec", hosts[args.host], *argv])


def cmd_down(args: argparse.Namespace) -> int:
    try:
        ledger = _pick(args.prefix)
    except TopologyError as exc:
        return _fail(str(exc))
    if ledger.owner_alive():
        return _fail(f"topology {ledger.prefix} belongs to live pid "
                     f"{ledger.data['owner']['pid']}; stop that process (it tears down on exit)")
    try:
        cleaned = remove_run(ledger)
    except TopologyError as exc:
        return _fail(str(exc))
    _report(ledger.prefix, cleaned)
    return 0


def _report(prefix: str, cleaned: Cleaned) -> None:
    for item in cleaned.removed or ([] if cleaned.failed else ["nothing left"]):
        print(f"{prefix}: removed {item}")
    for item in cleaned.not_ours:
        print(f"{prefix}: not ours, left alone: {item}")
    for item in cleaned.failed:
        print(f"{prefix}: could not remove {item}; its ledger stays: `wanbench topo clean` "
              "again once it is free")


def cmd_clean(args: argparse.Namespace) -> int:
    for claim in remove_abandoned_claims():
        print(f"removed {claim} (a ledger its creator died writing)")
    ledgers = Ledger.load_all()
    for prefix, cleaned in clean_dead_runs(ledgers).items():
        _report(prefix, cleaned)
    live = [ledger.prefix for ledger in ledgers if ledger.owner_alive() and not ledger.problem()]
    if live:
        print(f"left alone (owner alive): {', '.join(live)}")
    for path, problem in untrusted(ledgers).items():
        print(f"left alone (not a ledger of ours, nothing it names was touched): {path}: "
              f"{problem}; fix: remove the file if you know where it came from")
    return 0
