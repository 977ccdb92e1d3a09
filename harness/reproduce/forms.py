"""A test written as data, as the check history (history.yaml) writes each check's earlier
forms: a mapping of one combinator's name to its arguments, e.g.

    ratio_across: {metric: reply_rate_rps, column: cold_conns, high: 0.6, dispatch: select}

The arguments are the combinator's own, the series it holds fixed (`where`) among them;
`each` is a list, `kept_up` names a rule of KEPT_UP. Four names take forms, not values:
all_of (a list of forms), among (`test`, a form; the other arguments the series it takes),
on_view (`view`, a name of VIEWS; `test`, a form) and at_highest (`column`; `test`, a form
given the column's highest level a run swept as one more argument)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from harness.reproduce.claims.base import Test, all_of, among, at_highest, on_view
from harness.reproduce.claims.curves import (
    every_level_within,
    flattens,
    grows_at_every_step,
    peak_ratio,
    ratio_across,
    rises_then_falls,
)
from harness.reproduce.claims.keeping_up import (
    KeptUp,
    below_both_knees,
    idle_lower,
    kept_up_with_sent,
    server_bound_at_saturation,
)
from harness.reproduce.claims.shares import dispatch_shares, share_within
from harness.reproduce.claims.signals import multi_accept_while_signals, overflow_regimes
from harness.reproduce.claims.views import SYSCALL_SHARE_OF_STACK, View, by_curve, by_mechanism
from harness.reproduce.retired import (
    busy_counted,
    from_4_connections,
    idle_regression,
    kept_up_with_offered,
    knee_order,
    select_share_of_cpu,
)

COMBINATORS: dict[str, Callable[..., Test]] = {
    f.__name__: f for f in (
        below_both_knees, dispatch_shares, every_level_within, flattens,
        grows_at_every_step, idle_lower,
        idle_regression, knee_order, multi_accept_while_signals, overflow_regimes, peak_ratio,
        ratio_across, rises_then_falls, select_share_of_cpu, server_bound_at_saturation,
        share_within)
}
VIEWS: dict[str, View] = {"by_curve": by_curve, "by_mechanism": by_mechanism,
                          "syscall_share_of_stack": SYSCALL_SHARE_OF_STACK,
                          "from_4_connections": from_4_connections, "busy_counted": busy_counted}
KEPT_UP: dict[str, KeptUp] = {"kept_up_with_sent": kept_up_with_sent,
                              "kept_up_with_offered": kept_up_with_offered}


class FormError(ValueError):
    """A form that is not one name's mapping, or names no combinator, view or rule, or gives a
    combinator arguments it does not take."""


def build(form: Any) -> Test:
    """The test a form writes."""
    if not isinstance(form, Mapping) or len(form) != 1:
        raise FormError(f"a form is one combinator's name and its arguments, not {form!r}")
    [(name, arguments)] = form.items()
    if name == "all_of":
        return all_of(*(build(part) for part in arguments))
    arguments = dict(arguments)
    if name == "among":
        return among(build(arguments.pop("test")), **arguments)
    if name == "on_view":
        return on_view(_named(VIEWS, arguments["view"], "view"), build(arguments["test"]))
    if name == "at_highest":
        return _at_highest(arguments["column"], arguments["test"])
    combinator = _named(COMBINATORS, name, "combinator")
    try:
        return combinator(**_values(arguments))
    except TypeError as exc:
        raise FormError(f"{name}: {exc}") from None


def _at_highest(column: str, form: Mapping[str, Any]) -> Test:
    """form with column fixed at the highest level the run swept, one more argument."""
    [(name, arguments)] = form.items()
    build(form)  # a form that cannot be built fails when the history is read, not when judged
    return at_highest(column, lambda level: build({name: {**arguments, column: level}}))


def _values(arguments: dict[str, Any]) -> dict[str, Any]:
    """A combinator's arguments as it takes them: `each` a tuple, `kept_up` a rule."""
    values = dict(arguments)
    if "each" in values:
        values["each"] = tuple(values["each"])
    if "kept_up" in values:
        values["kept_up"] = _named(KEPT_UP, values["kept_up"], "kept-up rule")
    return values


def _named(table: Mapping[str, Any], name: str, what: str) -> Any:
    if name not in table:
        raise FormError(f"no {what} named {name!r}: {', '.join(sorted(table))}")
    return table[name]
