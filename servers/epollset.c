/* epollset.c: epoll instance, counted epoll_ctl, ready list -> fired array. */
#include "epollset.h"

#include <stdlib.h>
#include <unistd.h>

int epollset_create(struct dispatch *d)
{
    struct epollset *e = malloc(sizeof *e);
    if (!e)
        return -1;
    e->events = calloc((size_t)d->setsize, sizeof *e->events);
    e->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (!e->events || e->epfd < 0) {
        free(e->events);
        free(e);
        return -1;
    }
    d->state = e;
    return 0;
}

int epollset_ctl(struct dispatch *d, int op, int fd, unsigned events)
{
    struct epollset *e = d->state;
    struct epoll_event ev = {.events = events, .data.fd = fd};
    d->stats->ctl_calls++;
    return epoll_ctl(e->epfd, op, fd, &ev);
}

int epollset_wait(struct dispatch *d, int timeout_ms)
{
    struct epollset *e = d->state;
    d->stats->dispatch_calls++;
    int n = epoll_wait(e->epfd, e->events, d->setsize, timeout_ms);
    for (int i = 0; i < n; i++) {
        unsigned re = e->events[i].events;
        int mask = 0;
        if (re & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP))
            mask |= DISPATCH_READABLE;
        if (re & (EPOLLOUT | EPOLLERR | EPOLLHUP))
            mask |= DISPATCH_WRITABLE;
        if (re & (EPOLLRDHUP | EPOLLERR | EPOLLHUP))
            mask |= DISPATCH_HUP;
        d->fired[i] = (struct fired){e->events[i].data.fd, mask};
    }
    if (n > 0)
        d->stats->dispatch_events += (uint64_t)n;
    return n;
}

void epollset_destroy(struct dispatch *d)
{
    struct epollset *e = d->state;
    close(e->epfd);
    free(e->events);
    free(e);
}
