/* stats.h: the server's counters and their JSON snapshot (schema 1). */
#ifndef WB_STATS_H
#define WB_STATS_H

#include <stdint.h>
#include <sys/types.h>

/* One list drives the struct, the JSON writer and the merge of workers' counters. */
#define STATS_FIELDS(X)                                                              \
    X(connections_accepted) X(connections_closed) X(connections_current)            \
    X(connections_max) X(requests) X(replies) X(bytes_in) X(bytes_out)              \
    X(dispatch_calls) X(dispatch_events) X(ctl_calls) X(signals_dequeued)           \
    X(sigio_overflows) X(fallback_rescans) X(accept_calls) X(accept_eagain)         \
    X(replies_400) X(replies_431) X(replies_501) X(emfile_events)

struct stats {
#define STATS_DECLARE(name) uint64_t name;
    STATS_FIELDS(STATS_DECLARE)
#undef STATS_DECLARE
    pid_t pid;
};

/* What every snapshot says about the server besides its counters. */
struct stats_info {
    const char *backend;
    const char *accept;
    long reply_bytes;
    double started; /* CLOCK_MONOTONIC seconds */
};

double monotonic_seconds(void);

/* Writes the snapshot of `n` workers' counters to `path` atomically (tmp file + rename).
 * One worker: its counters at the top level. Several: merged totals plus "per_worker". */
int stats_write(const char *path, const struct stats_info *info,
                const struct stats *workers, int n);

#endif
