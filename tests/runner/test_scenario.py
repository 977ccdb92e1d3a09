"""The sweep grid: axes, ranges, aliases, stable point ids, topology overrides; errors name
the file's line or the `--set`, and a scenario's topologies are loaded with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.runner.load_side import hot_spec
from harness.runner.server_side import wb_server_config
from harness.scenario import ScenarioError, load, parse, points, sweep_columns
from tests.topology.test_model import SHAPED

GRID = """
name: grid
server: {dispatch: epoll, reply_bytes: 92}
hot: {conns: 10, rate_rps: 500}
sweep:
  server.dispatch: [select, epoll]
  cold.conns: {start: 0, stop: 2000, step: 1000}
  topology.set.links.cold.delay_ms: {values: [0, 25], as: one_way_delay_ms}
repetitions: 2
"""


def test_grid_is_the_product_of_the_axes():
    grid = points(parse(GRID))
    assert len(grid) == 2 * 3 * 2
    combos = {(p.columns["dispatch"], p.columns["cold_conns"], p.columns["one_way_delay_ms"])
              for p in grid}
    assert len(combos) == 12
    assert {p.config.cold.conns for p in grid} == {0, 1000, 2000}


def test_sweep_values_are_applied_and_validated_per_point():
    point = next(p for p in points(parse(GRID))
                 if p.columns["dispatch"] == "select" and p.columns["cold_conns"] == 2000
                 and p.columns["one_way_delay_ms"] == 25)
    assert point.config.server.dispatch == "select"
    assert point.config.topology.set == {"links.cold.delay_ms": 25}
    assert point.columns["offered_rate_rps"] == 500
    assert point.columns["hot_conns"] == 10


def test_point_ids_are_stable_and_unique():
    first = [p.point_id for p in points(parse(GRID))]
    again = [p.point_id for p in points(parse(GRID.replace("name: grid", "name: other")))]
    assert first == again
    assert len(set(first)) == len(first)


def test_sweep_columns_name_the_varying_parameters():
    assert sweep_columns(parse(GRID)) == ["dispatch", "cold_conns", "one_way_delay_ms"]


def test_set_overrides_apply_before_validation():
    scenario = parse(GRID, overrides=["hot.conns=50", "repetitions=5"])
    assert scenario.hot.conns == 50 and scenario.repetitions == 5


SCENARIOS = sorted((Path(__file__).parents[2] / "scenarios").rglob("*.yaml"))


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_shipped_scenarios_load_and_expand(path: Path):
    scenario = load(path)
    assert scenario.name == path.stem  # results/<name>/ matches the file
    grid = points(scenario)
    assert grid and all(p.columns["server"] for p in grid)


def test_stream_scenarios_have_no_hot_columns():
    scenario = parse("name: s\nstream: {conns: 8, mbps: 50}\n")
    columns = points(scenario)[0].columns
    assert columns["hot_conns"] is None and columns["stream_conns"] == 8


def test_a_stream_is_sent_by_the_side_the_scenario_names():
    """The server sends (wb-server --source, the generator's streams read) or the generator
    does (the server a --sink); a server that cannot send is refused by name."""
    for sender, sink, source, read in (("generator", True, 0.0, False),
                                       ("server", False, 50.0, True)):
        scenario = parse(f"name: s\nstream: {{conns: 8, mbps: 50, sender: {sender}}}\n")
        server = wb_server_config(scenario, "127.0.0.1:0", Path("stats.json"), None)
        assert (server.sink, server.source_mbps) == (sink, source)
        assert hot_spec(scenario, 1, "127.0.0.1:80", None, None).stream_read is read
    with pytest.raises(ValueError, match="stream.sender: server needs wb-server"):
        parse("name: s\nstream: {conns: 8, mbps: 50, sender: server}\n"
              "server: {kind: external, name: nginx, command: [nginx], port: 8080}\n")


def test_set_can_replace_a_sweep_axis():
    scenario = parse(GRID, overrides=["sweep.cold.conns=[0, 500]"])
    assert sorted({p.columns["cold_conns"] for p in points(scenario)}) == [0, 500]


SERVERS = """
name: servers
hot: {conns: 10, rate_rps: 500}
sweep:
  server:
    - {dispatch: epoll}
    - {kind: external, name: nginx, port: 8081, command: [nginx, -c, "{workdir}/n.conf"]}
  hot.rate_rps: [500, null]
"""


def test_a_server_axis_compares_whole_servers_by_their_own_columns():
    grid = points(parse(SERVERS))
    assert [(p.columns["server"], p.columns["dispatch"], p.columns["offered_rate_rps"])
            for p in grid] == [("wb-server", "epoll", 500), ("wb-server", "epoll", None),
                               ("nginx", None, 500), ("nginx", None, None)]
    assert sweep_columns(parse(SERVERS)) == ["server", "offered_rate_rps"]


def test_a_budget_axis_has_its_own_column_names():
    scenario = parse("name: b\nsweep:\n  cpus.server_budget_pct: [null, 40]\n"
                     "  cpus.budget_period_us: [2500, 10000]\n")
    assert sweep_columns(scenario) == ["server_budget_pct", "budget_period_us"]
    assert {(p.columns["server_budget_pct"], p.config.cpus.server_budget_pct)
            for p in points(scenario)} == {(None, None), (40, 40)}


JOINT = """
name: joint
hot: {conns: 10, rate_rps: 500}
sweep:
  cold.conns, server.reply_bytes: [[252, 1], [6000, 1], [6000, 6144]]
  hot.rate_rps: [2000, 5000]
"""


def test_joined_paths_vary_together_not_as_a_grid():
    grid = points(parse(JOINT))
    combos = [(p.columns["cold_conns"], p.columns["reply_bytes"], p.columns["offered_rate_rps"])
              for p in grid]
    assert combos == [(252, 1, 2000), (252, 1, 5000), (6000, 1, 2000), (6000, 1, 5000),
                      (6000, 6144, 2000), (6000, 6144, 5000)]  # no (252, 6144)
    assert sweep_columns(parse(JOINT)) == ["cold_conns", "reply_bytes", "offered_rate_rps"]
    # the same point as the full grid would name it: resumable, comparable
    full = parse(JOINT.replace("cold.conns, server.reply_bytes: [[252, 1], [6000, 1], "
                               "[6000, 6144]]", "cold.conns: [252, 6000]\n"
                               "  server.reply_bytes: [1, 6144]"))
    ids = {p.point_id: p.columns["reply_bytes"] for p in points(full)}
    assert all(ids[p.point_id] == p.columns["reply_bytes"] for p in grid)


@pytest.mark.parametrize("levels", ["[252, 6000]", "[[252, 1], [6000]]",
                                    "{values: [[252, 1]]}"])
def test_joined_paths_need_a_value_for_each(levels):
    with pytest.raises(ScenarioError, match="one per path"):
        parse(JOINT.replace("[[252, 1], [6000, 1], [6000, 6144]]", levels))


def test_a_joined_path_must_exist():
    with pytest.raises(ScenarioError, match="'colt' is not a field"):
        parse(JOINT.replace("cold.conns, server", "colt.conns, server"))


def test_errors_from_set_name_the_set_and_from_the_file_its_line():
    with pytest.raises(ScenarioError, match=r"^s.yaml:2: duration_s: must be more than"):
        parse("name: n\nduration_s: -1\n", "s.yaml")
    with pytest.raises(ScenarioError, match=r"^--set 'duration_s=-1': duration_s: must be"):
        parse("name: n\nduration_s: 1\n", "s.yaml", ["duration_s=-1"])
    with pytest.raises(ScenarioError, match=r"^--set 'server={kind: external}': "
                                            r"server.name: required field is missing"):
        parse("name: n\n", "s.yaml", ["server={kind: external}"])


def write(where: Path, name: str, text: str) -> Path:
    (where / name).write_text(text)
    return where / name


def test_a_scenarios_topology_is_loaded_with_it_and_its_errors_name_their_line(tmp_path):
    write(tmp_path, "t.yaml", SHAPED)
    scenario = write(tmp_path, "s.yaml", "name: s\ntopology: {file: t.yaml}\n")
    assert load(scenario).topology.file == "t.yaml"
    write(tmp_path, "t.yaml", SHAPED.replace("delay_ms: 5", "delay_ms: -5"))
    with pytest.raises(ScenarioError, match=rf"^{scenario}:2: topology: {tmp_path}/t.yaml:7: "
                                            r"links.l.delay_ms: must be at least"):
        load(scenario)


def test_a_topology_override_of_the_scenario_is_checked_and_named(tmp_path):
    write(tmp_path, "t.yaml", SHAPED)
    scenario = write(tmp_path, "s.yaml", "name: s\ntopology: {file: t.yaml, set: "
                                         "{links.l.delay_ms: -1}}\n")
    with pytest.raises(ScenarioError, match=r"topology: topology.set 'links.l.delay_ms=-1': "
                                            r"links.l.delay_ms: must be at least"):
        load(scenario)
    scenario.write_text("name: s\ntopology: {file: t.yaml}\nsweep:\n"
                        "  topology.set.links.l.delay_ms: [1, -1]\n")
    with pytest.raises(ScenarioError, match=r"sweep point \{'topology.set.links.l.delay_ms': "
                                            r"-1\}: topology: topology.set"):
        load(scenario)
    scenario.write_text("name: s\ntopology: {file: t.yaml}\nsweep:\n"
                        "  topology.set.links.l.delay_ms: [1, 2]\n")
    assert len(points(load(scenario))) == 2
