"""A run whose points are measured on a cluster's hosts (`wanbench run --cluster`):
ClusterHosts joins the scheduler for harness.runner's run_scenario, and
`python -m harness.cluster.run --scheduler ADDR (--certs DIR | --insecure) --request JSON
--result FILE` is the runner's child entry (harness.runner.child) with those hosts, for a run
that must start where the scheduler is reachable (a namespace cluster's server host)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.cluster import ClusterError
from harness.cluster.security import Access, access
from harness.runner import child
from harness.runner.refusal import EXIT_REFUSED
from harness.runner.scenario_run import Joined
from harness.scenario import Scenario

PROG = "python -m harness.cluster.run"
ENTRY = [sys.executable, "-m", "harness.cluster.run"]


class ClusterHosts:
    """The workers of the scheduler at access, standing for the topology's hosts."""

    def __init__(self, access: Access):
        self.access = access

    @contextmanager
    def join(self, scenario: Scenario, scenario_dir: Path) -> Iterator[Joined]:
        """Connected, the hosts each topology's points run on checked and described for the
        manifest; ClusterError naming the fix before anything starts."""
        from harness.cluster import coordinator, session  # the cluster extra: only here

        with coordinator.connect(self.access) as client:
            found = session.placements(client, scenario, scenario_dir)
            block = session.describe(client, self.access.address, found)
            yield Joined(block, lambda ctx: session.ClusterPoints(ctx, client, found))


def entry(scheduler: Access) -> list[str]:
    """The child entry's command for a run on scheduler's hosts (its request follows)."""
    return [*ENTRY, "--scheduler", scheduler.address, *scheduler.options()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--scheduler", required=True, metavar="tls://HOST:PORT")
    parser.add_argument("--certs", type=Path, metavar="DIR")
    parser.add_argument("--insecure", action="store_true")
    child.add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        hosts = ClusterHosts(access(args.scheduler, args.certs, args.insecure))
    except ClusterError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    return child.serve(args, hosts, PROG, refusals=(ClusterError,))


if __name__ == "__main__":
    sys.exit(main())
