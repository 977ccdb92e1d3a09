/* Cold connections' ramp: the queue of those waiting to open, paced at --cold-ramp. */
#include "ramp.h"

#include <stdlib.h>

int ramp_init(struct ramp *ramp, size_t cap, double rate_share, int max_connecting, int64_t start) {
    *ramp = (struct ramp){.cap = cap, .rate_share = rate_share, .max_connecting = max_connecting,
                          .start = start};
    ramp->queue = calloc(cap + 1, sizeof *ramp->queue);
    return ramp->queue ? 0 : -1;
}

void ramp_enqueue(struct ramp *ramp, uint32_t conn) {
    ramp->queue[(ramp->head + ramp->len++) % ramp->cap] = conn;
}

int ramp_take(struct ramp *ramp, int64_t now, uint32_t *conn) {
    if (!ramp->len || ramp->connecting >= ramp->max_connecting) return 0;
    if (ramp->rate_share > 0 &&
        (double)ramp->attempts >= ramp->rate_share * (double)(now - ramp->start) / 1e9)
        return 0;
    *conn = ramp->queue[ramp->head];
    ramp->head = (ramp->head + 1) % ramp->cap;
    ramp->len--;
    ramp->attempts++;
    return 1;
}

int64_t ramp_next(const struct ramp *ramp, int64_t now) {
    if (!ramp->len || ramp->connecting >= ramp->max_connecting) return INT64_MAX;
    if (ramp->rate_share <= 0) return now;
    return ramp->start + (int64_t)((double)(ramp->attempts + 1) / ramp->rate_share * 1e9);
}
