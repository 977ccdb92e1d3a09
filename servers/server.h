/* server.h: the event loop: accept, then serve HTTP on every connection, with whichever
 * dispatch backend was chosen. */
#ifndef WB_SERVER_H
#define WB_SERVER_H

#include <signal.h>

#include "dispatch.h"
#include "stats.h"

struct server_config {
    const struct dispatch_ops *ops;
    int accept_limit; /* accepts per listener readiness; 0 = until EAGAIN */
    long reply_bytes;
    int sink;         /* read and discard, never reply */
    double source_mbps; /* > 0: send a paced stream of this many Mbit/s shared evenly over the
                           connections, in one-segment writes; read and discard, never reply */
    const struct stats *workers; /* every worker's counters, this one's among them */
    int nworkers;
    long min_wait_us; /* while events keep coming, sleep this long before each wait; 0: off */
};

/* Flags set by signal handlers, checked once per loop iteration. */
extern volatile sig_atomic_t server_stop, server_snapshot;

/* Async-signal-safe: makes the loop's wait return, so that it sees the flags. A handler
 * that sets a flag calls it. */
void server_wake(void);

/* Serves listen_fd until server_stop; calls on_snapshot() when server_snapshot is set.
 * Counters go to *stats. Returns 0, or -1 with a message on stderr. */
int server_run(const struct server_config *cfg, int listen_fd, struct stats *stats,
               void (*on_snapshot)(void));

#endif
