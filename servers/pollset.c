/* pollset.c: dense pollfd interest set shared by the poll and rtsig backends. */
#include "pollset.h"

#include <stdlib.h>

static short poll_events(int mask)
{
    return (short)(((mask & DISPATCH_READABLE) ? POLLIN | POLLRDHUP : 0) |
                   ((mask & DISPATCH_WRITABLE) ? POLLOUT : 0));
}

int pollset_init(struct pollset *p, int setsize)
{
    p->fds = calloc((size_t)setsize, sizeof *p->fds);
    p->slot = malloc((size_t)setsize * sizeof *p->slot);
    p->count = 0;
    if (!p->fds || !p->slot)
        return -1;
    for (int i = 0; i < setsize; i++)
        p->slot[i] = -1;
    return 0;
}

void pollset_free(struct pollset *p)
{
    free(p->fds);
    free(p->slot);
}

void pollset_add(struct pollset *p, const struct dispatch *d, int fd, int mask)
{
    if (p->slot[fd] < 0) {
        p->slot[fd] = p->count;
        p->fds[p->count++] = (struct pollfd){.fd = fd};
    }
    p->fds[p->slot[fd]].events = poll_events(d->mask[fd] | mask);
}

void pollset_del(struct pollset *p, const struct dispatch *d, int fd, int mask)
{
    int i = p->slot[fd];
    if (i < 0)
        return;
    int left = d->mask[fd] & ~mask;
    if (left) {
        p->fds[i].events = poll_events(left);
        return;
    }
    /* Keep the array dense: the last entry takes the freed slot. */
    p->fds[i] = p->fds[--p->count];
    p->slot[p->fds[i].fd] = i;
    p->slot[fd] = -1;
}

int pollset_scan(struct pollset *p, struct dispatch *d, int timeout_ms)
{
    int n = poll(p->fds, (nfds_t)p->count, timeout_ms);
    if (n <= 0)
        return n;
    int fired = 0;
    for (int i = 0; i < p->count && fired < n; i++) {
        short re = p->fds[i].revents;
        if (!re)
            continue;
        int mask = 0;
        if (re & (POLLIN | POLLRDHUP | POLLERR | POLLHUP))
            mask |= DISPATCH_READABLE;
        if (re & (POLLOUT | POLLERR | POLLHUP))
            mask |= DISPATCH_WRITABLE;
        if (re & (POLLRDHUP | POLLERR | POLLHUP))
            mask |= DISPATCH_HUP;
        d->fired[fired++] = (struct fired){p->fds[i].fd, mask};
    }
    return fired;
}
