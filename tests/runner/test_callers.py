"""Reproduce, the kernels' runs and a namespace cluster run a scenario through the runner
(run_scenario in-process, or its child entry), never by starting `wanbench run`: each path is
run here with every process it would start recorded instead, and a stop signal inside an
in-process run still stops the reproduction."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from harness import interrupts
from harness.cluster.namespaces import NamespaceCluster
from harness.cluster.run import ClusterHosts
from harness.cluster.security import Access, Certs
from harness.guest import accel, inside, machine
from harness.reproduce import run as reproduce_run
from harness.runner import kernels
from harness.runner.outcome import RESULT_JSON, RunRequest, RunResult, Stop
from harness.runner.run import TopologyKeeper
from harness.scenario import parse
from tests.conftest import REPO

CPP5 = "cpp-fig5-cpp-vs-connections"


def starts_the_cli(argv: list[str]) -> bool:
    return "harness.cli" in argv or any(Path(a).name == "wanbench" for a in argv)


def result_in(run_dir: Path) -> RunResult:
    return RunResult(0, run_dir, "kernels-smoke", 1, 1)


class Started:
    """Every process started goes through here: the CLI fails the test, a run's child entry
    is recorded and its result written as a run would, anything else (git, `wb-server
    --describe`) starts."""

    def __init__(self, run_dir: Path):
        self.argvs: list[list[str]] = []
        self.run_dir = run_dir
        self.popen = subprocess.Popen

    def __call__(self, argv: list[str], **options: object) -> Started | subprocess.Popen:
        assert not starts_the_cli(argv), argv
        if "--result" not in argv:
            return self.popen(argv, **options)
        self.argvs.append(list(argv))
        result = Path(argv[argv.index("--result") + 1])
        result.write_bytes(RESULT_JSON.dump_json(result_in(self.run_dir)))
        self.returncode = 0
        return self

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        return "", ""


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Started:
    recorder = Started(tmp_path / "results" / "run")
    monkeypatch.setattr(subprocess, "Popen", recorder)  # subprocess.run's too
    return recorder


def test_the_kernels_runs_are_the_runners_child_entry_on_the_host_and_in_a_guest(
        started: Started, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    booted: list[tuple[list[str], list[Path]]] = []

    def boot(image, command, guest, mode, rwdirs, modules=()):
        booted.append((command, rwdirs))
        started(command)
        return machine.GuestResult(0, f"{inside.STARTED}\nran\n{inside.EXITED} 0\n", 1.0)

    monkeypatch.setattr(accel, "probe", lambda image: accel.Accel("tcg", "test"))
    monkeypatch.setattr(machine, "run", boot)
    out = tmp_path / "results"
    request = RunRequest(scenario=REPO / "scenarios/kernels-smoke.yaml", out=out,
                         allow_invalid=True)
    scenario = parse((REPO / "scenarios/kernels-smoke.yaml").read_text())
    outcomes = kernels.run_kernels(scenario, ["host", "/boot/vmlinuz-x"], request,
                                   lambda line: None)
    assert [o.error for o in outcomes] == [None, None]
    assert [o.run_dir for o in outcomes] == [started.run_dir] * 2
    assert len(started.argvs) == 2 and not any(map(starts_the_cli, started.argvs))
    assert all(argv[1:3] == ["-m", "harness.runner"] for argv in started.argvs)
    (command, rwdirs), = booted
    assert rwdirs == [out] and Path(command[command.index("--result") + 1]).parent.parent == out
    assert not list(out.glob(f"{kernels.RESULT_PREFIX}*"))  # the guest's result, read, gone


def test_a_namespace_clusters_run_is_the_clusters_child_entry(started: Started):
    class Namespaces:
        def exec_prefix(self, host: str) -> list[str]:
            return ["ip", "netns", "exec", f"ns-{host}"]

    scheduler = Access("tls://198.18.0.1:8786", Certs(Path("/certs")))
    run = NamespaceCluster(Namespaces(), scheduler).run(RunRequest(resume=Path("/r/run")))
    assert run.wait().run_dir == started.run_dir
    (argv,) = started.argvs
    assert not starts_the_cli(argv)
    assert argv[:4] == ["ip", "netns", "exec", "ns-server"]
    assert argv[5:11] == ["-m", "harness.cluster.run", "--scheduler", scheduler.address,
                          "--certs", "/certs"]
    assert RunRequest.model_validate_json(argv[argv.index("--request") + 1]).resume == \
        Path("/r/run")
    assert isinstance(ClusterHosts(scheduler).access, Access)


def test_reproduce_runs_each_scenario_in_process(started: Started,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path):
    asked: list[RunRequest] = []
    keepers: list[TopologyKeeper | None] = []

    def run(request: RunRequest, display, keeper: TopologyKeeper | None) -> RunResult:
        asked.append(request)
        keepers.append(keeper)
        return result_in(tmp_path / CPP5 / "run")

    monkeypatch.setattr(reproduce_run, "run_scenario", run)
    summary = reproduce_run.reproduce(tmp_path, quick=True, allow_dirty=True, only=[CPP5],
                                      log=lambda _: None)
    (request,) = asked
    assert request.scenario == REPO / f"scenarios/{CPP5}.yaml" and request.allow_invalid
    assert "repetitions=1" in request.sets and request.out == tmp_path
    assert summary["scenarios"][0]["run_dir"] == str(tmp_path / CPP5 / "run")
    assert started.argvs == []
    # a quick pipeline's runs share the topologies it keeps up
    assert [type(keeper) for keeper in keepers] == [TopologyKeeper]


def test_a_stop_signal_in_a_reproduced_run_stops_the_reproduction(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    stopped = RunResult(130, tmp_path / CPP5 / "run", CPP5, 3, 1,
                        stop=Stop("interrupted", 130, signal.SIGINT))
    monkeypatch.setattr(reproduce_run, "run_scenario", lambda request, display, keeper: stopped)
    with pytest.raises(interrupts.Interrupted) as caught:
        reproduce_run.reproduce(tmp_path, allow_dirty=True, only=[CPP5], log=lambda _: None)
    assert caught.value.exit_status == 130
    assert not (tmp_path / reproduce_run.SUMMARY).exists()  # as a stopped reproduction
