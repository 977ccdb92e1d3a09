/* Stream connections: opened in turn, then fed their share of --stream-mbps round-robin. */
#include "pacing.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define STREAM_BURST_NS 50000000LL

int pacing_init(struct pacing *pacing, int cap, double mbps_share, int64_t start) {
    memset(pacing, 0, sizeof *pacing);
    pacing->mbps_share = mbps_share;
    pacing->last = start;
    memset(pacing->chunk, 'x', sizeof pacing->chunk);
    pacing->streams = calloc((size_t)cap + 1, sizeof *pacing->streams);
    return pacing->streams ? 0 : -1;
}

void pacing_add(struct pacing *pacing, struct conn *conn) { pacing->streams[pacing->count++] = conn; }

struct conn *pacing_to_open(struct pacing *pacing, int max_connecting) {
    if (pacing->opened < pacing->count && pacing->connecting < max_connecting)
        return pacing->streams[pacing->opened++];
    return NULL;
}

void pacing_run(struct pacing *pacing, int64_t now, uint64_t *counted_bytes,
                pacing_failed *failed, void *owner) {
    if (!pacing->count) return;
    double mbps = pacing->mbps_share;
    pacing->budget += mbps * 1e6 / 8 * (double)(now - pacing->last) / 1e9;
    pacing->last = now;
    /* bucket depth: a stall of up to STREAM_BURST_NS is made up for afterwards */
    double cap = (double)STREAM_CHUNK * 4 * pacing->count + mbps * 1e6 / 8 * STREAM_BURST_NS / 1e9;
    if (mbps <= 0 || pacing->budget > cap) pacing->budget = mbps <= 0 ? 1e18 : cap;
    /* one chunk per connection per round, so the bandwidth is shared evenly */
    for (int progress = 1, rounds = 0; progress && rounds < 64 && pacing->budget >= STREAM_CHUNK;
         rounds++) {
        progress = 0;
        for (int i = 0; i < pacing->count && pacing->budget >= STREAM_CHUNK; i++) {
            struct conn *conn = pacing->streams[(pacing->next + i) % pacing->count];
            if (conn->state != OPEN || conn->blocked) continue;
            ssize_t written = send(conn->fd, pacing->chunk, STREAM_CHUNK, MSG_NOSIGNAL);
            if (written < 0) {
                if (errno == EAGAIN) conn->blocked = 1;
                else failed(owner, conn, errno == ECONNRESET || errno == EPIPE ? E_RESET : E_OTHER);
                continue;
            }
            if (counted_bytes) *counted_bytes += (uint64_t)written;
            pacing->budget -= (double)written;
            progress = 1;
        }
        pacing->next = (pacing->next + 1) % pacing->count;
    }
}
