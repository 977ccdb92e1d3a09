"""`wanbench compare BASE_RUN CAND_RUN`: per point and metric, did the candidate get worse?

Median and a distribution-free 95 % confidence interval per side, relative change,
Mann-Whitney U per point and metric, Benjamini-Hochberg over the whole grid, and a minimum
effect size: a change is reported only when it is both significant and large enough.
"""

from __future__ import annotations

import argparse
import html
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from harness.analysis.derive import add_derived, valid_points
from harness.analysis.load import PARAMETER_COLUMNS, ResultsFormatError, RunSet, load_runs

HIGHER_BETTER = ("reply_rate_rps", "stream_throughput_mbps", "content_throughput_mbps",
                 "cpu_idle_pct")
LOWER_BETTER = (
    "resp_time_mean_ms", "resp_time_p50_ms", "resp_time_p99_ms",
    "resp_time_uncorrected_mean_ms", "resp_time_uncorrected_p50_ms",
    "resp_time_uncorrected_p99_ms", "cpu_server_pct", "cpu_server_user_pct",
    "cpu_server_sys_pct", "cycles_per_packet", "instructions_per_packet", "cpu_us_per_conn",
    "errors_total", "timeouts_total", "sigio_overflows",
)
DEFAULT_METRICS = (
    "reply_rate_rps", "resp_time_mean_ms", "resp_time_p99_ms", "cpu_server_pct",
    "cycles_per_packet", "stream_throughput_mbps",
)
MIN_REPETITIONS = 5
CI_LEVEL = 0.95
REGRESSION, IMPROVEMENT, UNCHANGED = "regression", "improvement", "~"


class IncomparableRuns(ValueError):
    """The two runs cannot be compared point by point."""


@dataclass
class Comparison:
    rows: pd.DataFrame  # one row per point and metric
    base_label: str
    cand_label: str
    scenario: str
    min_effect: float
    alpha: float
    warnings: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> pd.DataFrame:
        return self.rows[self.rows["verdict"] == REGRESSION]


@cache
def _ci_ranks(n: int) -> tuple[int, int, float]:
    """0-based order-statistic ranks of a >= 95 % CI for the median of n, and its coverage."""
    j = int(stats.binom.ppf((1 - CI_LEVEL) / 2, n, 0.5))  # 1-based lower rank
    j = max(j, 1)
    k = n - j + 1
    coverage = stats.binom.cdf(k - 1, n, 0.5) - stats.binom.cdf(j - 1, n, 0.5)
    return j - 1, k - 1, float(coverage)


def median_ci(values: np.ndarray) -> tuple[float, float, float]:
    """Distribution-free CI of the median: (low, high, coverage); coverage < 95 % for n < 6."""
    ordered = np.sort(values)
    low, high, coverage = _ci_ranks(len(ordered))
    return float(ordered[low]), float(ordered[high]), coverage


def benjamini_hochberg(p_values: np.ndarray) -> np.ndarray:
    """BH-adjusted q values (NaN p values are left out and stay NaN)."""
    q = np.full(len(p_values), np.nan)
    tested = np.flatnonzero(~np.isnan(p_values))
    if tested.size:
        q[tested] = stats.false_discovery_control(p_values[tested], method="bh")
    return q


def direction(metric: str) -> int:
    """+1 when higher is better, -1 when lower is better."""
    if metric in HIGHER_BETTER:
        return 1
    if metric in LOWER_BETTER:
        return -1
    raise IncomparableRuns(
        f"metric {metric}: direction unknown; choose from {', '.join(HIGHER_BETTER + LOWER_BETTER)}"
    )


def _samples(points: pd.DataFrame, metric: str) -> dict[str, np.ndarray]:
    values = points[["point_id", metric]].dropna().sort_values("point_id", kind="stable")
    ids, starts = np.unique(values["point_id"].to_numpy(), return_index=True)
    return dict(zip(ids, np.split(values[metric].to_numpy(dtype=float), starts[1:]),
                    strict=True))


def _mann_whitney(pairs: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Two-sided p per pair; pairs of equal shapes go to scipy in one vectorised call."""
    p_values = np.empty(len(pairs))
    by_shape: dict[tuple[int, int], list[int]] = {}
    for i, (a, b) in enumerate(pairs):
        by_shape.setdefault((len(a), len(b)), []).append(i)
    for indices in by_shape.values():
        a = np.stack([pairs[i][0] for i in indices])
        b = np.stack([pairs[i][1] for i in indices])
        with np.errstate(invalid="ignore", divide="ignore"):
            p = stats.mannwhitneyu(a, b, alternative="two-sided", axis=1).pvalue
        # All samples equal on both sides: no evidence of change (scipy returns NaN).
        constant = (a.min(axis=1) == b.max(axis=1)) & (a.max(axis=1) == b.min(axis=1))
        p_values[indices] = np.where(constant, 1.0, p)
    return p_values


def _metric_rows(base: pd.DataFrame, cand: pd.DataFrame, metric: str) -> pd.DataFrame:
    base_samples, cand_samples = _samples(base, metric), _samples(cand, metric)
    common = sorted(base_samples.keys() & cand_samples.keys())
    pairs = [(base_samples[pid], cand_samples[pid]) for pid in common]
    rows = pd.DataFrame({"point_id": common, "metric": metric})
    for side, index in (("base", 0), ("cand", 1)):
        ci = [median_ci(pair[index]) for pair in pairs]
        rows[f"n_{side}"] = [len(pair[index]) for pair in pairs]
        rows[f"{side}_median"] = [float(np.median(pair[index])) for pair in pairs]
        rows[f"{side}_ci_low"] = [c[0] for c in ci]
        rows[f"{side}_ci_high"] = [c[1] for c in ci]
    base_median = rows["base_median"].where(rows["base_median"] != 0)
    rows["rel_change"] = (rows["cand_median"] - base_median) / base_median.abs()
    rows["p_value"] = _mann_whitney(pairs) if pairs else []
    return rows


def _point_labels(points: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """point_id -> readable label, and a sort key following the parameter values."""
    first = points.drop_duplicates("point_id").sort_values([*columns, "point_id"])
    labels = pd.Series("", index=first.index)
    for column in columns:
        text = first[column].map(lambda v: f"{v:g}" if isinstance(v, float) else str(v))
        labels = labels + ("" if column == columns[0] else ", ") + f"{column}=" + text
    return pd.DataFrame({"point_id": first["point_id"],
                         "point": labels if columns else first["point_id"],
                         "order": range(len(first))})


def _measured(points: pd.DataFrame, metric: str) -> bool:
    return metric in points.columns and points[metric].notna().any()


def _estimated(points: pd.DataFrame) -> bool:
    flags = points.get("cycles_estimated", pd.Series(dtype="boolean"))
    return bool(flags.astype("boolean").fillna(False).any())


def compare_points(
    base: pd.DataFrame,
    cand: pd.DataFrame,
    *,
    metrics: list[str] | None = None,
    min_effect: float = 0.05,
    alpha: float = 0.05,
    point_columns: list[str] | None = None,
    base_label: str = "base",
    cand_label: str = "candidate",
    scenario: str = "",
) -> Comparison:
    """Compare two points tables (one row per point x repetition) point by point."""
    warnings = []
    for name, frame in (("base", base), ("candidate", cand)):
        invalid = len(frame) - len(valid_points(frame))
        if invalid:
            warnings.append(f"{name}: {invalid} invalid point record(s) left out")
    base, cand = valid_points(base), valid_points(cand)
    if metrics is not None and any(m not in base or m not in cand for m in metrics):
        base, cand = add_derived(base), add_derived(cand)  # e.g. cpu_us_per_conn
    if metrics is None:
        metrics = [m for m in DEFAULT_METRICS if _measured(base, m) and _measured(cand, m)]
    for metric in metrics:
        direction(metric)
        for name, frame in (("base", base), ("candidate", cand)):
            if metric not in frame.columns:
                raise IncomparableRuns(f"metric {metric}: no such column in the {name} run")
    for name, frame in (("base", base), ("candidate", cand)):
        if "cycles_per_packet" in metrics and _estimated(frame):
            warnings.append(f"{name}: cycles_per_packet is estimated (CPU time x TSC frequency, "
                            "no hardware counters), not measured")
    only = set(base["point_id"]) ^ set(cand["point_id"])
    if only:
        warnings.append(f"{len(only)} point(s) present in only one run are not compared")
    rows = pd.concat([_metric_rows(base, cand, m) for m in metrics] or [pd.DataFrame()],
                     ignore_index=True)
    if rows.empty:
        raise IncomparableRuns(
            "the runs have no point with values for the chosen metrics in common"
        )
    rows["q_value"] = benjamini_hochberg(rows["p_value"].to_numpy(dtype=float))
    signs = rows["metric"].map(direction)
    significant = (rows["q_value"] < alpha) & (rows["rel_change"].abs() >= min_effect)
    worse = rows["rel_change"] * signs < 0
    rows["verdict"] = np.where(significant, np.where(worse, REGRESSION, IMPROVEMENT), UNCHANGED)
    if point_columns is None:
        point_columns = [c for c in PARAMETER_COLUMNS if c in base and base[c].nunique() > 1]
    labels = _point_labels(base, point_columns)
    rows = rows.merge(labels, on="point_id").sort_values(["order", "metric"], kind="stable")
    rows = rows.drop(columns="order").reset_index(drop=True)
    rows.insert(0, "point", rows.pop("point"))
    fewest = int(min(rows["n_base"].min(), rows["n_cand"].min()))
    if fewest < MIN_REPETITIONS:
        warnings.append(
            f"only {fewest} repetition(s) at some points: below {MIN_REPETITIONS}, "
            "Mann-Whitney U can rarely reach significance; rerun with more repetitions"
        )
    coverage = _ci_ranks(fewest)[2]
    if coverage < CI_LEVEL:
        warnings.append(f"with {fewest} repetition(s) the median interval is the min-max range: "
                        f"{coverage:.0%} coverage, not {CI_LEVEL:.0%}")
    return Comparison(rows, base_label, cand_label, scenario, min_effect, alpha, warnings)


def _one_run(path: Path, role: str) -> RunSet:
    runs = load_runs([path])
    if len(runs.manifests) != 1:
        raise IncomparableRuns(f"{role} {path}: holds {len(runs.manifests)} runs; give one run")
    return runs


def _side_labels(base: RunSet, cand: RunSet) -> tuple[str, str]:
    b, c = base.manifests.iloc[0], cand.manifests.iloc[0]
    if b["kernel_release"] != c["kernel_release"]:
        return str(b["kernel_release"]), str(c["kernel_release"])
    return f"{b['kernel_release']} ({b['run_id']})", f"{c['kernel_release']} ({c['run_id']})"


def compare_runs(base_dir: Path, cand_dir: Path, **options) -> Comparison:
    """Load two run directories, check they are comparable, and compare them."""
    base, cand = _one_run(base_dir, "BASE_RUN"), _one_run(cand_dir, "CAND_RUN")
    b, c = base.manifests.iloc[0], cand.manifests.iloc[0]
    for key in ("schema_version", "scenario_name"):
        if b[key] != c[key]:
            raise IncomparableRuns(
                f"different {key}: base {b[key]!r} ({base_dir}) vs candidate {c[key]!r} "
                f"({cand_dir}); compare runs of the same scenario and results format"
            )
    base_label, cand_label = _side_labels(base, cand)
    sweep = base.raw_manifests[b["run_id"]].get("sweep_axes")
    return compare_points(base.points, cand.points, base_label=base_label,
                          cand_label=cand_label, scenario=str(b["scenario_name"]),
                          point_columns=sweep, **options)


def _fmt(value: float) -> str:
    return "—" if pd.isna(value) else f"{value:.4g}"


def _display_rows(comparison: Comparison) -> pd.DataFrame:
    rows = comparison.rows
    change = [
        UNCHANGED if verdict == UNCHANGED else f"{rel * 100:+.1f} %"
        for rel, verdict in zip(rows["rel_change"], rows["verdict"], strict=True)
    ]

    def side(prefix: str) -> list[str]:
        return [f"{_fmt(m)} [{_fmt(lo)}, {_fmt(hi)}]" for m, lo, hi in zip(
            rows[f"{prefix}_median"], rows[f"{prefix}_ci_low"], rows[f"{prefix}_ci_high"],
            strict=True)]

    return pd.DataFrame({
        "point": rows["point"], "metric": rows["metric"],
        f"base {comparison.base_label}": side("base"),
        f"candidate {comparison.cand_label}": side("cand"),
        "change": change, "q": rows["q_value"].map(_fmt), "verdict": rows["verdict"],
    })


def summary(comparison: Comparison) -> str:
    counts = comparison.rows["verdict"].value_counts()
    return (f"{counts.get(REGRESSION, 0)} regression(s), {counts.get(IMPROVEMENT, 0)} "
            f"improvement(s), {counts.get(UNCHANGED, 0)} without significant change (~)")


def _method(comparison: Comparison) -> str:
    return (f"median [95 % CI] per side; Mann-Whitney U, Benjamini-Hochberg over "
            f"{len(comparison.rows)} tests, alpha {comparison.alpha}, minimum effect "
            f"{comparison.min_effect:.0%}")


def to_markdown(comparison: Comparison) -> str:
    table = _display_rows(comparison)
    lines = [f"# wanbench compare: {comparison.scenario}", "",
             f"base **{comparison.base_label}** vs candidate **{comparison.cand_label}**; "
             + _method(comparison), "",
             "| " + " | ".join(table.columns) + " |",
             "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in table.itertuples(index=False)]
    lines += ["", f"**{summary(comparison)}**"]
    lines += [f"> warning: {w}" for w in comparison.warnings]
    return "\n".join(lines) + "\n"


def to_html(comparison: Comparison) -> str:
    table = _display_rows(comparison).to_html(index=False, border=0)
    warnings = "".join(f"<p><b>warning:</b> {html.escape(w)}</p>" for w in comparison.warnings)
    return (f"<!doctype html><meta charset='utf-8'><title>wanbench compare</title>"
            f"<h1>wanbench compare: {html.escape(comparison.scenario)}</h1>"
            f"<p>base <b>{html.escape(comparison.base_label)}</b> vs candidate "
            f"<b>{html.escape(comparison.cand_label)}</b>; {html.escape(_method(comparison))}</p>"
            f"{table}<p><b>{summary(comparison)}</b></p>{warnings}\n")


def _handle(args: argparse.Namespace) -> int:
    try:
        comparison = compare_runs(args.base, args.cand, metrics=args.metric,
                                  min_effect=args.min_effect, alpha=args.alpha)
    except (ResultsFormatError, IncomparableRuns) as exc:
        print(f"wanbench compare: {exc}", file=sys.stderr)
        return 2
    text = to_html(comparison) if args.format == "html" else to_markdown(comparison)
    if args.out:
        args.out.write_text(text)
        print(f"{summary(comparison)}; written to {args.out}")
    else:
        sys.stdout.write(text)
    for warning in comparison.warnings:
        print(f"wanbench compare: warning: {warning}", file=sys.stderr)
    return 1 if len(comparison.regressions) else 0


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text}: give a fraction in [0, 1), e.g. 0.05")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare",
        help="baseline vs candidate run: per-point statistics, exit 1 on regression",
        description="Compare two runs of one scenario point by point. Exit 0: no regression; "
        "1: at least one significant regression; 2: usage error or runs not comparable.",
    )
    parser.add_argument("base", type=Path, metavar="BASE_RUN", help="baseline run directory")
    parser.add_argument("cand", type=Path, metavar="CAND_RUN", help="candidate run directory")
    parser.add_argument("--metric", action="append",
                        help=f"metric column (repeatable; default: {', '.join(DEFAULT_METRICS)} "
                        "where measured)")
    parser.add_argument("--min-effect", type=_fraction, default=0.05,
                        help="smallest relative change reported (default 0.05 = 5 %%)")
    parser.add_argument("--alpha", type=_fraction, default=0.05,
                        help="false discovery rate over the grid (default 0.05)")
    parser.add_argument("--format", choices=("markdown", "html"), default="markdown")
    parser.add_argument("--out", type=Path, help="write the report here instead of stdout")
    parser.set_defaults(func=_handle)
