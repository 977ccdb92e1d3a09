/* Log-linear latency histogram: record, merge, quantiles, JSON. */
#include "hist.h"

#include <string.h>

#define SUB (1u << HIST_SUB_BITS)

void hist_init(struct hist *h) {
    memset(h, 0, sizeof *h);
    h->min_ns = UINT64_MAX;
}

static unsigned bucket_of(uint64_t ns) {
    uint64_t m = ns >> HIST_UNIT_SHIFT;
    if (m < 2 * SUB) return (unsigned)m;
    unsigned e = (unsigned)(63 - __builtin_clzll(m)) - HIST_SUB_BITS; /* >= 1 */
    if (e > HIST_MAX_EXP) return HIST_NBUCKETS - 1;
    return 2 * SUB + (e - 1) * SUB + (unsigned)((m >> e) - SUB);
}

/* Bucket bounds in ns: [lo, hi). */
static void bucket_bounds(unsigned i, uint64_t *lo, uint64_t *hi) {
    if (i < 2 * SUB) {
        *lo = (uint64_t)i << HIST_UNIT_SHIFT;
        *hi = (uint64_t)(i + 1) << HIST_UNIT_SHIFT;
        return;
    }
    unsigned e = (i - 2 * SUB) / SUB + 1, sub = (i - 2 * SUB) % SUB + SUB;
    *lo = ((uint64_t)sub << e) << HIST_UNIT_SHIFT;
    *hi = ((uint64_t)(sub + 1) << e) << HIST_UNIT_SHIFT;
}

void hist_record(struct hist *h, uint64_t ns) {
    h->counts[bucket_of(ns)]++;
    h->count++;
    h->sum_ns += (double)ns;
    if (ns < h->min_ns) h->min_ns = ns;
    if (ns > h->max_ns) h->max_ns = ns;
}

void hist_merge(struct hist *into, const struct hist *from) {
    for (unsigned i = 0; i < HIST_NBUCKETS; i++) into->counts[i] += from->counts[i];
    into->count += from->count;
    into->sum_ns += from->sum_ns;
    if (from->min_ns < into->min_ns) into->min_ns = from->min_ns;
    if (from->max_ns > into->max_ns) into->max_ns = from->max_ns;
}

double hist_quantile_ns(const struct hist *h, double q) {
    if (!h->count) return 0;
    uint64_t rank = (uint64_t)(q * (double)h->count + 0.5), seen = 0;
    if (rank < 1) rank = 1;
    for (unsigned i = 0; i < HIST_NBUCKETS; i++) {
        seen += h->counts[i];
        if (seen >= rank) {
            uint64_t lo, hi;
            bucket_bounds(i, &lo, &hi);
            double mid = (double)(lo + hi) / 2;
            /* never report outside what was actually recorded */
            if (mid < (double)h->min_ns) mid = (double)h->min_ns;
            if (mid > (double)h->max_ns) mid = (double)h->max_ns;
            return mid;
        }
    }
    return (double)h->max_ns;
}

void hist_write_json(FILE *f, const struct hist *h) {
    fprintf(f, "{\"unit\": \"us\", \"buckets\": [");
    const char *sep = "";
    for (unsigned i = 0; i < HIST_NBUCKETS; i++) {
        if (!h->counts[i]) continue;
        uint64_t lo, hi;
        bucket_bounds(i, &lo, &hi);
        fprintf(f, "%s[%.3f, %.3f, %llu]", sep, lo / 1e3, hi / 1e3,
                (unsigned long long)h->counts[i]);
        sep = ", ";
    }
    fprintf(f, "], \"count\": %llu", (unsigned long long)h->count);
    if (!h->count) {
        fprintf(f, ", \"min_us\": null, \"max_us\": null, \"mean_us\": null, \"p50_us\": null, "
                   "\"p90_us\": null, \"p99_us\": null, \"p999_us\": null}");
        return;
    }
    fprintf(f, ", \"min_us\": %.3f, \"max_us\": %.3f, \"mean_us\": %.3f", h->min_ns / 1e3,
            h->max_ns / 1e3, h->sum_ns / (double)h->count / 1e3);
    static const struct { const char *name; double q; } qs[] = {
        {"p50_us", 0.5}, {"p90_us", 0.9}, {"p99_us", 0.99}, {"p999_us", 0.999}};
    for (unsigned i = 0; i < sizeof qs / sizeof qs[0]; i++)
        fprintf(f, ", \"%s\": %.3f", qs[i].name, hist_quantile_ns(h, qs[i].q) / 1e3);
    fprintf(f, "}");
}
