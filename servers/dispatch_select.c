/* dispatch_select.c: select(2) with our own bitmaps sized for any fd (no FD_SET, whose
 * fortified form aborts at fd >= 1024; the kernel itself accepts any nfds). */
#include "dispatch.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>

#define WORD_BITS 64

struct select_state {
    size_t words;
    uint64_t *want_read, *want_write; /* interest */
    uint64_t *got_read, *got_write;   /* select's in/out copies */
    int maxfd;                        /* highest fd with interest, -1 when none */
};

static void bit_set(uint64_t *map, int fd) { map[fd / WORD_BITS] |= 1ULL << (fd % WORD_BITS); }
static void bit_clear(uint64_t *map, int fd) { map[fd / WORD_BITS] &= ~(1ULL << (fd % WORD_BITS)); }
static int bit_test(const uint64_t *map, int fd) { return (map[fd / WORD_BITS] >> (fd % WORD_BITS)) & 1; }

static int select_create(struct dispatch *d)
{
    struct select_state *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->words = ((size_t)d->setsize + WORD_BITS - 1) / WORD_BITS;
    s->want_read = calloc(s->words * 4, sizeof(uint64_t));
    if (!s->want_read) {
        free(s);
        return -1;
    }
    s->want_write = s->want_read + s->words;
    s->got_read = s->want_write + s->words;
    s->got_write = s->got_read + s->words;
    s->maxfd = -1;
    d->state = s;
    return 0;
}

static int select_add(struct dispatch *d, int fd, int mask)
{
    struct select_state *s = d->state;
    if (mask & DISPATCH_READABLE)
        bit_set(s->want_read, fd);
    if (mask & DISPATCH_WRITABLE)
        bit_set(s->want_write, fd);
    if (fd > s->maxfd)
        s->maxfd = fd;
    return 0;
}

static void select_del(struct dispatch *d, int fd, int mask)
{
    struct select_state *s = d->state;
    if (mask & DISPATCH_READABLE)
        bit_clear(s->want_read, fd);
    if (mask & DISPATCH_WRITABLE)
        bit_clear(s->want_write, fd);
    if ((d->mask[fd] & ~mask) == 0 && fd == s->maxfd) {
        do
            s->maxfd--;
        while (s->maxfd >= 0 && d->mask[s->maxfd] == DISPATCH_NONE);
    }
}

static int select_wait(struct dispatch *d, int timeout_ms)
{
    struct select_state *s = d->state;
    size_t used = (size_t)(s->maxfd + WORD_BITS) / WORD_BITS;
    memcpy(s->got_read, s->want_read, used * sizeof(uint64_t));
    memcpy(s->got_write, s->want_write, used * sizeof(uint64_t));
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    d->stats->dispatch_calls++;
    int n = select(s->maxfd + 1, (fd_set *)s->got_read, (fd_set *)s->got_write, NULL,
                   timeout_ms < 0 ? NULL : &tv);
    if (n <= 0)
        return n;
    int fired = 0;
    for (int fd = 0; fd <= s->maxfd && fired < n; fd++) {
        int mask = 0;
        if (bit_test(s->got_read, fd))
            mask |= DISPATCH_READABLE;
        if (bit_test(s->got_write, fd))
            mask |= DISPATCH_WRITABLE;
        if (mask)
            d->fired[fired++] = (struct fired){fd, mask};
    }
    d->stats->dispatch_events += (uint64_t)fired;
    return fired;
}

static void select_destroy(struct dispatch *d)
{
    struct select_state *s = d->state;
    free(s->want_read);
    free(s);
}

const struct dispatch_ops dispatch_select = {
    .name = "select", .create = select_create, .add = select_add, .del = select_del,
    .wait = select_wait, .destroy = select_destroy,
};
