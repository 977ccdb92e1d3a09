/* dispatch_epoll.c: edge-triggered epoll. Each fd is registered once for reading and
 * writing; later interest changes cost no system call (the loop drains to EAGAIN). */
#include "epollset.h"

static int epoll_add(struct dispatch *d, int fd, int mask)
{
    (void)mask;
    if (d->mask[fd] != DISPATCH_NONE)
        return 0;
    return epollset_ctl(d, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET);
}

/* Interest only ever shrinks to none just before close(), which removes the fd itself. */
static void epoll_del(struct dispatch *d, int fd, int mask)
{
    (void)d, (void)fd, (void)mask;
}

const struct dispatch_ops dispatch_epoll = {
    .name = "epoll", .flags = DISPATCH_EDGE, .create = epollset_create, .add = epoll_add,
    .del = epoll_del, .wait = epollset_wait, .destroy = epollset_destroy,
};
