"""When a measurement is valid: the one definition, for every generator and the runner.

Generators report facts (sends, late sends, replies, errors, their CPU, the window they
measured); the rules below turn facts into verdicts with one sentence each. `wanbench load`
and `wanbench run` both judge through here, so a threshold or its wording changes in one
place. The rules (docs/validity.md lists them for users):

- the generator fell behind: more than LATE_LIMIT of its scheduled sends left more than the
  rule's late threshold (LATE_THRESHOLD_US, which every generator is told) after their
  intended time (interference when other tasks' time on its CPU,
  while it waited, explains them);
- the generator was the bottleneck: its CPU time plus run-queue wait exceeded
  GENERATOR_SATURATED_PCT of the window;
- the generator ran out of local ports (EADDRNOTAVAIL);
- the offered load was not delivered: an open-loop generator without a schedule count of its
  own (httperf) sent fewer than (1 - RATE_TOLERANCE) of the offered requests (less a Poisson
  draw's own noise); sclient and asyncio show their own shortfall as late sends, and what
  they left unsent waited for a connection the server still held;
- nothing was answered: hot connections and no reply in the window;
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
  replies) still holds.
- several hosts (wanbench's cluster): a host's clock was off the run's host's by more than
  CLOCK_OFFSET_FRACTION of the window, so the hosts' windows did not overlap enough to add
  their rates; or a worker was lost during the point.

Saturation is a finding, not a fault: `server_saturated` says the server was the bottleneck
(see its docstring).
"""

from __future__ import annotations

import math
from typing import Any

LATE_LIMIT = 0.01
# A send is late past this: wb-sclient times its sends to the microsecond, asyncio's timers
# to the millisecond. Every generator is told the threshold (LoadSpec.late_us), none keeps it.
LATE_THRESHOLD_US = {"sclient": 1000.0, "asyncio": 5000.0}
GENERATOR_SATURATED_PCT = 95.0
RATE_TOLERANCE = 0.05
WINDOW_TOLERANCE = 0.95
POISSON_SIGMAS = 3.0
SERVER_BUSY_PCT = 90.0  # of the CPUs the server may use
KEEP_UP_FRACTION = 0.95  # a point keeps up when replies reach 95 % of the offered rate
STEAL_LIMIT_PCT = 5.0
# Shards start at one scheduled time read from each host's clock: an offset of 1 % of the
# window leaves 99 % of it overlapping, within RATE_TOLERANCE's noise for added rates
CLOCK_OFFSET_FRACTION = 0.01
WAIT_LIMIT_PCT = 5.0
# Generators that poll by design: httperf's CPU reads 100 % at any rate (measured at 500
# req/s), so its CPU says nothing of saturation; the offered-load rule judges it instead
CPU_SAYS_NOTHING = frozenset({"httperf"})



def late_sends(late: int | None, scheduled: int | None, threshold_us: float | None,
               waited_pct: float | None = None) -> str | None:
    """waited_pct: the generator's run-queue wait, % of the window; named when it is the
    likely cause (another task ran on the generator's CPU)."""
    if not scheduled or late is None or late / scheduled <= LATE_LIMIT:
        return None
    threshold = f"{threshold_us:,.0f} us" if threshold_us else "the late threshold"
    share = 100 * late / scheduled
    waited = (f" (it waited for its CPU {waited_pct:.0f} % of the window)"
              if waited_pct is not None and waited_pct >= 1 else "")
    return (f"late sends: {late:,} of {scheduled:,} scheduled sends ({share:.1f} %) went out "
            f"more than {threshold} after their intended time; the generator fell behind"
            f"{waited}")


def idle_poll_pct(doc: dict[str, Any]) -> float | None:
    """% of the window a generator spent in polls that found nothing to do, by its own count
    (wb-sclient polls instead of sleeping before a due send): time its CPU reads as busy but
    that it could have given up. Summed over shards; None when the generator does not say."""
    spin_idle, window = (doc.get("generator_cpu") or {}).get("spin_idle_s"), doc.get("duration_s")
    return 100 * spin_idle / window if spin_idle is not None and window else None


def generator_saturated(cpu_pct: float | None, waiting_pct: float = 0.0,
                        idle_poll: float | None = None) -> str | None:
    """cpu_pct: the generator's CPU, % of the window; idle_poll: how much of it was polls
    that found nothing (idle_poll_pct), which is not work."""
    if cpu_pct is None:
        return None
    busy_pct = cpu_pct - (idle_poll or 0.0)
    if busy_pct + waiting_pct <= GENERATOR_SATURATED_PCT:
        return None
    waited = f" and waited for a CPU {waiting_pct:.0f} % of the time" if waiting_pct else ""
    polled = f" besides {idle_poll:.0f} % in idle polls" if idle_poll else ""
    return (f"generator CPU saturated in the measured window: it ran {busy_pct:.0f} %{polled}"
            f"{waited} (over {GENERATOR_SATURATED_PCT:.0f} %): it may have been the bottleneck")


def no_local_port(count: int | None) -> str | None:
    if not count:
        return None
    return (f"the generator ran out of local ports {count:,} times (EADDRNOTAVAIL on connect): "
            f"give it more source addresses (--source), a wider net.ipv4.ip_local_port_range, "
            f"or net.ipv4.tcp_tw_reuse=1")


def rate_shortfall(offered_rps: float | None, window_s: float | None, sent: int | None,
                   poisson: bool = False) -> str | None:
    if not offered_rps or not window_s or sent is None:
        return None
    asked = offered_rps * window_s
    noise = POISSON_SIGMAS / math.sqrt(asked) if poisson else 0.0
    if sent / asked >= 1 - RATE_TOLERANCE - noise:
        return None
    return (f"offered load not delivered: the generator sent {sent / window_s:,.0f} req/s of the "
            f"{offered_rps:,.0f} offered ({100 * (sent / asked - 1):+.1f} %, "
            f"tolerance {100 * RATE_TOLERANCE:.0f} %)")


def no_replies(hot_conns: int, replies: int | None) -> str | None:
    if not hot_conns or replies is None or replies > 0:
        return None
    return "no replies in the measured window: is the server up and answering at the target?"


def short_window(measured_s: float | None, asked_s: float) -> str | None:
    if measured_s is None or asked_s <= 0 or measured_s >= WINDOW_TOLERANCE * asked_s:
        return None
    return (f"measured window {measured_s:.2f} s of the {asked_s:g} s asked: the generator "
            f"stopped early")


def refused(count: int | None) -> str | None:
    if not count:
        return None
    return (f"{count:,} connections refused: the server was gone or not listening for part of "
            f"the window")


def server_exited(status: int | None, said: str = "") -> str:
    code = f" with status {status}" if status is not None else ""
    return f"the server exited during the point{code}{said}"


def cold_lost(held: int | None, asked: int) -> str | None:
    if held is None or held >= asked:
        return None
    return f"only {held:,} of {asked:,} cold connections were held to the end"


def judge_document(doc: dict[str, Any], spec: Any) -> list[str]:
    """The rules that a generator's result document alone decides; spec is the LoadSpec."""
    requests = doc.get("requests") or {}
    errors = doc.get("errors") or {}
    cpu = doc.get("generator_cpu") or {}
    window = doc.get("duration_s")
    shards = doc.get("shards") or 1  # each shard has a CPU of its own: judge one
    busy = waiting = idle = None
    # Only a generator that reads its run-queue wait (sclient, asyncio) says here whether it
    # was saturated; the runner's sampler judges the external tools from outside, all but
    # those whose CPU says nothing (CPU_SAYS_NOTHING).
    if window and cpu.get("run_delay_s") is not None:
        busy = 100 * (cpu["user_s"] + cpu["sys_s"]) / window / shards
        idle = (idle_poll_pct(doc) or 0.0) / shards
        waiting = 100 * cpu["run_delay_s"] / window / shards
    hot = spec.hot_conns if not spec.stream_conns else 0
    reasons = [
        late_sends(doc.get("late_sends"), requests.get("scheduled"),
                   doc.get("late_threshold_us"), waiting),
        generator_saturated(busy, waiting or 0.0, idle_poll=idle),
        no_local_port(errors.get("no_local_port")),
        # A generator that counts its schedule (sclient, asyncio) shows its own shortfall as
        # late sends; what it left unsent waited for a busy connection: the server's doing.
        rate_shortfall(doc.get("offered_rate_rps") if hot else None, window, requests.get("sent"),
                       poisson=spec.arrivals == "poisson")
        if requests.get("scheduled") is None else None,
        no_replies(hot, (doc.get("replies") or {}).get("total")),
        short_window(window, spec.duration_s) if spec.duration_s else None,
        refused(errors.get("refused")),
    ]
    return [r for r in reasons if r]


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


def stolen(server_cpu_pct: float | None, generator_cpu_pct: float | None) -> str | None:
    worst = max((v for v in (server_cpu_pct, generator_cpu_pct) if v is not None), default=None)
    if worst is None or worst <= STEAL_LIMIT_PCT:
        return None
    parts = [f"{who}'s CPU {value:.1f} %" for who, value in
             (("server", server_cpu_pct), ("generator", generator_cpu_pct)) if value is not None]
    return (f"{worst:.0f} % CPU steal during the window ({', '.join(parts)}): the hypervisor "
            f"ran someone else on these vCPUs")


def crowded(server_wait_pct: float | None, server_cpu: int | None,
            others_pct: float | None = None) -> str | None:
    """The server waited for its CPU more than WAIT_LIMIT_PCT of the window while other tasks
    ran there (others_pct: their busy time on its CPU, % of the window). A task waits only
    while something else runs, so the wait others can explain is at most their running time;
    the rest is the CPU's interrupt and softirq work (the network stack's, its host's own when
    receive is steered there) or a halted vCPU slow to wake, none of them a neighbour.
    Without others_pct, any long wait counts."""
    if server_wait_pct is None:
        return None
    explained = server_wait_pct if others_pct is None else min(server_wait_pct, others_pct)
    if explained <= WAIT_LIMIT_PCT:
        return None
    where = f" CPU {server_cpu}" if server_cpu is not None else " its CPU"
    ran = "" if others_pct is None else f" for {others_pct:.0f} % of it"
    return (f"the server waited for its CPU {server_wait_pct:.0f} % of the window: another task "
            f"ran on{where}{ran}")


def generator_crowded(late_reason: str, generator_wait_pct: float | None,
                      others_pct: float | None) -> str | None:
    """Late sends are interference, to be measured again, when the generator waited for its
    CPU while other tasks ran there (others_pct: their busy time on its CPU, % of the window)
    long enough to make them: more than LATE_LIMIT of the window, a stall that delays that
    share of sends past any threshold. Its own softirq work or a slow wake-up are not
    others' time: those late sends stay the generator's."""
    if generator_wait_pct is None or others_pct is None:
        return None
    explained = min(generator_wait_pct, others_pct)
    if explained <= 100 * LATE_LIMIT:
        return None
    return (f"{late_reason}: another task ran on the generator's CPU for {others_pct:.1f} % "
            f"of the window while it waited {generator_wait_pct:.1f} %")


def foreign_work(others_pct: float | None, server_cpu: int | None) -> str | None:
    """Per-packet cost is the measured CPU's whole busy time (or its cycle counters) over the
    packets: other tasks' work there over WAIT_LIMIT_PCT of the window inflates it, even when
    the server never waited for them."""
    if others_pct is None or others_pct <= WAIT_LIMIT_PCT:
        return None
    where = f"CPU {server_cpu}" if server_cpu is not None else "the server's CPU"
    return (f"another task ran on {where} for {others_pct:.0f} % of the window: the cycles per "
            f"packet count that CPU's whole busy time")


def clock_offset(host: str, offset_s: float, uncertainty_s: float, window_s: float) -> str | None:
    """offset_s: the host's clock less the run's host's; uncertainty_s: half the exchange's
    round trip, which the offset may be off by too."""
    worst = abs(offset_s) + uncertainty_s
    if worst <= CLOCK_OFFSET_FRACTION * window_s:
        return None
    return (f"the clock of {host} is {offset_s * 1e3:+.1f} ms (± {uncertainty_s * 1e3:.1f} ms) "
            f"off the run's host's, over {CLOCK_OFFSET_FRACTION:.0%} of the {window_s:g} s "
            f"window: synchronise the hosts' clocks (chrony) and resume")


def worker_lost(host: str, said: str = "") -> str:
    return f"worker {host} was lost during the point{said}"


EMULATED_CPU = "emulated CPU: timings not comparable"


def emulated_cpu(emulated: bool) -> str | None:
    return EMULATED_CPU if emulated else None


def closed_loop_elsewhere(offered_rps: float | None, hot_conns: int | None,
                          saturated: bool | None, server_cpu_pct: float | None,
                          generator_wait_pct: float | None = None,
                          server_bound: bool = True) -> str | None:
    """generator_wait_pct: the generators' run-queue wait, % of the window; named when it is
    the likely cause (another task took the generator's CPU, so it sent less).
    server_bound=False (scenario hot.server_bound): the round trips may set the rate by
    design, but a generator kept from its CPU still may not."""
    if offered_rps or not hot_conns or saturated is not False or server_cpu_pct is None:
        return None
    crowded = generator_wait_pct is not None and generator_wait_pct > WAIT_LIMIT_PCT
    if not server_bound:
        return (f"closed loop whose server was not the bottleneck, and the generator waited "
                f"for its CPU {generator_wait_pct:.1f} % of the window: it, not the round "
                f"trips, may have set the rate") if crowded else None
    waited = (f" (the generator waited for its CPU {generator_wait_pct:.0f} % of the window)"
              if crowded else "")
    # one decimal: 89.6 % rounded to "90 %" read as if it met the 90 % it missed
    return (f"closed loop, but the server was not the bottleneck (server CPU "
            f"{server_cpu_pct:.1f} %, under the {SERVER_BUSY_PCT:.0f} % of a bottleneck): the "
            f"reply rate measures the generator, the link or the round trips, not the server's "
            f"capacity{waited}")
