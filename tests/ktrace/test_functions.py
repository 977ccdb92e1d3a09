"""Function grain (fentry): its columns from wb-ktrace's document, null for a function not timed;
where fentry is refused (this machine) the loader times none, says why, and the layers stand.
Where fentry works: tests/guest/test_ktrace_functions.py, in a guest kernel."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness import doctor
from harness.metrics import ktrace
from harness.results.format import (
    KERNEL_FUNCTION_METRICS,
    KERNEL_FUNCTIONS,
    KERNEL_TRACE_COLUMNS,
    kernel_function_column,
)
from tests.ktrace.conftest import traced
from tests.ktrace.test_columns import DOCUMENT

REFUSED = ktrace.Support(True, False, "tracepoints (tp_btf) work; fentry refused (loading an "
                         "fentry program on do_select: Operation not permitted)")


def timed(calls: int, kernel_ns: int, context: str = "softirq") -> dict:
    return {"context": context, "calls": calls, "kernel_ns": kernel_ns, "untimed": 0}


def test_its_functions_are_the_results_formats(ktrace_built: Path):
    done = subprocess.run([str(ktrace_built), "--describe"], capture_output=True, text=True,
                          check=True, timeout=10)
    assert tuple(f["name"] for f in json.loads(done.stdout)["functions"]) \
        == tuple(KERNEL_FUNCTIONS)


def test_timed_functions_give_per_call_and_per_packet_columns_the_others_null():
    # DOCUMENT's window: 2,000 packets received, 2,000 sent
    document = {**DOCUMENT, "functions": {
        "tcp_v4_rcv": timed(2000, 6_000_000), "dev_queue_xmit": timed(1000, 4_000_000),
        "do_select": timed(0, 0, "process")}}
    row = ktrace.columns(document)
    assert set(row) == set(KERNEL_TRACE_COLUMNS)
    assert row["kernel_fn_tcp_v4_rcv_calls"] == 2000
    assert row["kernel_fn_tcp_v4_rcv_ns_per_call"] == 3000
    assert row["kernel_fn_tcp_v4_rcv_ns_per_packet"] == 3000  # per packet received
    assert row["kernel_fn_dev_queue_xmit_ns_per_call"] == 4000
    assert row["kernel_fn_dev_queue_xmit_ns_per_packet"] == 2000  # per packet sent
    # timed and never called: a count of 0, no time per call, 0 per packet
    assert row["kernel_fn_do_select_calls"] == 0
    assert row["kernel_fn_do_select_ns_per_call"] is None
    assert row["kernel_fn_do_select_ns_per_packet"] == 0
    # not timed (skipped, or fentry refused): null, never 0
    assert all(row[kernel_function_column("ip_rcv", m)] is None for m in KERNEL_FUNCTION_METRICS)


@pytest.mark.parametrize("document", [DOCUMENT, {**DOCUMENT, "functions": {}}])
def test_a_document_without_timed_functions_has_them_null(document: dict):
    row = ktrace.columns(document)
    assert all(row[kernel_function_column(f, m)] is None
               for f in KERNEL_FUNCTIONS for m in KERNEL_FUNCTION_METRICS)
    assert row["kernel_select_calls"] == 1000  # the layers stand


def test_where_fentry_is_refused_it_says_so_and_the_fallback():
    said = REFUSED.function_grain()
    assert said.startswith("no function grain: fentry refused (loading an fentry program on "
                           "do_select: Operation not permitted)")
    assert "kernel_fn_* columns are null" in said and "layer grain" in said


def test_where_fentry_works_it_names_what_it_skipped():
    allowed = ktrace.Support(True, True, "tracepoints (tp_btf) work; fentry allowed",
                             {"ep_poll": "no ep_poll in this kernel's BTF (inlined or renamed)"})
    said = allowed.function_grain()
    assert said.startswith(f"function grain (fentry) for {len(KERNEL_FUNCTIONS) - 1} of "
                           f"{len(KERNEL_FUNCTIONS)} functions")
    assert "ep_poll skipped: no ep_poll in this kernel's BTF" in said
    renamed = ktrace.Support(True, True, "tracepoints (tp_btf) work; fentry allowed", {},
                             {"dev_queue_xmit": "__dev_queue_xmit"})
    assert renamed.function_grain().endswith("(dev_queue_xmit timed as __dev_queue_xmit: an "
                                             "inline wrapper of it here)")
    every = ktrace.Support(True, True, "tracepoints (tp_btf) work; fentry allowed")
    assert every.function_grain() == (f"function grain (fentry) for {len(KERNEL_FUNCTIONS)} "
                                      f"of {len(KERNEL_FUNCTIONS)} functions")


def test_doctor_names_the_functions_skipped(monkeypatch: pytest.MonkeyPatch):
    allowed = ktrace.Support(True, True, "tracepoints (tp_btf) work; fentry allowed",
                             {"dev_queue_xmit": "no dev_queue_xmit in this kernel's BTF"})
    monkeypatch.setattr(ktrace, "support", lambda: allowed)
    check = doctor.check_kernel_trace()
    assert check.ok and "dev_queue_xmit skipped" in check.detail


def test_a_window_here_times_no_function_and_says_why(ktrace_bin: Path):
    if ktrace.support().fentry:
        pytest.skip("fentry works here: tests/guest/test_ktrace_functions.py")
    document = traced(ktrace_bin, "select", 10, 20)
    assert document["fentry"] is False
    assert document["fentry_detail"] == ("loading an fentry program on do_select: Operation "
                                         "not permitted")
    assert document["functions"] == {} and document["functions_skipped"] == {}
    assert document["roles"]["server"]["select"]["calls"] == 20
