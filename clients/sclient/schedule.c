/* Open-loop arrivals: when this shard's next hot request is due, fixed or Poisson. */
#include "schedule.h"

#include <math.h>

#include "rng.h"

void schedule_init(struct schedule *schedule, double rate_share, double total_rate,
                   int shard_index, int poisson, int64_t start) {
    schedule->rate_share = rate_share;
    schedule->poisson = poisson;
    schedule->start = start;
    schedule->seq_s = poisson ? 0 : (double)shard_index / total_rate;
    schedule->next = start + (int64_t)(schedule->seq_s * 1e9);
}

void schedule_advance(struct schedule *schedule, uint64_t *rng) {
    double gap = schedule->poisson ? -log(rng_uniform(rng)) / schedule->rate_share
                                   : 1.0 / schedule->rate_share;
    schedule->seq_s += gap;
    schedule->next = schedule->start + (int64_t)(schedule->seq_s * 1e9);
}
