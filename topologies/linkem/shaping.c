/* wb-linkem's shaping core: seeded loss, the queue limit, the rate and delay + jitter applied
 * to each packet a back end received, the release heap, and the counters. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "linkem.h"

#define RESOLUTION_NS 1000000 /* promised: no release later than this by the emulator's own doing */

void die(const char *what) {
    fprintf(stderr, "wb-linkem: %s: %s\n", what, strerror(errno));
    exit(1);
}

void fail(const char *message) {
    fprintf(stderr, "wb-linkem: %s\n", message);
    exit(1);
}

int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* splitmix64: small, seedable, good enough for loss and jitter draws. */
static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double unit(uint64_t *s) { return (next_u64(s) >> 11) * 0x1.0p-53; }

static int64_t jitter_draw(struct direction *d) {
    double j = (double)d->shape.jitter_ns;
    if (j == 0) return 0;
    switch (d->shape.dist) {
    case DIST_NORMAL: { /* Box-Muller; sigma = jitter, as netem's normal table */
        double u1 = unit(&d->rng), u2 = unit(&d->rng);
        if (u1 < 1e-300) u1 = 1e-300;
        return (int64_t)(j * sqrt(-2 * log(u1)) * cos(2 * M_PI * u2));
    }
    default: /* uniform on [-jitter, +jitter], netem's default */
        return (int64_t)(j * (2 * unit(&d->rng) - 1));
    }
}

/* ---- release heap, keyed on (release_ns, seq) ---- */
static int before(const struct packet *a, const struct packet *b) {
    return a->release_ns < b->release_ns || (a->release_ns == b->release_ns && a->seq < b->seq);
}

static void heap_push(struct direction *d, struct packet p) {
    if (d->held == d->heap_cap) {
        d->heap_cap = d->heap_cap ? d->heap_cap * 2 : 1024;
        d->heap = realloc(d->heap, d->heap_cap * sizeof *d->heap);
        if (!d->heap) die("realloc");
    }
    size_t i = d->held++;
    while (i > 0 && before(&p, &d->heap[(i - 1) / 2])) {
        d->heap[i] = d->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    d->heap[i] = p;
}

static struct packet heap_pop(struct direction *d) {
    struct packet top = d->heap[0], last = d->heap[--d->held];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, m = l;
        if (l >= d->held) break;
        if (l + 1 < d->held && before(&d->heap[l + 1], &d->heap[l])) m = l + 1;
        if (!before(&d->heap[m], &last)) break;
        d->heap[i] = d->heap[m];
        i = m;
    }
    if (d->held) d->heap[i] = last;
    return top;
}

/* ---- buffers: slots and GSO tails ---- */
unsigned char *buf_get(struct pool *p) {
    if (p->count) return p->free[--p->count];
    unsigned char *b = malloc(p->bytes);
    if (!b) die("malloc");
    return b;
}

void buf_put(struct pool *p, unsigned char *b) {
    if (!b) return;
    if (p->count == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 1024;
        p->free = realloc(p->free, p->cap * sizeof *p->free);
        if (!p->free) die("realloc");
    }
    p->free[p->count++] = b;
}

static void pool_free(struct pool *p) {
    for (size_t i = 0; i < p->count; i++) free(p->free[i]);
    free(p->free);
}

static void packet_free(struct direction *d, struct packet *p) {
    buf_put(&d->slots, p->data);
    buf_put(&d->tails, p->tail);
}

/* Loss, queue limit, then rate and delay: the order netem applies them in. A lossy
 * direction receives no GSO segments (the back ends see to it), so its one draw per packet
 * is per wire packet. p.release_ns is the time it was read. */
void admit(struct direction *d, struct packet p) {
    int64_t now = p.release_ns;
    d->c.reads++;
    d->c.received += p.wire_packets;
    if (p.wire_packets > 1) {
        d->c.gso_reads++;
        d->c.gso_packets += p.wire_packets;
    }
    if (d->shape.loss > 0 && unit(&d->rng) < d->shape.loss) {
        d->c.dropped_loss += p.wire_packets;
        packet_free(d, &p);
        return;
    }
    if (d->held_packets + p.wire_packets > d->shape.limit) {
        d->c.dropped_queue += p.wire_packets;
        packet_free(d, &p);
        return;
    }
    int64_t sent = now;
    if (d->shape.rate_bps > 0) { /* a segment's packets leave back to back */
        int64_t start = d->link_free_ns > now ? d->link_free_ns : now;
        sent = start + (int64_t)(p.wire_bytes * 8.0 * 1e9 / d->shape.rate_bps);
        d->link_free_ns = sent;
    }
    p.release_ns = sent + d->shape.delay_ns + jitter_draw(d);
    if (p.release_ns < sent) p.release_ns = sent;
    p.seq = d->next_seq++;
    p.failed = 0;
    heap_push(d, p);
    d->held_packets += p.wire_packets;
    if (d->held_packets > d->c.max_queue_depth) d->c.max_queue_depth = d->held_packets;
}

/* The machine's share of a release at `at` due at `release`: sleep past both the armed wake-up
 * and the release, plus time off the CPU since waking (wall time the thread's CPU clock did
 * not see), counting only what fell after the release. */
static int64_t machine_share(const struct wake *w, int64_t release, int64_t at, int64_t cpu) {
    int64_t share = 0, from = w->armed_ns > release ? w->armed_ns : release;
    if (w->armed_ns != INT64_MAX && w->woke_ns > from) share += w->woke_ns - from;
    if (w->cpu_ns >= 0) {
        int64_t off = (at - w->woke_ns) - (cpu - w->cpu_ns);
        int64_t after = at - (w->woke_ns > release ? w->woke_ns : release);
        share += off < after ? (off > 0 ? off : 0) : after;
    }
    return share < at - release ? share : at - release;
}

/* Lateness below the resolution is all counted as the emulator's own: splitting it would
 * cost a CPU clock read per packet. *cpu caches that read for one release round. */
static void account_lateness(struct direction *d, int64_t release, int64_t at, int64_t *cpu,
                             uint32_t packets) {
    int64_t late = at - release, own = late;
    d->c.late_ns_sum += late * packets;
    if (late > d->c.late_ns_max) d->c.late_ns_max = late;
    int bucket = 0;
    for (int64_t us = late / 1000; us > 0 && bucket < LATE_BUCKETS - 1; us >>= 1) bucket++;
    d->c.late_log2_us[bucket] += packets;
    if (late > RESOLUTION_NS) {
        if (*cpu < 0) *cpu = thread_cpu_ns();
        int64_t machine = machine_share(&d->wake, release, at, *cpu);
        own = late - machine;
        d->c.late_over_res += packets;
        if (own > RESOLUTION_NS) d->c.own_late_over_res += packets;
        if (machine > d->c.stall_ns_max) d->c.stall_ns_max = machine;
    }
    if (own > d->c.own_late_ns_max) d->c.own_late_ns_max = own;
}

/* Pops up to max packets due now into batch, in release order; their lateness is counted
 * against this moment, the send that follows at once. */
int take_due(struct direction *d, struct packet *batch, int max) {
    int64_t now = now_ns(), cpu = -1;
    int n = 0;
    while (n < max && d->held && d->heap[0].release_ns <= now) {
        struct packet p = heap_pop(d);
        d->held_packets -= p.wire_packets;
        account_lateness(d, p.release_ns, now, &cpu, p.wire_packets);
        batch[n++] = p;
    }
    return n;
}

void settle(struct direction *d, struct packet *batch, int n) {
    for (int i = 0; i < n; i++) {
        struct packet *p = &batch[i];
        if (p->failed) {
            d->c.write_errors += p->wire_packets;
        } else {
            d->c.forwarded += p->wire_packets;
            d->c.forwarded_bytes += p->wire_bytes;
        }
        packet_free(d, p);
    }
}

/* --ab/--ba "delay_us=25000,jitter_us=0,dist=normal,loss=0.01,rate_bps=1e7,limit=1000" */
struct shaping parse_shaping(const char *spec) {
    struct shaping s = {0, 0, DIST_UNIFORM, 0, 0, 1000};
    char *copy = strdup(spec), *save = NULL;
    for (char *kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) goto bad;
        *eq = '\0';
        const char *k = kv, *v = eq + 1;
        char *end;
        double x = strtod(v, &end);
        int numeric = *v && !*end && x >= 0;
        if (!strcmp(k, "dist")) {
            if (!strcmp(v, "uniform")) s.dist = DIST_UNIFORM;
            else if (!strcmp(v, "normal")) s.dist = DIST_NORMAL;
            else goto bad;
        } else if (!numeric) goto bad;
        else if (!strcmp(k, "delay_us")) s.delay_ns = (int64_t)(x * 1000);
        else if (!strcmp(k, "jitter_us")) s.jitter_ns = (int64_t)(x * 1000);
        else if (!strcmp(k, "loss") && x <= 1) s.loss = x;
        else if (!strcmp(k, "rate_bps")) s.rate_bps = x;
        else if (!strcmp(k, "limit") && x >= 1) s.limit = (size_t)x;
        else goto bad;
        continue;
    bad:
        fprintf(stderr, "wb-linkem: bad shaping item '%s' in '%s'; keys: delay_us, jitter_us, "
                "dist=uniform|normal, loss (0..1), rate_bps (0 = unlimited), limit (>=1)\n",
                kv, spec);
        exit(2);
    }
    free(copy);
    return s;
}

void print_counters(FILE *f, const struct direction *d, const struct io_backend *io,
                    const char *sep) {
    const struct counters *c = &d->c;
    fprintf(f, "  \"%s\": {\"io\": \"%s\", \"received\": %llu, \"forwarded\": %llu, "
            "\"forwarded_bytes\": %llu, \"dropped_loss\": %llu, \"dropped_queue\": %llu, "
            "\"dropped_oversize\": %llu, "
            "\"write_errors\": %llu, \"max_queue_depth\": %llu, \"wakeups\": %llu, "
            "\"held_at_exit\": %zu, \"late_us_mean\": %.1f, \"late_us_max\": %.1f, "
            "\"resolution_us\": %d, \"late_over_resolution\": %llu, "
            "\"own_late_over_resolution\": %llu, \"own_late_us_max\": %.1f, "
            "\"stall_us_max\": %.1f, \"reads\": %llu, \"gso_reads\": %llu, "
            "\"gso_packets\": %llu, \"receive_calls\": %llu, \"send_calls\": %llu, "
            "\"offload\": \"%s\", ", d->name, io->name,
            (unsigned long long)c->received, (unsigned long long)c->forwarded,
            (unsigned long long)c->forwarded_bytes, (unsigned long long)c->dropped_loss,
            (unsigned long long)c->dropped_queue, (unsigned long long)c->dropped_oversize,
            (unsigned long long)c->write_errors, (unsigned long long)c->max_queue_depth,
            (unsigned long long)c->wakeups, d->held_packets,
            c->forwarded ? c->late_ns_sum / 1e3 / (double)c->forwarded : 0.0,
            c->late_ns_max / 1e3, RESOLUTION_NS / 1000, (unsigned long long)c->late_over_res,
            (unsigned long long)c->own_late_over_res, c->own_late_ns_max / 1e3,
            c->stall_ns_max / 1e3, (unsigned long long)c->reads,
            (unsigned long long)c->gso_reads, (unsigned long long)c->gso_packets,
            (unsigned long long)c->receive_calls, (unsigned long long)c->send_calls,
            d->offload ? d->offload : "none");
    io->print(f, d);
    fprintf(f, "\"late_log2_us\": [");
    for (int i = 0; i < LATE_BUCKETS; i++)
        fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)c->late_log2_us[i]);
    fprintf(f, "], \"queue_limit\": %zu, \"busy_poll_us\": %lld, \"busy_poll_pauses\": %llu, "
            "\"sched\": \"%s\", \"sched_applied\": %s}%s\n", d->shape.limit,
            (long long)(d->busy_poll_ns / 1000), (unsigned long long)c->busy_poll_pauses,
            d->sched, d->sched_applied ? "true" : "false", sep);
}

void direction_free(struct direction *d) {
    for (size_t i = 0; i < d->held; i++) packet_free(d, &d->heap[i]);
    free(d->heap);
    pool_free(&d->slots);
    pool_free(&d->tails);
}
