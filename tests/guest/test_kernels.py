"""`wanbench run --kernel`: the host's kernel and a guest's each give a run, then the
comparison; and each way a guest can fail is a clear error that leaves nothing running."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from clients.validity import EMULATED_CPU
from harness.cli import main
from harness.commands import run_terminal
from harness.guest import accel, inside, kernels, machine
from harness.guest.kernels import needed_modules
from harness.results.store import RunDir
from harness.runner.child import read_result
from harness.runner.kernels import RESULT_PREFIX, KernelOutcome, run_kernels
from harness.runner.outcome import RunRequest, RunResult
from harness.runner.scenario_run import summaries_of
from harness.scenario import Guest, Scenario, ScenarioError, parse
from tests.analysis.compare_synthetic import make_run
from tests.conftest import REPO, build
from tests.guest.conftest import measured_part

SMOKE = REPO / "scenarios/kernels-smoke.yaml"


def test_a_missing_image_is_refused_before_any_run(tmp_path, capsys):
    status = main(["run", str(SMOKE), "--kernel", "host", "--kernel", "/nonexistent/vmlinuz",
                   "--out", str(tmp_path)])
    assert status == 2
    err = capsys.readouterr().err
    assert "kernel image /nonexistent/vmlinuz: no such file" in err
    assert not list(tmp_path.iterdir())  # not even the host's run started


def test_kernel_with_resume_is_refused(tmp_path, capsys):
    assert main(["run", "--resume", str(tmp_path), "--kernel", "host"]) == 2
    assert "--kernel starts new runs" in capsys.readouterr().err


def _kernel_runs(tmp_path, monkeypatch, valid: bool) -> None:
    """`run --kernel` with two kernels whose runs are synthetic ones (nothing boots)."""
    runs = []
    for seed, release in ((1, "6.18.0-base"), (2, "6.19.0-cand")):
        run = make_run(seed=seed, kernel=release)
        if not valid:
            run.points["valid"] = False
            run.points["invalid_reason"] = "late sends: 9,310 of 119,877 (7.8 %) over 1 ms"
        path = run.write(tmp_path)
        scenario = Scenario.model_validate(run.manifest["scenario"])
        summaries = summaries_of(RunDir(path), scenario)
        runs.append(KernelOutcome(release, RunResult(0, path, scenario.name, 0, 0, summaries)))
    monkeypatch.setattr(kernels, "check_kernels", lambda images: None)
    monkeypatch.setattr(run_terminal, "run_kernels", lambda *args: runs)


@pytest.mark.parametrize(("valid", "allow_invalid", "status"), [
    (False, False, 1), (False, True, (0, 3)), (True, False, (0, 3))])
def test_run_kernel_exits_as_run_does_when_points_are_invalid(tmp_path, monkeypatch, capsys,
                                                              valid, allow_invalid, status):
    _kernel_runs(tmp_path, monkeypatch, valid)
    argv = ["run", str(SMOKE), "--kernel", "host", "--kernel", "/boot/vmlinuz-6.19.0",
            "--out", str(tmp_path)] + (["--allow-invalid"] if allow_invalid else [])
    assert main(argv) in (status if isinstance(status, tuple) else (status,))
    if status == 1:
        assert "72 point × repetition(s) invalid: exit 1" in capsys.readouterr().err


@pytest.mark.guest
def test_an_unbootable_image_is_a_clear_error(guest_kernel, tmp_path, no_guest_left):
    image = tmp_path / "vmlinuz-not-a-kernel"
    image.write_bytes(b"\x7fELF but not a kernel" * 100)
    # qemu refuses it before any kernel runs: its own words, not a kernel blamed for not booting
    with pytest.raises(machine.GuestError, match=r"ended before its command started(.|\n)*"
                                                 r"Error while loading elf kernel"):
        machine.run(image, ["true"], Guest(timeout_s=120), accel.Accel("tcg", "test"), [])


@pytest.mark.slow
@pytest.mark.guest
def test_a_hung_guest_is_killed(guest_kernel, no_guest_left):
    # under TCG (as asked here) the guest is still booting when its time is up, a boot taking
    # 30 s or more: it did not finish, and is killed, as a guest hung in its command would be
    with pytest.raises(machine.GuestError, match="guest hung"):
        machine.run(guest_kernel, ["sleep", "600"], Guest(timeout_s=4),
                    accel.Accel("tcg", "test"), [])


@pytest.fixture
def fake_virtme(tmp_path, monkeypatch):
    """machine.run with a shell script in virtme-ng's place (no kernel boots): what it prints
    and how it ends are the test's. Returns the image to give machine.run."""
    monkeypatch.setattr(machine, "vng", lambda: tmp_path / "vng")
    monkeypatch.setattr(machine.shutil, "which", lambda name: f"/usr/bin/{name}")
    image = tmp_path / "vmlinuz"
    image.write_bytes(b"a readable image")
    return image


@pytest.mark.parametrize(("script", "said"), [
    ("echo 'qemu-system-x86_64: cannot set up guest memory' >&2; exit 1",
     "exited with status 1 after"),
    ("kill -9 $$", "was killed by SIGKILL after"),
], ids=["exits-1", "killed"])
def test_a_guest_that_ends_before_its_command_names_how_not_the_kernel(
        fake_virtme, monkeypatch, script, said):
    """virtme-ng or qemu ending at once (a failure of theirs, or a kill from outside: another
    test session's cleanup took every qemu on the machine) is named with its exit status and
    what it printed; before, the message blamed the kernel image and said nothing more."""
    monkeypatch.setattr(machine, "vng_argv", lambda *_: ["sh", "-c", script])
    with pytest.raises(machine.GuestError) as refused:
        machine.run(fake_virtme, ["true"], Guest(timeout_s=60), accel.Accel("tcg", "test"), [])
    message = str(refused.value)
    assert said in message and "did not boot" not in message, message
    assert ("cannot set up guest memory" in message) == (script.startswith("echo")), message
    assert "printed nothing" in message or script.startswith("echo"), message


@pytest.mark.parametrize(("qemu", "said"), [
    ("kill -SEGV $$", "qemu was killed by SIGSEGV"),
    ("exit 0", "qemu exited with status 0"),
], ids=["qemu-crashed", "guest-powered-off"])
def test_a_guest_that_stops_after_its_command_started_names_how_qemu_ended(
        fake_virtme, tmp_path, monkeypatch, qemu, said):
    """virtme-ng says 255 for any guest that ended without its command's status: qemu's own
    end (a crash of its own, or a guest that powered off) is named beside it, with the
    console's last lines (the kernel's errors among them)."""
    fake_qemu = tmp_path / "qemu-system-x86_64"
    fake_qemu.write_text(f"#!/bin/sh\necho 'Kernel panic - not syncing: test'\n{qemu}\n")
    fake_qemu.chmod(0o755)
    monkeypatch.setattr(machine.shutil, "which", lambda name: str(fake_qemu))
    monkeypatch.setattr(machine, "vng_argv", lambda *args: [
        "sh", "-c", f"echo '{inside.STARTED}'; {args[-1]} -kernel x; exit 255"])
    with pytest.raises(machine.GuestError) as refused:
        machine.run(fake_virtme, ["true"], Guest(timeout_s=60), accel.Accel("tcg", "test"), [])
    message = str(refused.value)
    assert "stopped before its command finished" in message, message
    assert "exited with status 255 after" in message and said in message, message
    assert "Kernel panic - not syncing: test" in message, message


@pytest.mark.parametrize("mode", ["tcg", "kvm"])
def test_an_emulated_guest_runs_its_vcpus_on_one_emulator_thread(fake_virtme, tmp_path,
                                                                  monkeypatch, mode):
    """Under TCG qemu runs every vCPU on one thread (a thread each let the guest kernel
    panic now and then); under KVM nothing is added to what virtme-ng asks of qemu."""
    fake_qemu = tmp_path / "qemu-system-x86_64"
    fake_qemu.write_text("#!/bin/sh\necho \"qemu args: $*\"\n")
    fake_qemu.chmod(0o755)
    monkeypatch.setattr(machine.shutil, "which", lambda name: str(fake_qemu))
    monkeypatch.setattr(machine, "vng_argv", lambda *args: [
        "sh", "-c", f"{args[-1]} -kernel x; echo '{inside.STARTED}'; "
                    f"echo '{inside.EXITED} 0'"])
    result = machine.run(fake_virtme, ["true"], Guest(timeout_s=60), accel.Accel(mode, "test"),
                         [])
    (said,) = [line for line in result.console.splitlines() if line.startswith("qemu args:")]
    assert said == ("qemu args: -accel tcg,thread=single -kernel x" if mode == "tcg"
                    else "qemu args: -kernel x"), said


def test_a_guest_that_runs_to_the_end_without_its_command_blames_the_kernel(
        fake_virtme, monkeypatch):
    """The other direction: virtme-ng ended on its own (status 0) and the command never
    started: the kernel did not boot to it."""
    monkeypatch.setattr(machine, "vng_argv", lambda *_: ["sh", "-c", "echo Kernel panic"])
    with pytest.raises(machine.GuestError, match="did not boot to the command"):
        machine.run(fake_virtme, ["true"], Guest(timeout_s=60), accel.Accel("tcg", "test"), [])


def test_a_missing_module_is_named(guest_kernel, tmp_path, monkeypatch):
    """The guest's module loader (harness.guest.inside, with the real modprobe) and the
    host's reading of its console, end to end, with the loader run on this host in the
    guest's place: a boot would add only the boot, which the other guest tests check (and
    cost a minute under TCG); modules that do load are the live netem test's."""
    monkeypatch.setattr(machine, "vng_argv", lambda image, command, *_: command)
    ran = tmp_path / "ran"
    with pytest.raises(machine.GuestError, match="lacks module wanbench_no_such_module"):
        machine.run(guest_kernel, ["touch", str(ran)], Guest(timeout_s=60),
                    accel.Accel("tcg", "test"), [], ["wanbench_no_such_module"])
    assert not ran.exists()  # the command does not run without its modules


def test_a_guests_run_is_the_runners_child_and_gives_back_its_result(tmp_path, monkeypatch):
    """The kernels' loop with the guest's command run on this host in the guest's place (as
    above): the runner's child entry runs under the guest's record, writes its result where
    the guest may write, and the loop reads it back as a typed result and leaves no file."""
    for target in ("build/bin/wb-server", "build/bin/wb-sclient"):
        build(target)
    image = tmp_path / "vmlinuz-stand-in"
    image.write_bytes(b"never booted")
    monkeypatch.setattr(machine, "vng_argv", lambda image, command, *_: command)
    monkeypatch.setattr(accel, "probe", lambda image: accel.Accel("tcg", "test"))
    out, said = tmp_path / "out", []
    request = RunRequest(scenario=SMOKE, out=out, allow_invalid=True)
    (outcome,) = run_kernels(parse(SMOKE.read_text()), [str(image)], request, said.append)
    assert outcome.error is None and outcome.result is not None, said
    assert outcome.result.status == 0 and outcome.result.finished == 1
    guest = json.loads((outcome.run_dir / "manifest.json").read_text())["guest"]
    assert (guest["image"], guest["accel"]) == (str(image), "tcg")
    assert outcome.result.summaries[0].valid == 0  # an emulated CPU's timings are not valid
    assert any("1 of 1 point × repetition to measure" in line for line in said)
    assert not list(out.glob(f"{RESULT_PREFIX}*"))


def test_host_and_guest_kernels_give_two_runs_and_a_comparison(tmp_path, monkeypatch, capsys):
    """`run --kernel host --kernel IMAGE` from the command line, the guest's command run on
    this host in its place (the boot is the next test's): two runs, then the comparison, and
    the exit status of an emulated CPU's run, whose points are all invalid."""
    for target in ("build/bin/wb-server", "build/bin/wb-sclient"):
        build(target)
    image = tmp_path / "vmlinuz-stand-in"
    image.write_bytes(b"never booted")
    monkeypatch.setattr(machine, "vng_argv", lambda image, command, *_: command)
    monkeypatch.setattr(accel, "probe", lambda image: accel.Accel("tcg", "test"))
    monkeypatch.setenv("COLUMNS", "300")
    status = main(["run", str(SMOKE), "--kernel", "host", "--kernel", str(image),
                   "--out", str(tmp_path)])
    printed = capsys.readouterr()
    runs = sorted((tmp_path / "kernels-smoke").iterdir())
    manifests = [json.loads((run / "manifest.json").read_text()) for run in runs]
    host, guest = sorted(manifests, key=lambda m: m["guest"] is not None)
    assert host["guest"] is None and guest["guest"]["image"] == str(image)
    assert "functional results per kernel" in printed.out
    assert status == 1, printed.out + printed.err  # as `run` in a guest under TCG
    assert EMULATED_CPU in " ".join(printed.err.split())  # as rich wrapped it


@pytest.mark.slow
@pytest.mark.guest
@pytest.mark.timeout(900)  # it may be the test that boots the guest: about 150 s under TCG here
def test_a_booted_guest_runs_the_scenario_its_server_answering(guest_kernel,
                                                               kernel_6_12_measured):
    """The command `run --kernel` gives a guest, in a real boot of the 6.12 kernel (the one
    tests/guest/both_inside.py makes): the guest's record reaches the run, its server answers
    (function holds), and under TCG every point is invalid for its emulated CPU."""
    ran = measured_part(kernel_6_12_measured, "run.json")
    result = read_result(Path(ran["result"]), ran["status"])
    assert ran["status"] == result.status
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["kernel"]["release"] == guest_kernel.name.removeprefix("vmlinuz-")
    assert manifest["guest"]["image"] == str(guest_kernel)
    points = pd.read_parquet(result.run_dir / "points.parquet")
    assert (points["server_replies"] > 0).all()
    if manifest["guest"]["accel"] == "tcg":
        assert not points["valid"].any()
        assert points["invalid_reason"].str.contains(EMULATED_CPU, regex=False).all()


def test_guest_fields_are_checked():
    with pytest.raises(ScenarioError, match="guest.pin names 1 host CPU"):
        parse("name: g\nguest: {cpus: 2, pin: [0]}\n")
    with pytest.raises(ScenarioError, match="do not exist here"):
        parse("name: g\nguest: {cpus: 1, pin: [4096]}\n")
    assert parse("name: g\n").guest is None  # the defaults of Guest, as before this field


def test_the_modules_a_run_needs_follow_its_topology_and_backend():
    wan = parse("name: w\ntopology: {file: topologies/dumbbell-wan.yaml}\n")
    assert needed_modules(wan, REPO, "netem") == ["sch_netem", "veth"]
    assert needed_modules(wan, REPO, "userspace") == ["tun", "veth"]
    assert needed_modules(parse(SMOKE.read_text()), REPO, None) == []
