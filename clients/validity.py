"""When a measurement is valid: the one definition, for every generator, the runner and the
cluster.

Generators report facts (sends, late sends, replies, errors, their CPU, the window they
measured); the runner's samplers add what they saw over the window (CPU, waits, steal), a
cluster the hosts' clocks. `judge(facts)` turns them into a Verdict: valid or not, and one
Reason per rule that failed, each with its Code, its sentence and its Kind (whose fault:
the generator's, the server's, neighbours' interference, or the set-up's). `wanbench load`,
the runner's record, both cluster merges and the loading of older runs ask here, so a
threshold, its wording or its kind changes in one place. The rules (docs/validity.md lists
them for users, with their codes):

- the generator fell behind: more than LATE_LIMIT of its scheduled sends left more than the
  rule's late threshold (LATE_THRESHOLD_US, which every generator is told) after their
  intended time (interference when the generator waited for its CPU behind other tasks long
  enough to make them); a scenario may state its own limits (Lateness);
- the generator was the bottleneck: its CPU time plus run-queue wait exceeded
  GENERATOR_SATURATED_PCT of the window and it did not keep its open-loop schedule (a
  generator that sent what was offered, on time, did not limit the rate, whatever its CPU
  read);
- the generator ran out of local ports (EADDRNOTAVAIL), of file descriptors (httperf), or
  some of its shards did not finish;
- the offered load was not delivered: an open-loop generator without a schedule count of its
  own (httperf) sent fewer than (1 - RATE_TOLERANCE) of the offered requests (less a Poisson
  draw's own noise); sclient and asyncio show their own shortfall as late sends, and what
  they left unsent waited for a connection the server still held; streams carried less than
  (1 - RATE_TOLERANCE) of the bandwidth asked of them (a paced stream has no schedule of
  sends to be late against: its axis is the bandwidth it carries);
- an S-Client could not keep offering (overload: sclient): it started fewer than
  (1 - OFFER_TOLERANCE) of its scheduled attempts (no socket free, no descriptor, no port);
- the window was not steady state: the server answered more than was sent in it by more
  than the requests a steady window has in flight at its edge (Little's law) and the
  arrivals' own noise (a backlog built before the window drained in it), or the sends
  waiting for a connection grew through it by more than the arrivals' noise (a backlog
  growing without bound);
- nothing was answered: hot connections and no reply in the window;
- nothing was sent: hot connections and not one request of the window went out (each waited
  for a connection the server still held): the point measured nothing of the load offered
  in its window, whatever replies to earlier requests arrived in it;
- the window was short: the generator measured less than WINDOW_TOLERANCE of the asked
  duration (it stopped early, or was stopped);
- the server was gone: connections were refused (a listening server never refuses; a full
  backlog drops SYNs instead);
- the server exited during the point (the runner sees it);
- cold connections were lost (fewer held to the end than asked);
- neighbours interfered: more than STEAL_LIMIT_PCT of the server's or the generator's CPU
  was stolen by the hypervisor, or the server waited more than WAIT_LIMIT_PCT of the window
  for its CPU while other tasks ran there long enough to explain it;
- a closed loop meant to load the server did not: the server was not the bottleneck, so the
  reply rate measures the generator, the link or the round trips;
- stream scenarios: other tasks ran more than WAIT_LIMIT_PCT of the window on the measured
  CPU, whose whole busy time the cycles per packet count;
- the CPU was emulated (a guest under QEMU's TCG): time ran at the emulator's pace, so
  timings say nothing of the kernel, while what the run counted (errors, overflows,
  replies) still holds;
- the window's sources disagreed: a source of the point's numbers (the generator's count, the
  server's stats reads, the samplers, wb-ktrace) measured from or to an instant more than
  CLOCK_OFFSET_FRACTION of the window away from the runner's edge, so the numbers do not
  describe one interval;
- several hosts (wanbench's cluster): the clock of a host that keeps the scheduled start was
  off the run's host's by more than CLOCK_OFFSET_FRACTION of the window, so the hosts'
  windows did not overlap enough to add their rates; or a worker was lost during the point.

Saturation is a finding, not a fault: `server_saturated` says the server was the bottleneck
(see its docstring), judged against `server_cpus`, the CPUs it may use.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

LATE_LIMIT = 0.01
# A send is late past this: wb-sclient times its sends to the microsecond, asyncio's timers
# to the millisecond. Every generator is told the threshold (LoadSpec.late_us), none keeps it.
LATE_THRESHOLD_US = {"sclient": 1000.0, "asyncio": 5000.0}


@dataclass(frozen=True)
class Lateness:
    """The late-sends rule's limits for one load: a send is late past threshold_us after its
    intended time, and a window with more than `limit` (a fraction) of its scheduled sends
    late fell behind. The defaults are LATE_THRESHOLD_US (by generator) and LATE_LIMIT; a
    scenario may state its own (hot.late_us, hot.late_limit_pct), and then says so wherever
    its points are shown (changed())."""

    threshold_us: float | None
    limit: float = LATE_LIMIT

    @classmethod
    def of(cls, generator: str, threshold_us: float | None = None,
           limit_pct: float | None = None) -> Lateness:
        return cls(threshold_us if threshold_us is not None else LATE_THRESHOLD_US.get(generator),
                   limit_pct / 100 if limit_pct is not None else LATE_LIMIT)

    def changed(self, generator: str) -> str | None:
        """What differs from the rule's defaults for this generator, in words; None when
        nothing does."""
        default = Lateness.of(generator)
        if self == default:
            return None
        said = f"{_pct(self.limit)} of sends over {_us(self.threshold_us)}"
        return f"late-send limits changed by the scenario: {said} (default " \
               f"{_pct(default.limit)} over {_us(default.threshold_us)})"


def _pct(fraction: float) -> str:
    return f"{100 * fraction:g} %"


def _us(threshold_us: float | None) -> str:
    return f"{threshold_us:,.0f} µs" if threshold_us is not None else "no threshold"
GENERATOR_SATURATED_PCT = 95.0
RATE_TOLERANCE = 0.05
# An S-Client offers each scheduled send (its schedule is counted, so no draw's noise is
# allowed for): it may miss at most 2 % of them, the offered rate's tolerance the S-Client's
# own measurements claim ("the window's sent rate within 2 % of the offered rate"), under
# httperf's RATE_TOLERANCE, whose count of what it sent is its own and not its schedule's.
OFFER_TOLERANCE = 0.02
WINDOW_TOLERANCE = 0.95
POISSON_SIGMAS = 3.0
SERVER_BUSY_PCT = 90.0  # of the CPUs the server may use
KEEP_UP_FRACTION = 0.95  # a point keeps up when replies reach 95 % of the offered rate
STEAL_LIMIT_PCT = 5.0
# Shards start at one scheduled time read from each host's clock: an offset of 1 % of the
# window leaves 99 % of it overlapping, within RATE_TOLERANCE's noise for added rates. The
# same bound holds a point's sources (generator, server stats, samplers, wb-ktrace) to the
# runner's window: a source whose edge is 1 % of the window off still shares 99 % of it
CLOCK_OFFSET_FRACTION = 0.01
WAIT_LIMIT_PCT = 5.0
# Generators that poll by design: httperf's CPU reads 100 % at any rate (measured at 500
# req/s), so its CPU says nothing of saturation; the offered-load rule judges it instead
CPU_SAYS_NOTHING = frozenset({"httperf"})


class Kind(StrEnum):
    """Whose fault a reason is, which says what to do about it."""

    GENERATOR = "generator"  # the load generator limited the measurement
    SERVER = "server"  # the server was gone, silent, or lost connections
    INTERFERENCE = "interference"  # neighbours took the CPU: measured again (interference_retries)
    SETUP = "set-up"  # the machine, the hosts or the scenario cannot measure what is asked


class Code(StrEnum):
    """One per rule: what the points table (invalid_codes) and a document (invalid_codes)
    store beside each reason's sentence."""

    LATE_SENDS = "late_sends"
    GENERATOR_CROWDED = "generator_crowded"  # late sends another task's time explains
    GENERATOR_SATURATED = "generator_saturated"
    NO_LOCAL_PORT = "no_local_port"
    OUT_OF_DESCRIPTORS = "out_of_descriptors"
    SHARDS_UNFINISHED = "shards_unfinished"
    RATE_SHORTFALL = "rate_shortfall"
    OFFER_SHORTFALL = "offer_shortfall"  # an S-Client that could not keep offering
    BACKLOG_DRAINED = "backlog_drained"  # not steady state: a backlog drained in the window
    BACKLOG_GREW = "backlog_grew"  # not steady state: the backlog grew through the window
    NO_REPLIES = "no_replies"
    NOTHING_SENT = "nothing_sent"
    SHORT_WINDOW = "short_window"
    REFUSED = "refused"
    SERVER_EXITED = "server_exited"
    COLD_LOST = "cold_lost"
    STEAL = "steal"
    CROWDED_SERVER = "crowded_server"
    FOREIGN_WORK = "foreign_work"
    CLOSED_LOOP_ELSEWHERE = "closed_loop_elsewhere"
    CLOSED_LOOP_CROWDED = "closed_loop_crowded"  # one whose generator others held off its CPU
    EMULATED_CPU = "emulated_cpu"
    CLOCK_OFFSET = "clock_offset"
    WINDOW_DISAGREES = "window_disagrees"
    WORKER_LOST = "worker_lost"
    NOT_MEASURED = "not_measured"  # the point failed before it was measured; its sentence says why

    @property
    def kind(self) -> Kind:
        return RULES[self].kind

    @property
    def rule(self) -> str:
        """The rule's name in a few words (figure notes group reasons by it)."""
        return RULES[self].name


@dataclass(frozen=True)
class Rule:
    kind: Kind
    name: str


RULES = {
    Code.LATE_SENDS: Rule(Kind.GENERATOR, "late sends"),
    Code.GENERATOR_CROWDED: Rule(Kind.INTERFERENCE, "late sends, another task on the "
                                                    "generator's CPU"),
    Code.GENERATOR_SATURATED: Rule(Kind.GENERATOR, "generator CPU saturated"),
    Code.NO_LOCAL_PORT: Rule(Kind.GENERATOR, "out of local ports"),
    Code.OUT_OF_DESCRIPTORS: Rule(Kind.GENERATOR, "generator out of file descriptors"),
    Code.SHARDS_UNFINISHED: Rule(Kind.GENERATOR, "generator shards unfinished"),
    Code.RATE_SHORTFALL: Rule(Kind.GENERATOR, "offered load not delivered"),
    Code.OFFER_SHORTFALL: Rule(Kind.GENERATOR, "S-Client could not keep offering"),
    Code.BACKLOG_DRAINED: Rule(Kind.SETUP, "not steady state: a backlog drained"),
    Code.BACKLOG_GREW: Rule(Kind.SETUP, "not steady state: the backlog grew"),
    Code.NO_REPLIES: Rule(Kind.SERVER, "no replies"),
    Code.NOTHING_SENT: Rule(Kind.SERVER, "no request sent"),
    Code.SHORT_WINDOW: Rule(Kind.GENERATOR, "short window"),
    Code.REFUSED: Rule(Kind.SERVER, "connections refused"),
    Code.SERVER_EXITED: Rule(Kind.SERVER, "server exited"),
    Code.COLD_LOST: Rule(Kind.SERVER, "cold connections lost"),
    Code.STEAL: Rule(Kind.INTERFERENCE, "CPU steal"),
    Code.CROWDED_SERVER: Rule(Kind.INTERFERENCE, "another task on the server's CPU"),
    Code.FOREIGN_WORK: Rule(Kind.INTERFERENCE, "foreign work on the measured CPU"),
    Code.CLOSED_LOOP_ELSEWHERE: Rule(Kind.SETUP, "closed loop not server-bound"),
    Code.CLOSED_LOOP_CROWDED: Rule(Kind.INTERFERENCE, "closed loop not server-bound, another "
                                                      "task on the generator's CPU"),
    Code.EMULATED_CPU: Rule(Kind.SETUP, "emulated CPU"),
    Code.CLOCK_OFFSET: Rule(Kind.SETUP, "clock offset between hosts"),
    Code.WINDOW_DISAGREES: Rule(Kind.SETUP, "window sources disagree"),
    Code.WORKER_LOST: Rule(Kind.SETUP, "worker lost"),
    Code.NOT_MEASURED: Rule(Kind.SETUP, "not measured"),
}


@dataclass(frozen=True)
class Reason:
    code: Code
    sentence: str

    @property
    def kind(self) -> Kind:
        return self.code.kind

    def on(self, host: str) -> Reason:
        """The reason as one host's among several (a cluster's shards): its sentence names
        the host ("" on one machine: unchanged)."""
        return Reason(self.code, f"{host}: {self.sentence}") if host else self

    def __str__(self) -> str:
        return self.sentence


@dataclass(frozen=True)
class Verdict:
    """Valid when no rule failed; else one reason per rule that did. server_saturated is a
    finding beside it (None: not judged, e.g. `wanbench load` has no sampler)."""

    reasons: tuple[Reason, ...] = ()
    server_saturated: bool | None = None

    @property
    def valid(self) -> bool:
        return not self.reasons

    @property
    def interference_only(self) -> bool:
        """Every reason was neighbours' doing: worth measuring again."""
        return bool(self.reasons) and all(r.kind is Kind.INTERFERENCE for r in self.reasons)

    def document_fields(self) -> dict[str, Any]:
        """The verdict as a result document carries it (clients/SCHEMA.md)."""
        return {"valid": self.valid, "invalid_reasons": [r.sentence for r in self.reasons],
                "invalid_codes": [r.code.value for r in self.reasons]}


@dataclass(frozen=True)
class ClockOffset:
    """A host's clock less the run's host's, from one time exchange: the host's reading is
    taken halfway through the round trip, give or take half of it (uncertainty_s)."""

    offset_s: float
    uncertainty_s: float


@dataclass(frozen=True)
class GeneratorFacts:
    """What one generator (or one host's shard of a cluster's load) reported of its window
    (clients/SCHEMA.md), beside what it was asked."""

    generator: str
    asked_s: float = 0.0  # the duration asked (0: a hold until signalled)
    hot_conns: int = 0  # requesting connections (0: cold-only or stream)
    poisson: bool = False
    window_s: float | None = None
    offered_rps: float | None = None
    scheduled: int | None = None  # open-loop sends due in the window, by its own count
    sent: int | None = None
    late: int | None = None
    late_threshold_us: float | None = None
    late_limit: float = LATE_LIMIT  # the share of late sends the rule allows (Lateness)
    replies: int | None = None
    refused: int | None = None
    no_local_port: int | None = None
    no_descriptor: int | None = None
    unfinished_shards: int | None = None
    shards: int = 1  # processes, each with a CPU of its own
    cpu_s: float | None = None  # user + system time in the window, over its shards
    run_delay_s: float | None = None  # its wait for a CPU (None: it does not read it)
    spin_idle_s: float | None = None  # polls that found nothing to do
    # overload: sclient: each scheduled send opens its own socket (at most hot_conns in flight)
    keeps_offering: bool = False
    no_socket: int | None = None  # scheduled sends that found every socket in flight
    response_mean_s: float | None = None  # mean time from send to reply (uncorrected)
    # scheduled sends waiting for a connection at the window's start and end
    waiting_start: int | None = None
    waiting_end: int | None = None
    stream_target_mbps: float | None = None  # the bandwidth asked of the streams (None: unpaced)
    stream_achieved_mbps: float | None = None  # what they carried in the window

    def late_share(self) -> float | None:
        if not self.scheduled or self.late is None:
            return None
        return self.late / self.scheduled

    def delivered_share(self) -> float | None:
        """Requests sent over those offered in the window (None: a closed loop, or unknown)."""
        if not self.offered_rps or not self.hot_conns or not self.window_s or self.sent is None:
            return None
        return self.sent / (self.offered_rps * self.window_s)

    def kept_schedule(self) -> bool:
        """An open-loop generator that counted its schedule and kept it: late sends within
        LATE_LIMIT and the offered requests delivered. It did not limit the rate, whatever
        its CPU read."""
        late, delivered = self.late_share(), self.delivered_share()
        return (late is not None and late <= self.late_limit and delivered is not None
                and delivered >= _delivery_floor(self.offered_rps, self.window_s, self.poisson))

    def fell_behind(self) -> str:
        """How it fell behind its schedule, as a clause ("" when it keeps none)."""
        late, delivered = self.late_share(), self.delivered_share()
        if late is not None and late > self.late_limit:
            return f" and fell behind ({100 * late:.1f} % of its sends late)"
        if delivered is not None and delivered < _delivery_floor(self.offered_rps,
                                                                 self.window_s, self.poisson):
            return f" and fell behind (it sent {100 * delivered:.0f} % of the offered requests)"
        return ""


@dataclass(frozen=True)
class WindowFacts:
    """What the runner's samplers measured over the window (% of the window), and how the
    point was set up."""

    generator_cpu_pct: float | None = None  # the hot and cold generators together
    generator_wait_pct: float | None = None
    other_generator_cpu_pct: float | None = None  # other tasks' time on the generator's CPU
    # the generator's wait for its CPU while other tasks ran there (None: not traced)
    generator_wait_others_pct: float | None = None
    server_cpu_pct: float | None = None
    server_wait_pct: float | None = None
    other_server_cpu_pct: float | None = None  # other tasks' time on the server's CPU
    # the server's wait for its CPU while other tasks ran there (None: not traced)
    server_wait_others_pct: float | None = None
    steal_server_pct: float | None = None
    steal_generator_pct: float | None = None
    reply_rps: float | None = None  # 2xx replies per second
    server_cpus: float = 1.0  # the CPUs the server may use (server_cpus)
    server_cpu: int | None = None  # the CPU it is pinned to
    single_process: bool = False  # its waits are others' (not its own workers')
    stream: bool = False  # cycles per packet: the measured CPU's whole busy time counts
    server_bound: bool = True  # a closed loop must saturate the server (hot.server_bound)
    emulated: bool = False  # a guest under QEMU's TCG
    cold_asked: int = 0
    cold_held: int | None = None
    window_s: float | None = None  # the runner's window
    # each source's (start, end) less the runner's edges, in s (the sources that ran)
    edge_offsets_s: Mapping[str, tuple[float, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class Facts:
    """Everything a point is judged on. generators: by host ("" on one machine); clocks: by
    host, for a load on several; sampler_host: the host whose samplers keep the scheduled
    start beside the generators (a cluster point's server); window: the runner's (None for
    `wanbench load`)."""

    generators: Mapping[str, GeneratorFacts]
    clocks: Mapping[str, ClockOffset] = field(default_factory=dict)
    sampler_host: str | None = None
    window: WindowFacts | None = None

    @classmethod
    def of_one(cls, generator: GeneratorFacts) -> Facts:
        """The facts of a single generator's run (no window of a runner's: `wanbench load`)."""
        return cls({"": generator})


def judge(facts: Facts) -> Verdict:
    """The one verdict on a point (or a generator's run): each rule of this module on the
    facts, the interference reasons last."""
    window = facts.window
    own: list[Reason] = []
    crowded_late: list[Reason] = []
    for host, generator in facts.generators.items():
        for reason in _generator_reasons(generator, window):
            (crowded_late if reason.kind is Kind.INTERFERENCE else own).append(reason.on(host))
    own += _clock_reasons(facts)
    if window is None:
        return Verdict(tuple(own + crowded_late))
    generators = list(facts.generators.values())
    offered = _total(g.offered_rps for g in generators)
    saturated = server_saturated(window.reply_rps, offered, window.server_cpu_pct,
                                 window.server_cpus, window.server_wait_pct)
    own += [r for r in (
        _sampled_saturation(generators, window, own),
        cold_lost(window.cold_held, window.cold_asked),
        None if window.stream else closed_loop_elsewhere(
            offered, sum(g.hot_conns for g in generators), saturated, window.server_cpu_pct,
            window.generator_wait_pct, window.server_bound, window.generator_wait_others_pct,
            window.other_generator_cpu_pct),
        emulated_cpu(window.emulated),  # counts stand, timings do not
        window_disagrees(window.edge_offsets_s, window.window_s),
    ) if r]
    interference = [r for r in (
        stolen(window.steal_server_pct, window.steal_generator_pct),
        # a server's own workers share its CPU: their waits are not interference
        crowded(window.server_wait_pct, window.server_cpu, window.other_server_cpu_pct,
                window.server_wait_others_pct)
        if window.server_cpus == 1 and window.single_process else None,
        foreign_work(window.other_server_cpu_pct, window.server_cpu) if window.stream else None,
    ) if r]
    return Verdict(tuple(own + interference + crowded_late), saturated)


def _generator_reasons(g: GeneratorFacts, window: WindowFacts | None) -> list[Reason]:
    """The rules one generator's own facts decide (and its late sends' cause, when the
    runner saw who else ran on its CPU)."""
    busy = waiting = idle = None
    # Only a generator that reads its run-queue wait (sclient, asyncio) says here whether it
    # was saturated; the runner's sampler judges the external tools from outside, all but
    # those whose CPU says nothing (CPU_SAYS_NOTHING). Each shard has a CPU of its own.
    if g.window_s and g.cpu_s is not None and g.run_delay_s is not None:
        busy = 100 * g.cpu_s / g.window_s / g.shards
        idle = (idle_poll_pct(g.spin_idle_s, g.window_s) or 0.0) / g.shards
        waiting = 100 * g.run_delay_s / g.window_s / g.shards
    late = late_sends(g.late, g.scheduled, g.late_threshold_us, waiting, g.late_limit)
    if late is not None and window is not None:
        # late sends that another task's time on the generator's CPU explains are its
        # interference: measured again (interference_retries), not the generator's limit
        late = generator_crowded(late, window.generator_wait_pct,
                                 window.other_generator_cpu_pct,
                                 window.generator_wait_others_pct,
                                 window.steal_generator_pct, g.late_limit) or late
    reasons = [
        late,
        None if g.kept_schedule() else generator_saturated(
            busy, waiting or 0.0, idle_poll=idle, fell_behind=g.fell_behind()),
        no_local_port(g.no_local_port),
        # A generator that counts its schedule (sclient, asyncio) shows its own shortfall as
        # late sends; what it left unsent waited for a busy connection: the server's doing.
        rate_shortfall(g.offered_rps if g.hot_conns else None, g.window_s, g.sent,
                       poisson=g.poisson) if g.scheduled is None else None,
        offer_shortfall(g),
        stream_shortfall(g.stream_target_mbps, g.stream_achieved_mbps),
        backlog_drained(g.replies, g.sent, g.window_s, g.response_mean_s)
        if g.hot_conns else None,
        backlog_grew(g.waiting_start, g.waiting_end, g.scheduled) if g.hot_conns else None,
        no_replies(g.hot_conns, g.replies),
        nothing_sent(g.hot_conns, g.sent, g.keeps_offering),
        short_window(g.window_s, g.asked_s) if g.asked_s else None,
        refused(g.refused),
        shards_unfinished(g.unfinished_shards, g.shards),
        out_of_descriptors(g.no_descriptor),
    ]
    return [r for r in reasons if r]


def _sampled_saturation(generators: list[GeneratorFacts], window: WindowFacts,
                        found: list[Reason]) -> Reason | None:
    """The runner's view of the generators' CPU (the hot and cold generators share theirs:
    their sum, less the hot generators' polls that found nothing), unless a generator's own
    accounting already said so, or their CPU says nothing, or they kept their schedule."""
    if (any(r.code is Code.GENERATOR_SATURATED for r in found)
            or any(g.generator in CPU_SAYS_NOTHING for g in generators)
            or all(g.kept_schedule() for g in generators)):
        return None
    idle = _total(idle_poll_pct(g.spin_idle_s, g.window_s) for g in generators)
    behind = next((clause for g in generators if (clause := g.fell_behind())), "")
    return generator_saturated(window.generator_cpu_pct, idle_poll=idle, fell_behind=behind)


def _clock_reasons(facts: Facts) -> list[Reason]:
    """The clocks of the hosts that keep the scheduled start, those whose generators start at
    it and the sampler host; a cold host's connections are open before it, its clock only
    recorded."""
    scheduled = {*facts.generators, facts.sampler_host}
    window_s = max((g.asked_s for g in facts.generators.values()), default=0.0)
    reasons = [clock_offset(host, clock.offset_s, clock.uncertainty_s, window_s)
               for host, clock in facts.clocks.items() if host in scheduled]
    return [r for r in reasons if r]


def _total(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _delivery_floor(offered_rps: float | None, window_s: float | None, poisson: bool) -> float:
    """The least share of the offered requests that counts as delivered (a Poisson draw of
    n expected requests varies by POISSON_SIGMAS/sqrt(n) on its own)."""
    asked = (offered_rps or 0.0) * (window_s or 0.0)
    noise = POISSON_SIGMAS / math.sqrt(asked) if poisson and asked > 0 else 0.0
    return 1 - RATE_TOLERANCE - noise


def server_cpus(budget_pct: float | None, pinned: bool, workers: int, machine_cpus: int) -> float:
    """The CPUs the server may use, which its saturation is judged against: its budget's
    share of one CPU (cpus.server_budget_pct), one when pinned, else its workers (at most the
    machine's CPUs)."""
    if budget_pct:
        return budget_pct / 100
    if pinned:
        return 1
    return max(1, min(workers, machine_cpus))


def late_sends(late: int | None, scheduled: int | None, threshold_us: float | None,
               waited_pct: float | None = None, limit: float = LATE_LIMIT) -> Reason | None:
    """waited_pct: the generator's run-queue wait, % of the window; named when it is the
    likely cause (another task ran on the generator's CPU). limit: the share of late sends
    allowed (Lateness)."""
    if not scheduled or late is None or late / scheduled <= limit:
        return None
    threshold = f"{threshold_us:,.0f} µs" if threshold_us else "the late threshold"
    share = 100 * late / scheduled
    waited = (f" (it waited for its CPU {waited_pct:.0f} % of the window)"
              if waited_pct is not None and waited_pct >= 1 else "")
    return Reason(Code.LATE_SENDS,
                  f"late sends: {late:,} of {scheduled:,} scheduled sends ({share:.1f} %) went "
                  f"out more than {threshold} after their intended time; the generator fell "
                  f"behind{waited}")


def idle_poll_pct(spin_idle_s: float | None, window_s: float | None) -> float | None:
    """% of the window a generator spent in polls that found nothing to do, by its own count
    (wb-sclient polls instead of sleeping before a due send; generator_cpu.spin_idle_s): time
    its CPU reads as busy but that it could have given up. Summed over shards; None when the
    generator does not say."""
    return 100 * spin_idle_s / window_s if spin_idle_s is not None and window_s else None


def generator_saturated(cpu_pct: float | None, waiting_pct: float = 0.0,
                        idle_poll: float | None = None, fell_behind: str = "") -> Reason | None:
    """cpu_pct: the generator's CPU, % of the window; idle_poll: how much of it was polls
    that found nothing (idle_poll_pct), which is not work; fell_behind: how it missed its
    schedule (GeneratorFacts.fell_behind; one that kept it is never judged here)."""
    if cpu_pct is None:
        return None
    busy_pct = cpu_pct - (idle_poll or 0.0)
    if busy_pct + waiting_pct <= GENERATOR_SATURATED_PCT:
        return None
    waited = f" and waited for a CPU {waiting_pct:.0f} % of the time" if waiting_pct else ""
    polled = f" besides {idle_poll:.0f} % in idle polls" if idle_poll else ""
    return Reason(Code.GENERATOR_SATURATED,
                  f"generator CPU saturated in the measured window: it ran {busy_pct:.0f} %"
                  f"{polled}{waited} (over {GENERATOR_SATURATED_PCT:.0f} %){fell_behind}: it "
                  f"may have been the bottleneck")


def no_local_port(count: int | None) -> Reason | None:
    if not count:
        return None
    return Reason(Code.NO_LOCAL_PORT,
                  f"the generator ran out of local ports {count:,} times (EADDRNOTAVAIL on "
                  f"connect): give it more source addresses (--source), a wider "
                  f"net.ipv4.ip_local_port_range, or net.ipv4.tcp_tw_reuse=1")


def out_of_descriptors(count: int | None) -> Reason | None:
    if not count:
        return None
    return Reason(Code.OUT_OF_DESCRIPTORS,
                  f"the generator ran out of file descriptors {count:,} times: it, not the "
                  f"server, limited the run (fewer connections, a higher RLIMIT_NOFILE, or "
                  f"sclient, which shards past it)")


def shards_unfinished(unfinished: int | None, shards: int) -> Reason | None:
    if not unfinished:
        return None
    return Reason(Code.SHARDS_UNFINISHED,
                  f"{unfinished} of {shards} generator shard(s) did not finish")


def rate_shortfall(offered_rps: float | None, window_s: float | None, sent: int | None,
                   poisson: bool = False) -> Reason | None:
    if not offered_rps or not window_s or sent is None:
        return None
    asked = offered_rps * window_s
    if sent / asked >= _delivery_floor(offered_rps, window_s, poisson):
        return None
    return Reason(Code.RATE_SHORTFALL,
                  f"offered load not delivered: the generator sent {sent / window_s:,.0f} "
                  f"req/s of the {offered_rps:,.0f} offered ({100 * (sent / asked - 1):+.1f} "
                  f"%, tolerance {100 * RATE_TOLERANCE:.0f} %)")


def stream_shortfall(target_mbps: float | None, achieved_mbps: float | None) -> Reason | None:
    """Paced streams (cycles per packet at a bandwidth) that carried less than
    (1 - RATE_TOLERANCE) of what was asked did not measure the bandwidth the point claims:
    a sweep along bandwidth would put its costs at levels it never reached."""
    if not target_mbps or achieved_mbps is None:
        return None
    if achieved_mbps >= (1 - RATE_TOLERANCE) * target_mbps:
        return None
    return Reason(Code.RATE_SHORTFALL,
                  f"offered load not delivered: the streams carried {achieved_mbps:,.1f} Mbit/s "
                  f"of the {target_mbps:,.0f} asked ({100 * (achieved_mbps / target_mbps - 1):+.1f}"
                  f" %, tolerance {100 * RATE_TOLERANCE:.0f} %)")


def offer_shortfall(g: GeneratorFacts) -> Reason | None:
    """An S-Client (overload: sclient) offers every scheduled send by starting its own
    connection attempt at its time, so that the offered rate never depends on the server:
    one that started fewer than (1 - OFFER_TOLERANCE) of the attempts scheduled in the window
    did not measure the server at the rate it claims, and says which limit it met. Its
    schedule is its own count, so no Poisson allowance: a draw's noise is in `scheduled`."""
    if not g.keeps_offering or not g.scheduled or g.sent is None:
        return None
    share = g.sent / g.scheduled
    if share >= 1 - OFFER_TOLERANCE:
        return None
    limits = [f"{n:,} found {what}" for n, what in (
        (g.no_socket, "all its sockets in flight (hot.conns: at least "
                      "clients.spec.sclient_sockets)"),
        (g.no_descriptor, "no file descriptor (RLIMIT_NOFILE)"),
        (g.no_local_port, "no local port")) if n]
    why = f": {', '.join(limits)}" if limits else ""
    return Reason(Code.OFFER_SHORTFALL,
                  f"the S-Client could not keep offering: it started {g.sent:,} of "
                  f"{g.scheduled:,} scheduled attempts ({100 * share:.1f} %, under "
                  f"{100 * (1 - OFFER_TOLERANCE):.0f} %){why}")


def backlog_drained(replies: int | None, sent: int | None, window_s: float | None,
                    response_mean_s: float | None) -> Reason | None:
    """Flow conservation: in a steady window the server answers what is sent in it. Replies
    may exceed sends only by the requests in flight at the window's start (answered in it,
    sent before it), which in steady state are L = λW (Little's law: the window's send rate
    times the mean time from send to reply), plus the arrival count's own noise
    (POISSON_SIGMAS standard deviations of a Poisson count, √sent; a fixed schedule has
    less). More means a backlog built before the window drained in it: its replies measure
    that backlog, not the offered rate. Unjudged without a response time (nothing was
    answered: other rules say so)."""
    if replies is None or not sent or not window_s or response_mean_s is None:
        return None
    in_flight = sent / window_s * response_mean_s
    allowed = in_flight + POISSON_SIGMAS * math.sqrt(sent)
    if replies - sent <= allowed:
        return None
    return Reason(Code.BACKLOG_DRAINED,
                  f"not steady state: the server answered {replies:,} requests in the window "
                  f"and {sent:,} were sent in it, {replies - sent:,} more, over the "
                  f"{allowed:,.0f} a steady window allows ({in_flight:,.0f} in flight at its "
                  f"start by Little's law, {POISSON_SIGMAS:g} σ of the arrivals): a backlog "
                  f"from before the window drained in it (a longer warm-up, or overload: "
                  f"sclient)")


def backlog_grew(start: int | None, end: int | None, scheduled: int | None) -> Reason | None:
    """The generator's backlog (scheduled sends waiting for a connection) at the window's end
    less at its start. Over a window the backlog changes by the sends that joined it less
    those that left; while the server keeps up, each send leaves as the next arrives, and
    the backlog moves no more than the arrival count's own noise (POISSON_SIGMAS of a Poisson
    count: √scheduled). A backlog that grows by more is a queue whose arrivals outrun its
    service (ρ ≥ 1: it grows by λ - μ a second, with no steady state). The requests in
    flight are not judged: an S-Client bounds them by its timeouts (and has no backlog), a
    pool by its connections, and their count at an instant follows the server's bursts."""
    if start is None or end is None or not scheduled:
        return None
    allowed = POISSON_SIGMAS * math.sqrt(scheduled)
    if end - start <= allowed:
        return None
    return Reason(Code.BACKLOG_GREW,
                  f"not steady state: {end:,} scheduled sends waited for a connection at the "
                  f"window's end and {start:,} at its start, {end - start:,} more, over the "
                  f"{allowed:,.0f} its {scheduled:,} arrivals vary ({POISSON_SIGMAS:g} σ): the "
                  f"offered rate outran the server and the backlog grew without bound "
                  f"(overload: sclient keeps offering instead)")


def no_replies(hot_conns: int, replies: int | None) -> Reason | None:
    if not hot_conns or replies is None or replies > 0:
        return None
    return Reason(Code.NO_REPLIES,
                  "no replies in the measured window: is the server up and answering at the "
                  "target?")


def nothing_sent(hot_conns: int, sent: int | None, keeps_offering: bool = False) -> Reason | None:
    """A point whose generator sent no request of its window measured nothing of the load
    offered in it: no response time, and its replies answer requests from before the window
    (docs/validity.md tells the run that showed it). Generators that count their schedule are
    exempt from rate_shortfall, so this rule stands on its own."""
    if not hot_conns or sent is None or sent > 0 or keeps_offering:  # an S-Client never waits
        return None
    return Reason(Code.NOTHING_SENT,
                  "no request of the measured window was sent: each waited for a connection "
                  "the server still held, so the point measured nothing of the offered load "
                  "(its replies answer requests from before the window)")


def short_window(measured_s: float | None, asked_s: float) -> Reason | None:
    if measured_s is None or asked_s <= 0 or measured_s >= WINDOW_TOLERANCE * asked_s:
        return None
    return Reason(Code.SHORT_WINDOW,
                  f"measured window {measured_s:.2f} s of the {asked_s:g} s asked: the "
                  f"generator stopped early")


def refused(count: int | None) -> Reason | None:
    if not count:
        return None
    return Reason(Code.REFUSED,
                  f"{count:,} connections refused: the server was gone or not listening for "
                  f"part of the window")


def server_exited(status: int | None, said: str = "") -> Reason:
    code = f" with status {status}" if status is not None else ""
    return Reason(Code.SERVER_EXITED, f"the server exited during the point{code}{said}")


def cold_lost(held: int | None, asked: int) -> Reason | None:
    if held is None or held >= asked:
        return None
    return Reason(Code.COLD_LOST, f"only {held:,} of {asked:,} cold connections were held to "
                                  f"the end")


def server_busy(server_cpu_pct: float, server_cpus: float = 1,
                server_wait_pct: float | None = None) -> bool:
    """The server ran, or waited to run, ≥ SERVER_BUSY_PCT of the CPUs it may use (a budget
    counts as its share of one CPU): it had no CPU to spare, whether or not it kept up."""
    return server_cpu_pct + (server_wait_pct or 0.0) >= SERVER_BUSY_PCT * server_cpus


def server_saturated(reply_rps: float | None, offered_rps: float | None,
                     server_cpu_pct: float | None, server_cpus: float = 1,
                     server_wait_pct: float | None = None) -> bool | None:
    """The server was the bottleneck: it was busy (ran or waited to run ≥ SERVER_BUSY_PCT of
    the CPUs it may use) and, under an open loop, its replies fell behind the offered rate. A
    client- or link-limited point with an idle server is not saturated. None when unmeasured.

    Waiting counts as busy, as for the generator: a server that wanted its CPU all along while
    a neighbour took a share of it was still the bottleneck (the neighbour is judged apart)."""
    if server_cpu_pct is None:
        return None
    busy = server_busy(server_cpu_pct, server_cpus, server_wait_pct)
    if not offered_rps:
        return busy
    if reply_rps is None:
        return None
    return busy and reply_rps < KEEP_UP_FRACTION * offered_rps


def stolen(server_cpu_pct: float | None, generator_cpu_pct: float | None) -> Reason | None:
    worst = max((v for v in (server_cpu_pct, generator_cpu_pct) if v is not None), default=None)
    if worst is None or worst <= STEAL_LIMIT_PCT:
        return None
    parts = [f"{who}'s CPU {value:.1f} %" for who, value in
             (("server", server_cpu_pct), ("generator", generator_cpu_pct)) if value is not None]
    return Reason(Code.STEAL,
                  f"{worst:.0f} % CPU steal during the window ({', '.join(parts)}): the "
                  f"hypervisor ran someone else on these vCPUs")


def traced_wait_behind_others(wait_others_pct: float, wait_pct: float | None) -> float:
    """A wait behind other tasks as whoran traced it (% of the window), never more than the
    whole wait schedstat counted (wait_pct): the trace counts each wake-up's own latency as
    waiting, schedstat does not."""
    return wait_others_pct if wait_pct is None else min(wait_others_pct, wait_pct)


def crowded(server_wait_pct: float | None, server_cpu: int | None,
            others_pct: float | None = None,
            wait_others_pct: float | None = None) -> Reason | None:
    """The server waited for its CPU more than WAIT_LIMIT_PCT of the window while other tasks
    ran there. Traced (wait_others_pct: its wait while other tasks held its CPU, whoran, % of
    the window), that is the wait others explain, never more than its whole wait (schedstat,
    server_wait_pct: the trace counts each wake-up's own latency as waiting, schedstat does
    not). Untraced (others_pct: their busy time on its CPU, /proc/stat's lower bound), a task
    waits only while something else runs, so the wait others can explain is at most their
    running time. The rest is the CPU's interrupt and softirq work (the network stack's, its
    host's own when receive is steered there, its ksoftirqd) or a halted vCPU slow to wake,
    none of them a neighbour. Without either, any long wait counts."""
    if wait_others_pct is not None:
        explained = traced_wait_behind_others(wait_others_pct, server_wait_pct)
    elif server_wait_pct is None:
        return None
    else:
        explained = server_wait_pct if others_pct is None else min(server_wait_pct, others_pct)
    if explained <= WAIT_LIMIT_PCT:
        return None
    where = f" CPU {server_cpu}" if server_cpu is not None else " its CPU"
    if wait_others_pct is not None:
        return Reason(Code.CROWDED_SERVER,
                      f"the server waited for its CPU {explained:.0f} % of the window while "
                      f"other tasks held{where}")
    ran = "" if others_pct is None else f" for {others_pct:.0f} % of it"
    return Reason(Code.CROWDED_SERVER,
                  f"the server waited for its CPU {server_wait_pct:.0f} % of the window: "
                  f"another task ran on{where}{ran}")


def generator_crowded(late: Reason, generator_wait_pct: float | None,
                      others_pct: float | None, wait_others_pct: float | None = None,
                      stolen_pct: float | None = None,
                      limit: float = LATE_LIMIT) -> Reason | None:
    """Late sends are interference, to be measured again, when the generator was kept from
    its CPU by others long enough to make them: more than `limit` of the window, a stall
    that delays that share of sends past any threshold (the rule's own limit, so that others'
    stalls alone could have made the point invalid). Others are the tasks that held its CPU
    while it waited (wait_others_pct: traced by whoran, % of the window) and the hypervisor,
    which ran someone else on its vCPU (stolen_pct: steal on its CPU, % of the window; a
    halted vCPU accrues none, so all of it was time the CPU had work). Its own work (its
    shards, its CPU's ksoftirqd, softirq in its time) or a slow wake-up are not others':
    those late sends stay the generator's.

    The wait behind others is part of its whole wait (generator_wait_pct, schedstat): never
    more than that is counted (the tracer's windows have read more: docs/bench-demo.md).
    Untraced (wait_others_pct None), the wait other tasks can explain is at most both its
    whole wait and their time on its CPU (others_pct then /proc/stat's lower bound,
    docs/validity.md)."""
    stolen = stolen_pct or 0.0
    if wait_others_pct is not None:
        held = traced_wait_behind_others(wait_others_pct, generator_wait_pct)
    elif generator_wait_pct is None or others_pct is None:
        return None
    else:
        held = min(generator_wait_pct, others_pct)
    if held + stolen <= 100 * limit:
        return None
    behind = (f"other tasks held the generator's CPU while it waited for {held:.1f} % of the "
              f"window (they ran there {others_pct or 0:.1f} % of it)"
              if wait_others_pct is not None
              else f"another task ran on the generator's CPU for {others_pct:.1f} % of the "
                   f"window while it waited {generator_wait_pct:.1f} %")
    steal = f", and the hypervisor stole {stolen:.1f} % of it" if stolen else ""
    return Reason(Code.GENERATOR_CROWDED, f"{late.sentence}: {behind}{steal}")


def foreign_work(others_pct: float | None, server_cpu: int | None) -> Reason | None:
    """Per-packet cost is the measured CPU's whole busy time (or its cycle counters) over the
    packets: other tasks' work there over WAIT_LIMIT_PCT of the window inflates it, even when
    the server never waited for them."""
    if others_pct is None or others_pct <= WAIT_LIMIT_PCT:
        return None
    where = f"CPU {server_cpu}" if server_cpu is not None else "the server's CPU"
    return Reason(Code.FOREIGN_WORK,
                  f"another task ran on {where} for {others_pct:.0f} % of the window: the "
                  f"cycles per packet count that CPU's whole busy time")


def clock_offset(host: str, offset_s: float, uncertainty_s: float,
                 window_s: float) -> Reason | None:
    """offset_s: the host's clock less the run's host's; uncertainty_s: half the exchange's
    round trip, which the offset may be off by too."""
    worst = abs(offset_s) + uncertainty_s
    if worst <= CLOCK_OFFSET_FRACTION * window_s:
        return None
    return Reason(Code.CLOCK_OFFSET,
                  f"the clock of {host} is {offset_s * 1e3:+.1f} ms (± {uncertainty_s * 1e3:.1f} "
                  f"ms) off the run's host's, over {CLOCK_OFFSET_FRACTION:.0%} of the "
                  f"{window_s:g} s window: synchronise the hosts' clocks (chrony) and resume")


def window_disagrees(offsets_s: Mapping[str, tuple[float, float]],
                     window_s: float | None) -> Reason | None:
    """offsets_s: by source, its start and end less the runner's window's, in s. The source
    furthest off names the reason when it is more than CLOCK_OFFSET_FRACTION of the window."""
    if not window_s or not offsets_s:
        return None
    source, (start, end) = max(offsets_s.items(),
                               key=lambda item: max(abs(item[1][0]), abs(item[1][1])))
    if max(abs(start), abs(end)) <= CLOCK_OFFSET_FRACTION * window_s:
        return None
    return Reason(Code.WINDOW_DISAGREES,
                  f"the {source.replace('_', ' ')} measured from {start * 1e3:+.1f} ms to "
                  f"{end * 1e3:+.1f} ms off the {window_s:g} s window's edges, over "
                  f"{CLOCK_OFFSET_FRACTION:.0%} of it: the point's numbers do not describe "
                  f"one interval")


def worker_lost(host: str, said: str = "") -> Reason:
    return Reason(Code.WORKER_LOST, f"worker {host} was lost during the point{said}")


def not_measured(why: str) -> Reason:
    """A point that failed before it could be measured (the runner's PointFailed)."""
    return Reason(Code.NOT_MEASURED, why)


EMULATED_CPU = "emulated CPU: timings not comparable"


def emulated_cpu(emulated: bool) -> Reason | None:
    return Reason(Code.EMULATED_CPU, EMULATED_CPU) if emulated else None


def closed_loop_elsewhere(offered_rps: float | None, hot_conns: int | None,
                          saturated: bool | None, server_cpu_pct: float | None,
                          generator_wait_pct: float | None = None,
                          server_bound: bool = True,
                          wait_others_pct: float | None = None,
                          others_pct: float | None = None) -> Reason | None:
    """generator_wait_pct: the generators' run-queue wait, % of the window; named when it is
    the likely cause (another task took the generator's CPU, so it sent less).
    server_bound=False (scenario hot.server_bound): the round trips may set the rate by
    design, but a generator kept from its CPU still may not.

    Traced (wait_others_pct: the generator's wait while other tasks held its CPU, whoran, %
    of the window; the run's own link emulators are not others), a wait behind others over
    WAIT_LIMIT_PCT is interference, to be measured again (CLOSED_LOOP_CROWDED): a neighbour,
    not the set-up, kept the loop from loading the server. Untraced, or behind the run's own
    processes, it stays the set-up's (CLOSED_LOOP_ELSEWHERE)."""
    if offered_rps or not hot_conns or saturated is not False or server_cpu_pct is None:
        return None
    held = (None if wait_others_pct is None
            else traced_wait_behind_others(wait_others_pct, generator_wait_pct))
    if held is not None and held > WAIT_LIMIT_PCT:
        return Reason(Code.CLOSED_LOOP_CROWDED,
                      f"closed loop whose server was not the bottleneck (server CPU "
                      f"{server_cpu_pct:.1f} %): other tasks held the generator's CPU while it "
                      f"waited for {held:.1f} % of the window (they ran there "
                      f"{others_pct or 0:.1f} % of it), so it sent less than it would have")
    crowded = generator_wait_pct is not None and generator_wait_pct > WAIT_LIMIT_PCT
    if not server_bound:
        return Reason(Code.CLOSED_LOOP_ELSEWHERE,
                      f"closed loop whose server was not the bottleneck, and the generator "
                      f"waited for its CPU {generator_wait_pct:.1f} % of the window: it, not "
                      f"the round trips, may have set the rate") if crowded else None
    waited = (f" (the generator waited for its CPU {generator_wait_pct:.0f} % of the window)"
              if crowded else "")
    # one decimal: 89.6 % rounded to "90 %" read as if it met the 90 % it missed
    return Reason(Code.CLOSED_LOOP_ELSEWHERE,
                  f"closed loop, but the server was not the bottleneck (server CPU "
                  f"{server_cpu_pct:.1f} %, under the {SERVER_BUSY_PCT:.0f} % of a bottleneck): "
                  f"the reply rate measures the generator, the link or the round trips, not the "
                  f"server's capacity{waited}")
