/* Log-linear latency histogram (HdrHistogram layout): 64 ns resolution at the low end,
 * 128 linear sub-buckets per power of two above it (< 0.8 % relative error). */
#ifndef WB_HIST_H
#define WB_HIST_H

#include <stdint.h>
#include <stdio.h>

#define HIST_UNIT_SHIFT 6  /* lowest bucket width: 2^6 ns = 64 ns */
#define HIST_SUB_BITS 7    /* 128 sub-buckets per octave */
#define HIST_MAX_EXP 30    /* octaves above the linear range: up to ~2^44 ns (4.9 h) */
#define HIST_NBUCKETS ((2 << HIST_SUB_BITS) + HIST_MAX_EXP * (1 << HIST_SUB_BITS))

struct hist {
    uint64_t count, min_ns, max_ns;
    double sum_ns;
    uint64_t counts[HIST_NBUCKETS];
};

void hist_init(struct hist *h);
void hist_record(struct hist *h, uint64_t ns);
void hist_merge(struct hist *into, const struct hist *from);
/* Value (ns) below which the fraction q of the recorded values lie; bucket midpoint. */
double hist_quantile_ns(const struct hist *h, double q);
/* Writes {unit, buckets, count, min_us, ...} as one JSON object. */
void hist_write_json(FILE *f, const struct hist *h);

#endif
