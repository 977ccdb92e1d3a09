/* Adaptive wake-up lead: wake-up lateness, run-queue contention, and the lead they give. */
#include "lead.h"
#include "os.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define LEAD_INIT_NS 100000LL /* until enough wake-ups are measured */
#define LEAD_MARGIN_NS 10000LL
#define WAKE_MIN_SAMPLES 32
#define WAKE_DECAY_NS 1000000000LL /* counts halve every second: recent wake-ups decide */
/* Polling only pays while this CPU is otherwise idle: with another task runnable here it takes
 * that task's time, the scheduler then treats the generator as CPU-bound and preempts it, and
 * its sends go out later than after a plain sleep. So no lead for a while after the generator
 * waited for its CPU more than CONTENDED_SHARE of a CONTENTION_CHECK_NS period, or a poll was
 * held up PREEMPTED_NS by another task (not by the hypervisor: that is no run-queue wait). */
#define CONTENTION_CHECK_NS 100000000LL
#define CONTENDED_SHARE 0.05
#define CONTENDED_BACKOFF_NS 1000000000LL
#define PREEMPTED_NS 200000LL
/* A sleep this much late is checked against the run-queue wait: if another task held the CPU,
 * polling longer would not have helped, so it does not raise the lead. */
#define WAKE_CHECK_NS 100000LL

uint64_t run_delay_ns(void) {
    return proc_self_second("/proc/self/schedstat"); /* on the CPU, then waiting for it */
}

/* The same as run_delay_ns, cheaply enough for the loop: one pread on a descriptor kept open
 * (opened by each shard itself, so a forked shard reads its own). */
static uint64_t sched_wait(const struct lead *lead) {
    char buf[128];
    unsigned long long run = 0, wait = 0;
    ssize_t n = lead->sched_fd >= 0 ? pread(lead->sched_fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0) return run_delay_ns();
    buf[n] = 0;
    if (sscanf(buf, "%llu %llu", &run, &wait) != 2) return 0;
    return wait;
}

void lead_init(struct lead *lead, const struct opts *opts, int64_t start) {
    memset(lead, 0, sizeof *lead);
    lead->fixed = opts->spin_fixed;
    lead->spin_ns = (int64_t)opts->spin_us * 1000;
    lead->ns = lead->fixed ? lead->spin_ns : LEAD_INIT_NS;
    lead->decay_at = start + WAKE_DECAY_NS;
    lead->check_at = start + CONTENTION_CHECK_NS;
    lead->sched_fd = open("/proc/self/schedstat", O_RDONLY | O_CLOEXEC);
    lead->wait_at_check = lead->wait_seen = sched_wait(lead);
}

int lead_contended(const struct lead *lead, int64_t now) { return now < lead->calm_at; }

/* The smallest bucket bound with at most 1 - LEAD_QUANTILE of the recent wake-ups above it. */
static void lead_update(struct lead *lead) {
    if (lead->wake_total < WAKE_MIN_SAMPLES) return;
    uint32_t seen = 0;
    uint32_t keep = lead->wake_total - (uint32_t)((double)lead->wake_total * (1 - LEAD_QUANTILE));
    int bucket = 0;
    while (bucket < WAKE_BUCKETS - 1 && (seen += lead->wake_counts[bucket]) < keep) bucket++;
    int64_t ns = (int64_t)(bucket + 1) * WAKE_BUCKET_NS + LEAD_MARGIN_NS;
    lead->ns = ns < LEAD_MAX_NS ? ns : LEAD_MAX_NS;
}

/* What waking this CPU costs now. */
void lead_wake_observed(struct lead *lead, int64_t now, int64_t late_ns, struct result *counted) {
    if (late_ns < 0) late_ns = 0;
    if (counted) hist_record(&counted->wake_late, (uint64_t)late_ns);
    if (lead->fixed || lead_contended(lead, now)) return; /* then it is mostly run-queue wait */
    if (late_ns > WAKE_CHECK_NS) {
        uint64_t wait = sched_wait(lead);
        int queued = (double)(wait - lead->wait_seen) >= (double)late_ns / 2;
        lead->wait_seen = wait;
        if (queued) return;
    }
    int64_t bucket = late_ns / WAKE_BUCKET_NS;
    lead->wake_counts[bucket < WAKE_BUCKETS ? bucket : WAKE_BUCKETS - 1]++;
    lead->wake_total++;
    lead_update(lead);
}

/* Old wake-ups fade; a loop that no longer sleeps (its lead covers every gap) forgets them
 * and falls back to LEAD_INIT_NS, so it measures again instead of polling for ever. */
void lead_decay(struct lead *lead, int64_t now) {
    if (now < lead->decay_at) return;
    lead->decay_at = now + WAKE_DECAY_NS;
    lead->wake_total = 0;
    for (int bucket = 0; bucket < WAKE_BUCKETS; bucket++)
        lead->wake_total += lead->wake_counts[bucket] /= 2;
    if (lead->wake_total < WAKE_MIN_SAMPLES && lead->ns > LEAD_INIT_NS) lead->ns = LEAD_INIT_NS;
    else lead_update(lead);
}

/* Another task wanted this CPU lately (see CONTENDED_SHARE): sleep instead of polling.
 * held_ns: a poll just took this long, so look now. */
static void contention_check(struct lead *lead, int64_t now, int64_t held_ns, struct result *counted) {
    if (lead->fixed || (!held_ns && now < lead->check_at)) return;
    uint64_t wait = sched_wait(lead);
    int64_t span = now - lead->check_at + CONTENTION_CHECK_NS;
    double waited = (double)(wait - lead->wait_at_check);
    if (lead_contended(lead, now) && counted) counted->contended_s += (double)span / 1e9;
    if (waited > CONTENDED_SHARE * (double)span || (held_ns && waited >= (double)held_ns / 2))
        lead->calm_at = now + CONTENDED_BACKOFF_NS;
    lead->wait_at_check = lead->wait_seen = wait;
    lead->check_at = now + CONTENTION_CHECK_NS;
}

void lead_contention_check(struct lead *lead, int64_t now, struct result *counted) {
    contention_check(lead, now, 0, counted);
}

void lead_poll_returned(struct lead *lead, int64_t now, int64_t polled_at, struct result *counted) {
    if (now - polled_at > PREEMPTED_NS) contention_check(lead, now, now - polled_at, counted);
}

/* Fixed --spin-us before any deadline, or the adaptive lead before the next scheduled send
 * (other deadlines, timeouts and the like, need no polling). */
int64_t lead_wake_time(const struct lead *lead, int64_t now, int64_t due, int64_t next_send_at) {
    if (lead->fixed) return due - lead->spin_ns;
    if (next_send_at != INT64_MAX && !lead_contended(lead, now) && next_send_at - lead->ns < due)
        return next_send_at - lead->ns;
    return due;
}

void lead_count_sleep(const struct lead *lead, struct result *counted) {
    if (!counted) return;
    counted->lead_sum_ns += (double)lead->ns;
    counted->lead_sleeps++;
    if ((uint64_t)lead->ns > counted->lead_max_ns) counted->lead_max_ns = (uint64_t)lead->ns;
}
