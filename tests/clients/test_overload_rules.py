"""The S-Client's rules on made-up facts, each in both directions: it kept offering or could
not (offer_shortfall), and the window was steady state or not (backlog_drained,
backlog_grew); and the up-front refusal of too few sockets for the rate and timeouts."""

from __future__ import annotations

import math

import pytest

from clients import judged, validity
from clients.spec import LoadSpec, sclient_sockets
from clients.validity import Code, Kind


def sclient_spec(**kw) -> LoadSpec:
    kw = {"hot_conns": 2500, "rate_rps": 2000, "requests_per_conn": 1,
          "connect_timeout_s": 0.5, "response_timeout_s": 0.5, "overload": "sclient",
          "duration_s": 2.0, **kw}
    return LoadSpec(generator="sclient", targets=["127.0.0.1:9"], **kw)


def document(scheduled: int, sent: int, replies: int, *, no_socket: int = 0,
             no_descriptor: int = 0, mean_us: float = 2000.0, start: tuple[int, int] = (0, 8),
             end: tuple[int, int] = (0, 8)) -> dict:
    """A wb-sclient document's facts over a 2 s window (clients/SCHEMA.md)."""
    return {"valid": True, "invalid_reasons": [], "duration_s": 2.0, "late_sends": 0,
            "late_threshold_us": 1000, "offered_rate_rps": 2000,
            "requests": {"scheduled": scheduled, "sent": sent, "queued": 0, "dropped": 0,
                         "no_socket": no_socket, "waiting_start": start[0],
                         "in_flight_start": start[1], "waiting_end": end[0],
                         "in_flight_end": end[1]},
            "replies": {"total": replies},
            "errors": {"connect_timeout": 0, "response_timeout": 0,
                       "no_descriptor": no_descriptor},
            "latency": {"uncorrected": {"mean_us": mean_us}},
            "generator_cpu": {"user_s": 0.1, "sys_s": 0.1, "run_delay_s": 0.0}}


def test_an_s_client_that_kept_offering_past_capacity_is_valid():
    """A server answering a sixth of the offer: every attempt started, the rest timed out."""
    doc = judged(sclient_spec(), document(4000, 4000, 667, start=(0, 1990), end=(0, 2010)))
    assert doc["valid"], doc["invalid_reasons"]


def test_an_s_client_that_could_not_keep_offering_is_invalid_and_says_why():
    doc = judged(sclient_spec(), document(4000, 3800, 667, no_socket=150, no_descriptor=50))
    # the descriptors it lacked are the generator's own rule too
    assert doc["invalid_codes"] == ["offer_shortfall", "out_of_descriptors"]
    sentence = doc["invalid_reasons"][0]
    assert "started 3,800 of 4,000 scheduled attempts (95.0 %, under 98 %)" in sentence
    assert "150 found all its sockets in flight" in sentence
    assert "50 found no file descriptor" in sentence
    assert Code.OFFER_SHORTFALL.kind is Kind.GENERATOR


def test_the_offer_tolerance_is_two_percent_of_its_own_schedule():
    spec = sclient_spec()
    assert judged(spec, document(4000, 3920, 2000))["valid"]  # 98.0 %
    assert judged(spec, document(4000, 3919, 2000))["invalid_codes"] == ["offer_shortfall"]
    # the queue form is not an S-Client: what it left unsent waited for the server
    queue = sclient_spec(overload="queue", hot_conns=50)
    assert "offer_shortfall" not in (judged(queue, document(4000, 3000, 3000))
                                     .get("invalid_codes") or [])


def test_an_s_client_that_sent_nothing_is_its_own_shortfall_not_the_servers():
    doc = judged(sclient_spec(), document(4000, 0, 0, no_socket=4000, mean_us=None))
    assert "offer_shortfall" in doc["invalid_codes"]
    assert "nothing_sent" not in doc["invalid_codes"]


def test_replies_within_the_steady_in_flight_and_noise_are_steady_state():
    """4000 sent in 2 s, a mean of 50 ms from send to reply: 100 in flight at the window's
    start by Little's law, and 3 σ of 4000 arrivals (190): up to 290 more replies."""
    allowed = 2000 * 0.05 + 3 * math.sqrt(4000)
    assert validity.backlog_drained(4000 + math.floor(allowed), 4000, 2.0, 0.05) is None
    drained = validity.backlog_drained(4000 + math.ceil(allowed), 4000, 2.0, 0.05)
    assert drained is not None and drained.code is Code.BACKLOG_DRAINED
    assert "answered 4,290 requests in the window and 4,000 were sent in it" in drained.sentence


def test_a_backlog_from_before_the_window_draining_in_it_is_not_steady_state():
    """BM98 Fig 3's realistic select at 12,000 req/s offered: 3,959 req/s sent in the window,
    5,702 replied (1.44x), a mean of 30 ms from send to reply on one of 50 connections."""
    spec = sclient_spec(overload="queue", hot_conns=50, rate_rps=12000)
    doc = judged(spec, document(24000, 7918, 11405, mean_us=30000, start=(0, 50),
                                end=(0, 50)))
    assert doc["invalid_codes"] == ["backlog_drained"]
    assert Code.BACKLOG_DRAINED.kind is Kind.SETUP


def test_a_backlog_that_moves_with_its_arrivals_noise_is_steady():
    """4,000 arrivals vary by √4000 ≈ 63: the backlog may grow by 3 σ, 189, over the window."""
    assert validity.backlog_grew(0, 189, 4000) is None
    assert validity.backlog_grew(300, 0, 4000) is None  # a backlog that fell is the other rule's
    grew = validity.backlog_grew(0, 190, 4000)
    assert grew is not None and grew.code is Code.BACKLOG_GREW and grew.kind is Kind.SETUP


def test_a_backlog_growing_through_the_window_is_not_steady_state():
    """The queue form past capacity: sends waiting for one of 50 connections pile up at the
    offered rate less the server's (12,000 - 2,000 a second)."""
    spec = sclient_spec(overload="queue", hot_conns=50, rate_rps=12000)
    doc = judged(spec, document(24000, 4000, 4000, start=(6000, 50), end=(26000, 50)))
    assert doc["invalid_codes"] == ["backlog_grew"]
    assert "26,000 scheduled sends waited for a connection at the window's end and 6,000" in \
        doc["invalid_reasons"][0]


def test_requests_in_flight_are_not_judged_for_growth():
    """They are bounded (a pool's connections, an S-Client's timeouts) and follow the
    server's bursts: a throttled server's 1 at the start and 42 at the end is no backlog."""
    doc = judged(sclient_spec(), document(4000, 4000, 3990, start=(0, 1), end=(0, 42)))
    assert doc["valid"], doc["invalid_reasons"]


def test_generators_that_report_no_edges_or_response_time_are_not_judged_on_them():
    assert validity.backlog_grew(None, 10, 4000) is None
    assert validity.backlog_drained(5000, 4000, 2.0, None) is None
    assert validity.backlog_drained(5000, 0, 2.0, 0.01) is None  # nothing_sent's to say


def test_too_few_sockets_for_the_rate_and_timeouts_are_refused_with_the_fix():
    needed = sclient_sockets(2000, 0.5, 0.5)
    assert needed == math.ceil(2000 + 3 * math.sqrt(2000))
    sclient_spec(hot_conns=needed)
    with pytest.raises(ValueError, match=rf"\(--hot-conns\) >= {needed:,}, or shorter"):
        sclient_spec(hot_conns=needed - 1)


@pytest.mark.parametrize(("change", "message"), [
    ({"requests_per_conn": None}, "requests_per_conn: 1"),
    ({"rate_rps": None}, "give a rate"),
    # the sockets in flight settle only once the first attempts have lived their timeouts
    ({"warmup_s": 0.9}, r"fix: warmup_s >= 1, or shorter timeouts"),
])
def test_the_s_client_form_needs_a_rate_and_a_connection_per_request(change, message):
    with pytest.raises(ValueError, match=message):
        sclient_spec(**change)


def test_the_s_client_form_is_wb_sclients():
    with pytest.raises(ValueError, match="overload: sclient is wb-sclient's"):
        LoadSpec(generator="asyncio", targets=["127.0.0.1:9"], hot_conns=2500, rate_rps=2000,
                 requests_per_conn=1, connect_timeout_s=0.5, response_timeout_s=0.5,
                 overload="sclient")
