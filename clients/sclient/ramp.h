/* Cold connections' ramp: the queue of those waiting to open, paced at --cold-ramp. */
#ifndef WB_RAMP_H
#define WB_RAMP_H

#include <stddef.h>
#include <stdint.h>

struct ramp {
    uint32_t *queue; /* connection indices, a ring of cap */
    size_t head, len, cap;
    uint64_t attempts;
    double rate_share; /* attempts per second: this shard's share of --cold-ramp; 0: unpaced */
    int64_t start;
    int max_connecting;
    int connecting; /* cold connects in flight (kept by the loop) */
};

/* Room for cap connections; -1 when it cannot be allocated. */
int ramp_init(struct ramp *ramp, size_t cap, double rate_share, int max_connecting, int64_t start);
void ramp_enqueue(struct ramp *ramp, uint32_t conn);
/* 1 with *conn set when the next waiting connection's turn has come (an attempt), else 0. */
int ramp_take(struct ramp *ramp, int64_t now, uint32_t *conn);
/* When ramp_take next gives a connection: now, later, or INT64_MAX (none waits, or too many
 * connect already). */
int64_t ramp_next(const struct ramp *ramp, int64_t now);

#endif
