"""The report of `wanbench compare`: markdown (terminal), HTML, JSON and CSV."""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from harness.analysis.compare.compat import Differences
from harness.analysis.compare.engine import (
    IMPROVEMENT,
    INCONCLUSIVE,
    INVALID,
    MDE_SHOWN,
    POWER,
    REGRESSION,
    UNCHANGED,
    Comparison,
    Side,
    overall,
    regression_size,
)
from harness.analysis.compare.metrics import metric
from harness.analysis.compare.stats import RUNS_LIMIT
from harness.analysis.html_pages import TEMPLATES
from harness.analysis.numbers import human, percent

NO_REGRESSION = "no regression"
EXIT_CODES = {NO_REGRESSION: 0, REGRESSION: 1, INCONCLUSIVE: 3}


@dataclass
class Candidate:
    comparison: Comparison
    differences: Differences
    forced: bool = False  # compared despite refused differences (--force)


@dataclass
class Report:
    scenario: str
    base: Side
    candidates: list[Candidate] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        verdicts = {c.comparison.verdict for c in self.candidates}
        for verdict in (REGRESSION, INCONCLUSIVE):
            if verdict in verdicts:
                return verdict
        return NO_REGRESSION

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]


# -- numbers for people -------------------------------------------------------------------


def _signed(value: float, scale: str) -> str:
    """A change in its terms: '-49.8' (percent) or '+1.3' (points), without the unit."""
    if scale != "points":
        return percent(value)
    return "—" if math.isnan(value) else f"{value:+.1f}"


def _unit(scale: str) -> str:
    return " pp" if scale == "points" else " %"


def probability(value: float) -> str:
    if value is None or math.isnan(value):
        return "—"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def change_cell(row: pd.Series) -> str:
    """'-49.8 % [-50.6, -49.1]' or '+1.3 pp [-0.4, +3.0]'; the change alone without an
    interval."""
    scale = row["scale"]
    if math.isnan(row["change"]):
        if math.isnan(row["base"]) or row["base"] != 0:
            return "—"
        return f"{human(row['base'])} -> {human(row['cand'])}"
    interval = (f" [{_signed(row['ci_low'], scale)}, {_signed(row['ci_high'], scale)}]"
                if not math.isnan(row["ci_low"]) else "")
    return f"{_signed(row['change'], scale)}{_unit(scale)}{interval}"


def share(fraction: float) -> str:
    """0.95 -> '95 %' (a level or threshold, unsigned)."""
    return f"{fraction * 100:g} %"


def size_text(size: float, metric_name: str) -> str:
    """A --detect or --min-effect size in the metric's terms: '5 %' or '2.5 pp'."""
    return f"{size:g} pp" if metric(metric_name).points else share(size)


def side_cell(value: float, runs: int) -> str:
    """A side's value at a point; its runs are the row's `n`."""
    return f"{human(value)} (invalid)" if runs == 0 else human(value)


# -- shared text ----------------------------------------------------------------------------


def method(comparison: Comparison) -> str:
    o = comparison.options
    m = comparison.tests
    names = list(dict.fromkeys(comparison.rows["metric"]))
    sizes = "; ".join(f"{name} {size_text(o.min_effect_of(name), name)}" for name in names)
    detects = "; ".join(f"{name} {size_text(o.detect_of(name), name)}" for name in names)
    unit = (
        "Unit: the run; its value at a point is the mean of its repetitions (geometric for "
        "rates and times, whose change is relative; CPU percentages change in percentage "
        "points); n: runs per side (base / candidate). Test: Student's t on the runs' values, "
        "the run-to-run variance pooled from the sides' own runs (2 or more) and a noise "
        "record of A/A runs; never less than a run's own repetitions spread. Without either "
        "the row is inconclusive. ")
    if not m:
        return unit + ("No row could be tested, so no row has an interval, a q or a `~`: "
                       "each is inconclusive or invalid, for the reason given below its table.")
    return unit + (
        f"Interval: {share(o.level)} (t), the row's own, not adjusted for the grid's "
        f"{m} tests: it may exclude 0 while q does not call the row a change. q: the row's p "
        f"adjusted over the grid (Benjamini-Hochberg over {m} test{'s' if m > 1 else ''}); "
        f"q decides. Regression: q < {o.alpha:g} and |change| at least ({sizes}). `~`: a "
        f"regression of ({detects}) would have been detected ({share(POWER)} power at "
        f"{o.alpha:g}/{m}); otherwise inconclusive.")


def summary(comparison: Comparison) -> str:
    c = comparison
    text = (f"{c.count(REGRESSION)} regression(s), {c.count(IMPROVEMENT)} improvement(s), "
            f"{c.count(UNCHANGED)} unchanged (~), {c.count(INCONCLUSIVE)} inconclusive")
    return text + (f", {c.count(INVALID)} invalid (not judged)" if c.count(INVALID) else "")


def _runs_text(needed: pd.Series) -> str:
    """'3 runs per side', or '3 to 12' (or '3 to more than 200') over the rows' points."""
    def count(n: float) -> str:
        return f"more than {RUNS_LIMIT}" if math.isnan(n) else str(int(n))

    low = count(needed.min())  # NaN (beyond the limit) only when every row is
    high = count(math.nan if needed.isna().any() else needed.max())
    return f"{low if low == high else f'{low} to {high}'} runs per side"


def _group_advice(name: str, group: pd.DataFrame, detect: float) -> list[str]:
    lines = []
    unknown = group[group["noise"].isna()]
    if len(unknown):
        lines.append(
            f"{name} at {len(unknown)} point(s): one run per side and no run-to-run spread "
            f"known; at least {_runs_text(unknown['runs_needed'])} would decide it "
            "(`wanbench compare BASE1 BASE2 BASE3 -- CAND1 CAND2 CAND3`), or a noise record "
            "of A/A runs of this scenario (`wanbench noise RUN1 RUN2 RUN3 ...`)")
    known = group[group["noise"].notna()]
    if len(known):
        sizes = known["detectable"].dropna()
        scale = str(known["scale"].iloc[0])
        low, high = (regression_size(s, name, scale) for s in (sizes.min(), sizes.max()))
        span = low if low == high else f"{low} to {high}"
        lines.append(
            f"{name} at {len(known)} point(s): smallest detectable regression {span} (wanted "
            f"{size_text(detect, name)}); {_runs_text(known['runs_needed'])} would detect it")
    return lines


def advice(comparison: Comparison) -> list[str]:
    """One or two lines per metric with inconclusive rows: what would make them conclusive."""
    rows = comparison.rows[comparison.rows["verdict"] == INCONCLUSIVE]
    return [line for name, group in rows.groupby("metric", sort=False)
            for line in _group_advice(name, group, comparison.options.detect_of(name))]


def not_judged(comparison: Comparison) -> list[str]:
    rows = comparison.rows[comparison.rows["verdict"] == INVALID]
    if rows.empty:
        return []
    points = "; ".join(dict.fromkeys(rows["point"]))
    return [f"{rows['point'].nunique()} point(s) with no valid repetition on a side, shown but "
            f"not judged ({points}); --allow-invalid judges their invalid repetitions"]


def invalid_reasons(comparison: Comparison) -> list[str]:
    """Per point with invalid repetitions, once: the rules they broke, per side."""
    rows = comparison.rows[comparison.rows["invalid_reasons"].astype(bool)]
    return [f"{point}: {reasons}" for point, reasons in
            dict.fromkeys(zip(rows["point"], rows["invalid_reasons"], strict=True))]


CHANGE_COLUMN = "change [{} CI, unadjusted]"
Q_COLUMN = "q (adjusted)"


def display_rows(comparison: Comparison) -> pd.DataFrame:
    rows = comparison.rows
    table = pd.DataFrame({
        "point": rows["point"],
        "metric": rows["metric"],
        "n": [f"{b} / {c}" for b, c in zip(rows["runs_base"], rows["runs_cand"], strict=True)],
        "base": [side_cell(v, n) for v, n in zip(rows["base"], rows["runs_base"], strict=True)],
        "candidate": [side_cell(v, n) for v, n in zip(rows["cand"], rows["runs_cand"],
                                                       strict=True)],
        CHANGE_COLUMN.format(share(comparison.options.level)):
            [change_cell(r) for _, r in rows.iterrows()],
        Q_COLUMN: rows["q"].map(probability),
        "detects": [regression_size(r["detectable"], r["metric"], r["scale"])
                    for _, r in rows.iterrows()],
        "verdict": rows["verdict"],
    })
    if rows["invalid"].astype(bool).any():
        table["invalid repetitions"] = rows["invalid"]  # why: invalid_reasons, below the table
    return table


def overall_rows(comparison: Comparison) -> pd.DataFrame:
    """benchstat's geomean row, per metric: over the points both sides measured validly."""
    return pd.DataFrame([{
        "metric": o.metric, "over": f"{o.kind} of {o.points} point(s)",
        "base": human(o.base), "candidate": human(o.cand),
        "change": f"{_signed(o.change, o.scale)}{_unit(o.scale)}"}
        for o in overall(comparison)], columns=["metric", "over", "base", "candidate", "change"])


def side_line(role: str, side: Side) -> str:
    return f"{role} {side.label}: {side.shape} ({', '.join(side.run_ids)})"


def _context_lines(candidate: Candidate, base: Side) -> list[str]:
    c = candidate.comparison
    lines = [side_line("base", base), side_line("candidate", c.cand)]
    lines.append("run-to-run term: " + (f"noise record of {c.noise}" if c.noise else
                                        "no noise record (`wanbench noise`)")
                 + "; " + ("the sides' own runs" if max(len(base.runs), len(c.cand.runs)) > 1
                           else "one run per side"))
    diff = candidate.differences
    if candidate.forced and diff.refused:
        lines.append("WARNING, compared despite a different experiment (--force): "
                     + "; ".join(diff.refused))
    lines.append("differs: " + ("; ".join(diff.listed) if diff.listed else
                                "nothing recorded (same kernel, sysctls, cmdline, CPU)"))
    if not diff.refused:
        lines.append("same: scenario outside its sweep axes, topology backend, tool versions, "
                     "CPU model and count")
    # the validity its rows were judged by, when a scenario changed it
    lines += dict.fromkeys(note for side in (base, c.cand) for run in side.runs
                           for note in run.manifest.get("lateness_changed") or [])
    return lines


def _notes(comparison: Comparison) -> list[str]:
    return _lead_notes(comparison) + _invalid_notes(comparison)


def _lead_notes(comparison: Comparison) -> list[str]:
    """What decided the verdict beside the rows: advice, points not judged, warnings."""
    return ([f"inconclusive: {line}" for line in advice(comparison)]
            + [f"invalid: {line}" for line in not_judged(comparison)]
            + [f"warning: {w}" for w in comparison.warnings])


def _invalid_notes(comparison: Comparison) -> list[str]:
    return [f"invalid repetitions at {line}" for line in invalid_reasons(comparison)]


# -- formats -------------------------------------------------------------------------------


def _heading(comparison: Comparison) -> str:
    return f"base {comparison.base.label} vs candidate {comparison.cand.label}"


MARKDOWN_NUMERIC = ("n", "base", "candidate", Q_COLUMN, "detects", "change")


def _markdown_table(table: pd.DataFrame) -> list[str]:
    def align(column: str) -> str:
        return "---:" if column in MARKDOWN_NUMERIC or column.startswith("change") else "---"

    return (["| " + " | ".join(table.columns) + " |",
             "|" + "|".join(align(column) for column in table.columns) + "|"]
            + ["| " + " | ".join(map(str, row)) + " |"
               for row in table.itertuples(index=False)])


# Rows a reader of a pull request need not see at first: folded, each kind under its count.
FOLDED = {INCONCLUSIVE: "inconclusive: could not decide (why: the notes above)",
          INVALID: "invalid: a side has no valid repetition, not judged"}


def _markdown_candidate(candidate: Candidate, base: Side) -> list[str]:
    c = candidate.comparison
    lines = [f"## {_heading(c)}", "", f"**{c.verdict}**", ""]
    lines += [f"- {note}" for note in _lead_notes(c)]
    overall_table = overall_rows(c)
    if not overall_table.empty:
        lines += ["", "Over the points both sides measured validly (descriptive, not a test):",
                  "", *_markdown_table(overall_table)]
    table = display_rows(c)
    verdicts = c.rows["verdict"]
    shown = table[~verdicts.isin(list(FOLDED))]
    lines.append("")
    lines += (_markdown_table(shown) if len(shown) else
              ["No row was judged a regression, an improvement or unchanged (~)."])
    for verdict, title in FOLDED.items():
        folded = table[verdicts == verdict]
        if folded.empty:
            continue
        lines += ["", f"<details><summary>{len(folded)} row(s) {title}</summary>", "",
                  *_markdown_table(folded)]
        if verdict == INVALID:
            lines += ["", *(f"- {note}" for note in _invalid_notes(c))]
        lines += ["", "</details>"]
    lines += ["", *(f"- {line}" for line in _context_lines(candidate, base)), "", method(c), ""]
    return lines


def to_markdown(report: Report) -> str:
    """Verdict first (a pull request's comment shows its top); rows that decided nothing
    folded in <details>; how it was measured and tested last."""
    lines = [f"# wanbench compare: {report.scenario}", "",
             f"**verdict: {report.verdict}** (exit {report.exit_code})", ""]
    lines += [f"- {_heading(c.comparison)}: {c.comparison.verdict}, {summary(c.comparison)}"
              for c in report.candidates]
    lines.append("")
    for candidate in report.candidates:
        lines += _markdown_candidate(candidate, report.base)
    return "\n".join(lines)


# One class per verdict (templates/compare.html.j2 colours them: a regression is red,
# nothing else is).
CSS_CLASS = {REGRESSION: "regression", IMPROVEMENT: "improvement", UNCHANGED: "unchanged",
             INCONCLUSIVE: "inconclusive", INVALID: "invalid", NO_REGRESSION: "ok"}
NUMERIC = ("n", "base", "candidate", Q_COLUMN, "detects")


def _html_rows(comparison: Comparison) -> list[tuple[str, list[tuple[str, bool]]]]:
    """Each displayed row: its verdict's CSS class and its cells (text, numeric)."""
    table = display_rows(comparison)
    return [(CSS_CLASS[verdict], [(str(v), c in NUMERIC or c.startswith("change"))
                                  for c, v in row.items()])
            for (_, row), verdict in zip(table.iterrows(), comparison.rows["verdict"],
                                         strict=True)]


def to_html(report: Report) -> str:
    """Verdict first, in its colour; then each candidate's table, rows coloured by verdict
    (templates/compare.html.j2, beside the plot report's page)."""
    candidates = [{"heading": _heading(c.comparison), "verdict": c.comparison.verdict,
                   "css": CSS_CLASS[c.comparison.verdict], "summary": summary(c.comparison),
                   "columns": list(display_rows(c.comparison).columns),
                   "rows": _html_rows(c.comparison), "notes": _notes(c.comparison),
                   "context": _context_lines(c, report.base), "method": method(c.comparison)}
                  for c in report.candidates]
    return TEMPLATES.get_template("compare.html.j2").render(
        scenario=report.scenario, verdict=report.verdict, css=CSS_CLASS[report.verdict],
        exit_code=report.exit_code, candidates=candidates) + "\n"


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


def _side_json(side: Side) -> dict:
    return {"label": side.label, "run_ids": side.run_ids, "shape": side.shape}


def to_json(report: Report) -> str:
    document = {
        "scenario": report.scenario,
        "base": _side_json(report.base),
        "verdict": report.verdict,
        "exit_code": report.exit_code,
        "candidates": [{
            **_side_json(cand.comparison.cand),
            "verdict": cand.comparison.verdict,
            "summary": summary(cand.comparison),
            "method": method(cand.comparison),
            "noise_record": cand.comparison.noise,
            "options": vars(cand.comparison.options) | {
                "metrics": list(cand.comparison.options.metrics or [])},
            "tests": cand.comparison.tests,
            "differences": {"refused": cand.differences.refused,
                            "listed": cand.differences.listed, "forced": cand.forced},
            "inconclusive": advice(cand.comparison),
            "not_judged": not_judged(cand.comparison),
            "warnings": cand.comparison.warnings,
            "overall": [vars(o) for o in overall(cand.comparison)],
            "rows": _records(cand.comparison),
        } for cand in report.candidates],
    }
    return json.dumps(document, indent=2, default=str) + "\n"


CSV_DIGITS = 6


def _csv_number(value: float) -> str:
    """6 significant digits in positional notation (30390700000, 0.00294194; never 3.04e+10):
    a spreadsheet and a reader take it alike; empty when missing."""
    if math.isnan(value):
        return ""
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return np.format_float_positional(value, precision=CSV_DIGITS, unique=True,
                                      fractional=False, trim="-")


def to_csv(report: Report) -> str:
    """The rows as data, numbers at 6 significant digits; a detectable regression beyond
    +1,000 % (one run per side can detect only absurd ones) is `inf`, as the tables' '>'."""
    frames = [cand.comparison.rows.assign(base_runs=" ".join(report.base.run_ids),
                                          candidate_runs=" ".join(cand.comparison.cand.run_ids))
              for cand in report.candidates]
    rows = pd.concat(frames, ignore_index=True)
    beyond = (rows["scale"] != "points") & (rows["detectable"] > MDE_SHOWN)
    rows["detectable"] = rows["detectable"].mask(beyond, math.inf)
    for column in rows.select_dtypes("float").columns:
        rows[column] = rows[column].map(_csv_number)
    buffer = io.StringIO()
    rows.to_csv(buffer, index=False)
    return buffer.getvalue()


FORMATS = {"markdown": to_markdown, "html": to_html, "json": to_json, "csv": to_csv}
