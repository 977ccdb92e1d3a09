"""Every change of a target's check since its first checks, read from history.yaml: the
commit, its date, what changed, the reason the commit gives, and the check's form before the
change, rebuilt as a test (harness.reproduce.forms) so that REPRODUCTION.md can say what the
earlier form gives on today's data. A check changed after a run had failed it reads there
beside the verdict its earlier form still gives."""

from __future__ import annotations

import datetime
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from harness.reproduce.claims.base import Test
from harness.reproduce.forms import FormError, build
from harness.reproduce.verdict import Claim, ClaimResult, Measured, evaluate_claim
from harness.yamlfile import Document, Strict, YamlError

HISTORY_FILE = Path(__file__).with_name("history.yaml")
COMMIT = r"^[0-9a-f]{7,40}$"


class _ChangeEntry(Strict):
    commit: str = Field(pattern=COMMIT)
    date: datetime.date
    what: str
    reason: str
    previous: dict[str, Any] | None = None  # a form (harness.reproduce.forms)
    unrebuilt: str = ""


class _HistoryFile(Strict):
    first: str = Field(pattern=COMMIT)
    targets: dict[str, list[_ChangeEntry]]


@dataclass(frozen=True)
class Change:
    """One change of a target's check. previous: the form before it, as a test (None when
    the form cannot be rebuilt: `unrebuilt` says why)."""

    commit: str
    date: datetime.date
    what: str
    reason: str
    previous: Test | None
    unrebuilt: str = ""


@dataclass(frozen=True)
class History:
    """first: the commit of the first checks; changes: each target's since then, oldest
    first."""

    first: str
    changes: dict[str, tuple[Change, ...]]


@functools.cache
def read_history(path: Path = HISTORY_FILE) -> History:
    """The check history in path, each earlier form built; YamlError names what is wrong."""
    data = Document.load(path, "check history").validate(_HistoryFile)
    try:
        changes = {target: tuple(_change(entry) for entry in entries)
                   for target, entries in data.targets.items()}
    except FormError as exc:
        raise YamlError(f"{path}: {exc}") from None
    return History(data.first, changes)


def _change(entry: _ChangeEntry) -> Change:
    previous = None if entry.previous is None else build(entry.previous)
    if previous is None and not entry.unrebuilt:
        raise FormError(f"{entry.commit}: no previous form, and no `unrebuilt` saying why")
    return Change(entry.commit, entry.date, entry.what, entry.reason, previous, entry.unrebuilt)


@dataclass(frozen=True)
class PastVerdict:
    change: Change
    result: ClaimResult | None  # None: no run to judge, or the form was not rebuilt


def judge_history(target: str, measured: Measured | None) -> list[PastVerdict]:
    """Each change of target's check with the verdict its previous form gives on measured
    (today's run of the target's scenario)."""
    out = []
    for change in read_history().changes[target]:
        if change.previous is None or measured is None:
            out.append(PastVerdict(change, None))
            continue
        form = Claim(f"before {change.commit}", change.commit, change.previous)
        out.append(PastVerdict(change, evaluate_claim(form, measured, None)))
    return out
