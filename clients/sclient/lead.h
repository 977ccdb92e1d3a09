/* Adaptive wake-up lead: how long before a scheduled send to stop sleeping and poll. */
#ifndef WB_LEAD_H
#define WB_LEAD_H

#include <stdint.h>

#include "sclient.h"

#define WAKE_BUCKET_NS 4096 /* wake-up lateness kept in 4 us buckets up to LEAD_MAX_NS */
#define WAKE_BUCKETS ((int)(LEAD_MAX_NS / WAKE_BUCKET_NS) + 1)

/* Without --spin-us the loop sleeps until the next scheduled send minus the lead, then polls.
 * The lead covers the recent LEAD_QUANTILE of how late sleeps return (slow vCPU wake-ups),
 * plus the loop's own work before the send; while another task wants the CPU there is none. */
struct lead {
    int fixed;       /* --spin-us: poll spin_ns before every deadline, nothing measured */
    int64_t spin_ns;
    int64_t ns;      /* the lead before the next scheduled send */
    int64_t decay_at; /* when the wake-up counts next halve */
    int64_t check_at, calm_at; /* next run-queue look; no lead before calm_at */
    uint64_t wait_at_check, wait_seen; /* run-queue wait at the last check, at the last look */
    int sched_fd; /* /proc/self/schedstat, read often (see sched_wait) */
    uint32_t wake_total, wake_counts[WAKE_BUCKETS];
};

/* Time this task spent runnable but waiting for a CPU (ns): CPU contention shows here. */
uint64_t run_delay_ns(void);

/* In every call, `counted` is the result to count in, NULL outside the measured window. */
void lead_init(struct lead *lead, const struct opts *opts, int64_t start);
int lead_contended(const struct lead *lead, int64_t now);
/* A sleep returned late_ns after the time it asked for. */
void lead_wake_observed(struct lead *lead, int64_t now, int64_t late_ns, struct result *counted);
/* Halves the wake-up counts once a second. */
void lead_decay(struct lead *lead, int64_t now);
/* Looks at the run-queue wait once a period. */
void lead_contention_check(struct lead *lead, int64_t now, struct result *counted);
/* A poll that asked for no wait, started at polled_at, has just returned. */
void lead_poll_returned(struct lead *lead, int64_t now, int64_t polled_at, struct result *counted);
/* When to stop sleeping for a deadline `due`; next_send_at: the next scheduled send, INT64_MAX
 * for none. */
int64_t lead_wake_time(const struct lead *lead, int64_t now, int64_t due, int64_t next_send_at);
/* A sleep is about to end the lead early for a send. */
void lead_count_sleep(const struct lead *lead, struct result *counted);

#endif
