/* Open-loop arrivals: when this shard's next hot request is due, fixed or Poisson. */
#ifndef WB_SCHEDULE_H
#define WB_SCHEDULE_H

#include <stdint.h>

struct schedule {
    double rate_share; /* requests per second: this shard's share of the offered total */
    int poisson;
    int64_t start;
    double seq_s; /* the next send, in s from start */
    int64_t next; /* the next send, CLOCK_MONOTONIC ns */
};

/* Shards interleave one fixed schedule of total_rate instead of sending in lockstep. */
void schedule_init(struct schedule *schedule, double rate_share, double total_rate,
                   int shard_index, int poisson, int64_t start);
/* The send at schedule->next was taken: the one after it. */
void schedule_advance(struct schedule *schedule, uint64_t *rng);

#endif
