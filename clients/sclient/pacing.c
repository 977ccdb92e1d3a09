/* A paced stream load: a token bucket shared round-robin over the owner's streams. */
#include "pacing.h"

#include <string.h>

#define STREAM_BURST_NS 50000000LL

void pacing_init(struct pacing *pacing, double mbps, int64_t start) {
    *pacing = (struct pacing){.mbps = mbps, .last = start};
    memset(pacing->chunk, 'x', sizeof pacing->chunk);
}

void pacing_run(struct pacing *pacing, int64_t now, int count, pacing_write *write, void *owner) {
    if (!count) return;
    double mbps = pacing->mbps;
    pacing->budget += mbps * 1e6 / 8 * (double)(now - pacing->last) / 1e9;
    pacing->last = now;
    /* bucket depth: a stall of up to STREAM_BURST_NS is made up for afterwards */
    double cap = (double)STREAM_CHUNK * 4 * count + mbps * 1e6 / 8 * STREAM_BURST_NS / 1e9;
    if (mbps <= 0 || pacing->budget > cap) pacing->budget = mbps <= 0 ? 1e18 : cap;
    for (int progress = 1, rounds = 0; progress && rounds < 64 && pacing->budget >= STREAM_CHUNK;
         rounds++) {
        progress = 0;
        for (int i = 0; i < count && pacing->budget >= STREAM_CHUNK; i++) {
            size_t written = write(owner, (pacing->next + i) % count);
            pacing->budget -= (double)written;
            progress |= written > 0;
        }
        pacing->next = (pacing->next + 1) % count;
    }
}
