/* A paced stream load: a token bucket of Mbit/s shared round-robin over streams, one
 * STREAM_CHUNK write each per round, so the bandwidth is shared evenly. Its owner keeps the
 * streams and writes to them when asked: wb-sclient's stream connections, and wb-server's
 * with --source. */
#ifndef WB_PACING_H
#define WB_PACING_H

#include <stdint.h>
#include <sys/types.h>

#define STREAM_CHUNK 1460 /* one MSS of payload: one segment a write */
#define STREAM_TICK_NS 200000LL

struct pacing {
    double mbps;   /* 0: unpaced */
    double budget; /* bytes that may be written now */
    int64_t last;  /* when the budget was last topped up */
    int next;      /* where the next round starts */
    char chunk[STREAM_CHUNK]; /* what each write sends */
};

void pacing_init(struct pacing *pacing, double mbps, int64_t start);
/* Writes one STREAM_CHUNK to stream `index` of the owner's: the bytes written, 0 when the
 * stream cannot take any now (not open, or its socket full). */
typedef size_t pacing_write(void *owner, int index);
/* Writes to the owner's `count` streams what the budget allows at `now`. */
void pacing_run(struct pacing *pacing, int64_t now, int count, pacing_write *write, void *owner);
/* When pacing_run should look again (INT64_MAX: no streams). */
static inline int64_t pacing_next(const struct pacing *pacing, int count) {
    return count ? pacing->last + STREAM_TICK_NS : INT64_MAX;
}

#endif
