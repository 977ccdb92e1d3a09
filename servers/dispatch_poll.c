/* dispatch_poll.c: poll(2) over the whole interest set on every call. */
#include "pollset.h"

#include <stdlib.h>

static int poll_create(struct dispatch *d)
{
    struct pollset *p = malloc(sizeof *p);
    if (!p || pollset_init(p, d->setsize) < 0)
        return -1;
    d->state = p;
    return 0;
}

static int poll_add(struct dispatch *d, int fd, int mask)
{
    pollset_add(d->state, d, fd, mask);
    return 0;
}

static void poll_del(struct dispatch *d, int fd, int mask) { pollset_del(d->state, d, fd, mask); }

static int poll_wait(struct dispatch *d, int timeout_ms)
{
    d->stats->dispatch_calls++;
    int n = pollset_scan(d->state, d, timeout_ms);
    if (n > 0)
        d->stats->dispatch_events += (uint64_t)n;
    return n;
}

static void poll_destroy(struct dispatch *d)
{
    pollset_free(d->state);
    free(d->state);
}

const struct dispatch_ops dispatch_poll = {
    .name = "poll", .create = poll_create, .add = poll_add, .del = poll_del,
    .wait = poll_wait, .destroy = poll_destroy,
};
