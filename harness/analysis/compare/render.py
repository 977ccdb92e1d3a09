"""The report of `wanbench compare`: markdown (terminal), HTML, JSON and CSV."""

from __future__ import annotations

import html
import io
import json
import math
from dataclasses import dataclass, field

import pandas as pd

from harness.analysis.compare.compat import Differences
from harness.analysis.compare.engine import (
    IMPROVEMENT,
    INCONCLUSIVE,
    POWER,
    REGRESSION,
    UNCHANGED,
    Comparison,
)
from harness.analysis.compare.metrics import metric

EXIT_CODES = {"no regression": 0, REGRESSION: 1, INCONCLUSIVE: 3}
MDE_SHOWN = 10.0  # a detectable regression above +1,000 % is shown as "> +1,000 %"


@dataclass
class Candidate:
    comparison: Comparison
    differences: Differences
    run_id: str
    forced: bool = False  # compared despite refused differences (--force)


@dataclass
class Report:
    scenario: str
    base_run_id: str
    base_label: str
    base_shape: str  # e.g. "2 repetitions x 3 s"
    duration_s: float | None = None  # the base's measured window
    candidates: list[Candidate] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        verdicts = {c.comparison.verdict for c in self.candidates}
        for verdict in (REGRESSION, INCONCLUSIVE):
            if verdict in verdicts:
                return verdict
        return "no regression"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]


# -- numbers for people -------------------------------------------------------------------


def human(value: float | None) -> str:
    """39,940 / 99.6 / 0.173: at least 3 significant digits, thousands separated."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    digits = 2 - math.floor(math.log10(abs(value)))
    return f"{value:,.{digits}f}"


def percent(fraction: float, sign: bool = True) -> str:
    if fraction is None or math.isnan(fraction):
        return "—"
    value = fraction * 100
    if math.isinf(value):
        return "+inf" if value > 0 else "-inf"
    text = f"{value:+,.0f}" if abs(value) >= 1000 else f"{value:+.1f}"
    return text if sign else text.lstrip("+")


def probability(value: float) -> str:
    if value is None or math.isnan(value):
        return "—"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def change_cell(row: pd.Series) -> str:
    """'-49.8 % [-50.6, -49.1]'; the change alone where no interval exists."""
    if math.isnan(row["change"]):
        if math.isnan(row["base"]) or row["base"] != 0:
            return "—"
        return f"{human(row['base'])} -> {human(row['cand'])}"
    interval = (f" [{percent(row['ci_low'])}, {percent(row['ci_high'])}]"
                if not math.isnan(row["ci_low"]) else "")
    return f"{percent(row['change'])} %{interval}"


def share(fraction: float) -> str:
    """0.95 -> '95 %' (a level or threshold, unsigned)."""
    return f"{fraction * 100:g} %"


def regression_size(size: float, metric_name: str) -> str:
    """A regression's relative size, signed in its direction (-5.0 % for a rate drop)."""
    if math.isnan(size):
        return "—"
    if size > MDE_SHOWN:
        return f"> {percent(MDE_SHOWN)} %"  # beyond this, the exact figure means nothing
    return f"{percent(-size if metric(metric_name).higher_is_better else size)} %"


def detectable_cell(row: pd.Series) -> str:
    """The smallest regression the row could detect."""
    return regression_size(row["detectable"], row["metric"])


# -- shared text ----------------------------------------------------------------------------


def ci_header(comparison: Comparison) -> str:
    """The coverage the intervals achieve: exactly the level where repetitions alone are used
    (t interval), at least it where the per-second model is (never less noise than the
    repetitions show; 97.8 % for 95 % in the synthetic A/A validation, docs/compare.md)."""
    seconds = (comparison.rows[["noise_base", "noise_cand"]] == "seconds").any(axis=None)
    return f"change [{'≥' if seconds else ''}{share(comparison.options.level)} CI]"


def method(comparison: Comparison) -> str:
    o = comparison.options
    m = comparison.tests
    overrides = "".join(f", {share(v)} for {k}" for k, v in o.detect_for)
    overrides = f" ({overrides[2:]})" if overrides else ""
    return (
        "Centre: geometric mean over repetitions. Test: Welch t on log values with repetitions "
        "as the units; where per-second samples exist they estimate each repetition's noise "
        "(AR(1), pooled lag-1 autocorrelation) and one between/within-repetition ratio per run "
        f"adds the run-to-run part. Interval: exp(d ± t·se) − 1, {share(o.level)} per row (t), "
        "at least that where the per-second model is used. "
        f"q: Benjamini-Hochberg over {m} test(s). Regression: q < {o.alpha:g} and "
        f"|change| ≥ {share(o.min_effect)}. `~`: a {share(o.detect)} regression"
        f"{overrides} would have been detected ({share(POWER)} power at {o.alpha:g}/{m}); "
        "otherwise inconclusive."
    )


def summary(comparison: Comparison) -> str:
    c = comparison
    return (f"{c.count(REGRESSION)} regression(s), {c.count(IMPROVEMENT)} improvement(s), "
            f"{c.count(UNCHANGED)} unchanged (~), {c.count(INCONCLUSIVE)} inconclusive")


def _group_advice(metric_name: str, group: pd.DataFrame, detect: float,
                  duration_s: float | None) -> str:
    count = len(group)
    few = group[group["detectable"].isna()]
    if len(few) == count:
        return (f"{metric_name} at {count} point(s): fewer than 2 repetitions on a side; "
                "run at least 2 (better 3) repetitions per side")
    sizes = group["detectable"].dropna()
    low, high = (regression_size(s, metric_name) for s in (sizes.min(), sizes.max()))
    span = low if low == high else f"{low} to {high}"
    needed = group["repetitions_needed"]
    reps = ("more than 200 repetitions per side" if needed.isna().any()
            else f"{int(needed.max())} repetitions per side")
    text = (f"{metric_name} at {count} point(s): smallest detectable regression {span} "
            f"(wanted {share(detect)}); {reps} would detect {share(detect)}")
    factors = group["window_factor_needed"]
    if factors.notna().all() and len(factors):
        factor = float(factors.max())
        length = f" ({human(factor * duration_s)} s)" if duration_s else ""
        text += f", or a window {factor:g}x as long{length} with today's repetitions"
    return text


def advice(comparison: Comparison, duration_s: float | None) -> list[str]:
    """One line per metric with inconclusive rows: what would make it conclusive."""
    rows = comparison.rows[comparison.rows["verdict"] == INCONCLUSIVE]
    return [_group_advice(name, group, comparison.options.detect_of(name), duration_s)
            for name, group in rows.groupby("metric", sort=False)]


def display_rows(comparison: Comparison) -> pd.DataFrame:
    rows = comparison.rows
    return pd.DataFrame({
        "point": rows["point"],
        "metric": rows["metric"],
        "base": [f"{human(v)} (n={n})" for v, n in zip(rows["base"], rows["n_base"],
                                                        strict=True)],
        "candidate": [f"{human(v)} (n={n})" for v, n in zip(rows["cand"], rows["n_cand"],
                                                             strict=True)],
        ci_header(comparison): [change_cell(r) for _, r in rows.iterrows()],
        "q": rows["q"].map(probability),
        "detects": [detectable_cell(r) for _, r in rows.iterrows()],
        "verdict": rows["verdict"],
    })


def _differences_lines(candidate: Candidate) -> list[str]:
    diff = candidate.differences
    lines = []
    if candidate.forced and diff.refused:
        lines.append("WARNING, compared despite a different experiment (--force): "
                     + "; ".join(diff.refused))
    lines.append("differs: " + ("; ".join(diff.listed) if diff.listed else
                                "nothing recorded (same kernel, sysctls, cmdline, CPU)"))
    if not diff.refused:
        lines.append("same: scenario outside its sweep axes, topology backend, tool versions, "
                     "CPU model and count")
    return lines


# -- formats -------------------------------------------------------------------------------


def to_markdown(report: Report) -> str:
    lines = [f"# wanbench compare: {report.scenario}", ""]
    for candidate in report.candidates:
        c = candidate.comparison
        lines += [f"## base {c.base_label} vs candidate {c.cand_label}", "",
                  f"base run {report.base_run_id} ({report.base_shape}); candidate run "
                  f"{candidate.run_id}", ""]
        lines += [f"- {line}" for line in _differences_lines(candidate)]
        lines += ["", method(c), ""]
        table = display_rows(c)
        lines += ["| " + " | ".join(table.columns) + " |",
                  "|" + "|".join("---:" if col in ("base", "candidate", "q", "detects")
                                 else "---" for col in table.columns) + "|"]
        lines += ["| " + " | ".join(map(str, row)) + " |"
                  for row in table.itertuples(index=False)]
        lines += ["", f"**{c.verdict}**: {summary(c)}"]
        lines += [f"- inconclusive: {line}" for line in advice(c, report.duration_s)]
        lines += [f"- warning: {w}" for w in c.warnings]
        lines.append("")
    lines.append(f"**verdict: {report.verdict}** (exit {report.exit_code})")
    return "\n".join(lines) + "\n"


def to_html(report: Report) -> str:
    e = html.escape
    parts = ["<!doctype html><meta charset='utf-8'><title>wanbench compare</title>",
             f"<h1>wanbench compare: {e(report.scenario)}</h1>"]
    for candidate in report.candidates:
        c = candidate.comparison
        parts.append(f"<h2>base {e(c.base_label)} vs candidate {e(c.cand_label)}</h2>")
        parts.append(f"<p>base run {e(report.base_run_id)} ({e(report.base_shape)}); "
                     f"candidate run {e(candidate.run_id)}</p>")
        parts.append("<ul>" + "".join(f"<li>{e(line)}</li>"
                                      for line in _differences_lines(candidate)) + "</ul>")
        parts.append(f"<p>{e(method(c))}</p>")
        parts.append(display_rows(c).to_html(index=False, border=0))
        parts.append(f"<p><b>{e(c.verdict)}</b>: {e(summary(c))}</p>")
        notes = [f"inconclusive: {line}" for line in advice(c, report.duration_s)]
        notes += [f"warning: {w}" for w in c.warnings]
        if notes:
            parts.append("<ul>" + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>")
    parts.append(f"<p><b>verdict: {e(report.verdict)}</b> (exit {report.exit_code})</p>")
    return "\n".join(parts) + "\n"


def _plain(value: object) -> object:
    """JSON-safe: NaN -> null, numpy scalars -> Python."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):
        return _plain(value.item())
    return value


def _records(comparison: Comparison) -> list[dict]:
    return [{k: _plain(v) for k, v in row.items()}
            for row in comparison.rows.to_dict(orient="records")]


def to_json(report: Report) -> str:
    document = {
        "scenario": report.scenario,
        "base": {"run_id": report.base_run_id, "label": report.base_label,
                 "shape": report.base_shape},
        "verdict": report.verdict,
        "exit_code": report.exit_code,
        "candidates": [{
            "run_id": cand.run_id,
            "label": cand.comparison.cand_label,
            "verdict": cand.comparison.verdict,
            "summary": summary(cand.comparison),
            "method": method(cand.comparison),
            "options": vars(cand.comparison.options) | {
                "metrics": list(cand.comparison.options.metrics or [])},
            "tests": cand.comparison.tests,
            "differences": {"refused": cand.differences.refused,
                            "listed": cand.differences.listed, "forced": cand.forced},
            "inconclusive": advice(cand.comparison, report.duration_s),
            "warnings": cand.comparison.warnings,
            "rows": _records(cand.comparison),
        } for cand in report.candidates],
    }
    return json.dumps(document, indent=2, default=str) + "\n"


def to_csv(report: Report) -> str:
    frames = [cand.comparison.rows.assign(base_run=report.base_run_id,
                                          candidate_run=cand.run_id)
              for cand in report.candidates]
    buffer = io.StringIO()
    pd.concat(frames, ignore_index=True).to_csv(buffer, index=False)
    return buffer.getvalue()


FORMATS = {"markdown": to_markdown, "html": to_html, "json": to_json, "csv": to_csv}
