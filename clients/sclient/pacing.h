/* Stream connections: opened in turn, then fed their share of --stream-mbps round-robin. */
#ifndef WB_PACING_H
#define WB_PACING_H

#include <stdint.h>

#include "conn.h"

#define STREAM_CHUNK 1460
#define STREAM_TICK_NS 200000LL

struct pacing {
    struct conn **streams;
    int count;
    /* streams open in turn, at most --max-connecting at once: all at once, their SYNs
     * overflow the listen queue and the retries back off for seconds */
    int opened, connecting; /* connecting: kept by the loop */
    int next; /* where the next round starts */
    double mbps_share; /* this shard's share of --stream-mbps; 0: unpaced */
    double budget;     /* bytes that may be written now */
    int64_t last;      /* when the budget was last topped up */
    char chunk[STREAM_CHUNK];
};

/* Room for cap streams; -1 when it cannot be allocated. */
int pacing_init(struct pacing *pacing, int cap, double mbps_share, int64_t start);
void pacing_add(struct pacing *pacing, struct conn *conn);
/* The next stream to open while fewer than max_connecting connect (its opener counts it in
 * `connecting`), or NULL. */
struct conn *pacing_to_open(struct pacing *pacing, int max_connecting);
/* What closes a stream whose write failed: its owner's (the shard's loop). */
typedef void pacing_failed(void *owner, struct conn *conn, enum err err);
/* Writes what the budget allows; counted_bytes: NULL outside the measured window. */
void pacing_run(struct pacing *pacing, int64_t now, uint64_t *counted_bytes,
                pacing_failed *failed, void *owner);
/* When pacing_run should look again (INT64_MAX: no streams). */
static inline int64_t pacing_next(const struct pacing *pacing) {
    return pacing->count ? pacing->last + STREAM_TICK_NS : INT64_MAX;
}

#endif
