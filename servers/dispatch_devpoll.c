/* dispatch_devpoll.c: the /dev/poll model on level-triggered epoll: interest declared
 * once per change (not per call, unlike poll), the ready list fetched in one batch. */
#include "epollset.h"

static unsigned devpoll_events(int mask)
{
    return ((mask & DISPATCH_READABLE) ? EPOLLIN : 0u) |
           ((mask & DISPATCH_WRITABLE) ? EPOLLOUT : 0u);
}

static int devpoll_add(struct dispatch *d, int fd, int mask)
{
    int old = d->mask[fd];
    return epollset_ctl(d, old ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, devpoll_events(old | mask));
}

static void devpoll_del(struct dispatch *d, int fd, int mask)
{
    int left = d->mask[fd] & ~mask;
    /* Dropping all interest happens just before close(), which removes the fd itself. */
    if (left)
        epollset_ctl(d, EPOLL_CTL_MOD, fd, devpoll_events(left));
}

const struct dispatch_ops dispatch_devpoll = {
    .name = "devpoll", .create = epollset_create, .add = devpoll_add, .del = devpoll_del,
    .wait = epollset_wait, .destroy = epollset_destroy,
};
