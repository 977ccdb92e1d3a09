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

/* The workers' counters live in one shared mapping. With a path it is a file that a reader
 * maps to read them at an instant of its own choosing: a snapshot (SIGUSR1) is taken when the
 * event loop gets to it, late by the dispatch call in progress (tens of ms when saturated).
 * The file: a COUNTERS_PAGE-byte header page, then `workers` struct stats slots. Counters are
 * aligned uint64 written by one worker each, so a reader sees each one whole. */
#define COUNTERS_MAGIC "wbcount1"
#define COUNTERS_PAGE 4096
struct counters_header {
    char magic[8];
    uint32_t fields;       /* uint64 counters at the start of each slot, named in `names` */
    uint32_t workers;
    uint32_t slot_bytes;   /* sizeof(struct stats) */
    uint32_t slots_offset; /* COUNTERS_PAGE */
    uint32_t pid_offset;   /* of the worker's pid (int32) within a slot */
    char names[];          /* the fields' names, each NUL-terminated, in slot order */
};

/* `workers` zeroed slots shared with forked workers: in the file at `path` (created or
 * truncated, see above) or anonymous when path is NULL. NULL on failure (errno set). */
struct stats *stats_map(const char *path, int workers);

/* Writes the snapshot of `n` workers' counters to `path` atomically (tmp file + rename).
 * One worker: its counters at the top level. Several: merged totals plus "per_worker". */
int stats_write(const char *path, const struct stats_info *info,
                const struct stats *workers, int n);

#endif
