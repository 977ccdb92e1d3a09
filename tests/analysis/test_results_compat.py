"""Runs recorded before the current facts are upgraded once, at load: their verdicts' codes
from the sentences they stored, the CPUs their server could use, and its saturation where
they did not record it, each through the one rule (clients.validity), never a second one."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from clients import validity
from harness.analysis import derive
from harness.results.compat import codes_of_sentences
from harness.results.runset import read_runs

from .synthetic import make_points, write_run

SCENARIO = "bmd99-fig8-reply-rate-vs-cold"
REFERENCE = Path(__file__).resolve().parents[2] / "results" / "reference"


def _old_run(tmp_path: Path, cpus: dict, **columns: object) -> Path:
    """A run written before server_cpus and invalid_codes were recorded (and, unless given,
    server_saturated)."""
    points = make_points(SCENARIO, repetitions=1).assign(**columns)
    run = write_run(tmp_path, points)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["scenario"]["cpus"] = cpus
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def _loaded(run: Path) -> pd.DataFrame:
    return derive.add_derived(read_runs([run]).points)


def test_an_old_runs_saturation_is_judged_against_its_servers_budget(tmp_path: Path):
    """The copy in analysis judged an older run's server against one whole CPU: a server held
    to half a CPU that used 48 % of it and fell behind read as having CPU to spare."""
    behind = dict(offered_rate_rps=10_000.0, reply_rate_rps=6_000.0)
    budgeted = _loaded(_old_run(tmp_path / "a", {"server": 0, "server_budget_pct": 50.0},
                                cpu_server_pct=48.0, **behind))
    assert budgeted["server_saturated"].all() and budgeted["server_busy"].all()
    assert budgeted["server_cpus"].eq(0.5).all()
    spare = _loaded(_old_run(tmp_path / "b", {"server": 0, "server_budget_pct": 50.0},
                             cpu_server_pct=30.0, **behind))
    assert not spare["server_saturated"].any() and not spare["server_busy"].any()


def test_an_old_unpinned_servers_workers_count_as_its_cpus(tmp_path: Path):
    """Two workers of an unpinned server may use both CPUs of the run's machine (its manifest
    says 2): 150 % of them leaves CPU to spare, 190 % does not."""
    spare = _loaded(_old_run(tmp_path / "a", {"server": None}, workers=2, cpu_server_pct=150.0))
    assert not spare["server_busy"].any()
    assert spare["server_cpus"].eq(2).all()
    busy = _loaded(_old_run(tmp_path / "b", {"server": None}, workers=2, cpu_server_pct=190.0))
    assert busy["server_busy"].all()


def test_what_a_run_recorded_is_kept(tmp_path: Path):
    """A run that recorded its saturation keeps it, even where the CPUs would say otherwise."""
    run = _old_run(tmp_path, {"server": 0}, cpu_server_pct=20.0, offered_rate_rps=10_000.0,
                   reply_rate_rps=6_000.0, server_saturated=True)
    assert _loaded(run)["server_saturated"].all()


OLD_SENTENCES = [
    ("late sends: 2,000 of 160,000 scheduled sends (1.2 %) went out more than 1,000 us after "
     "their intended time; the generator fell behind (it waited for its CPU 4 % of the window)",
     ["late_sends"]),
    ("late sends: 2,000 of 160,000 scheduled sends (1.2 %) went out more than 1,000 us after "
     "their intended time; the generator fell behind: another task ran on the generator's CPU "
     "for 3.5 % of the window while it waited 4.0 %", ["generator_crowded"]),
    ("generator CPU saturated in the measured window: it ran 98 % (over 95 %): it may have been "
     "the bottleneck; 21 % CPU steal during the window (server's CPU 21.0 %): the hypervisor "
     "ran someone else on these vCPUs", ["generator_saturated", "steal"]),
    ("closed loop, but the server was not the bottleneck (server CPU 77.4 %, under the 90 % of "
     "a bottleneck): the reply rate measures the generator, the link or the round trips, not "
     "the server's capacity; the server waited for its CPU 7 % of the window: another task ran "
     "on CPU 0 for 6 % of it", ["closed_loop_elsewhere", "crowded_server"]),
    ("hot-a: 2 of 4 generator shard(s) did not finish; the clock of hot-b is +120.0 ms "
     "(± 0.5 ms) off the run's host's, over 1% of the 10 s window: synchronise the hosts' "
     "clocks (chrony) and resume", ["shards_unfinished", "clock_offset"]),
    ("httperf ran out of descriptors or ports 3 times (fd-unavail/addrunavail/ftab-full): the "
     "generator, not the server, limited the run", ["out_of_descriptors"]),
    ("the server exited during the point with status 1: bind failed", ["server_exited"]),
    ("worker hot was lost during the point (it left the scheduler)", ["worker_lost"]),
    ("emulated CPU: timings not comparable", ["emulated_cpu"]),
    # a point that failed for its own reason (the runner's PointFailed): not measured
    ("sclient exited with status 1; see raw/p0-r0/hot.stderr", ["not_measured"]),
]


@pytest.mark.parametrize(("sentence", "codes"), OLD_SENTENCES)
def test_old_sentences_become_codes(tmp_path: Path, sentence: str, codes: list[str]):
    run = _old_run(tmp_path, {"server": 0}, valid=False, invalid_reason=sentence)
    loaded = read_runs([run]).points
    assert loaded["invalid_codes"].str.split(",").map(list).tolist() == [codes] * len(loaded)


def test_valid_rows_have_no_codes(tmp_path: Path):
    loaded = read_runs([_old_run(tmp_path, {"server": 0})]).points
    assert loaded["valid"].all() and loaded["invalid_codes"].isna().all()


@pytest.mark.skipif(not REFERENCE.is_dir(), reason="results/reference not in this checkout")
def test_the_reference_runs_load_with_codes_whose_kinds_agree_with_what_they_recorded():
    """Every committed invalid record gets codes, and a record its runner measured again for
    interference alone has interference codes only (the kinds agree with its flag), and a
    record coded not measured failed before its window: its reason names no rule."""
    points = read_runs([REFERENCE]).points
    invalid = points[~points["valid"].astype(bool)]
    assert not invalid.empty and invalid["invalid_codes"].notna().all()
    kinds = invalid["invalid_codes"].map(
        lambda codes: {validity.Code(c).kind for c in codes.split(",")})
    only_interference = kinds.map(lambda k: k == {validity.Kind.INTERFERENCE})
    assert (only_interference == invalid["interference_only"].astype(bool)).all()
    not_measured = invalid[invalid["invalid_codes"] == validity.Code.NOT_MEASURED]
    assert (not_measured["invalid_reason"].map(codes_of_sentences)
            == validity.Code.NOT_MEASURED).all(), not_measured["invalid_reason"].tolist()
