/* dispatch.c: the table of backends and the interest bookkeeping they share. */
#include "dispatch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct dispatch_ops *const backends[] = {
    &dispatch_select, &dispatch_poll, &dispatch_devpoll,
    &dispatch_epoll, &dispatch_rtsig, &dispatch_uring,
};

const struct dispatch_ops *dispatch_find(const char *name)
{
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
        if (strcmp(backends[i]->name, name) == 0)
            return backends[i];
    return NULL;
}

const struct dispatch_ops *dispatch_at(size_t i)
{
    return i < sizeof backends / sizeof backends[0] ? backends[i] : NULL;
}

const char *dispatch_names(char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof backends / sizeof backends[0] && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? "|" : "", backends[i]->name);
    return buf;
}

int dispatch_open(struct dispatch *d, const struct dispatch_ops *ops, int setsize,
                  int listen_fd, struct stats *stats)
{
    *d = (struct dispatch){.ops = ops, .setsize = setsize, .listen_fd = listen_fd,
                           .stats = stats};
    d->mask = calloc((size_t)setsize, 1);
    d->fired = calloc((size_t)setsize, sizeof *d->fired);
    if (!d->mask || !d->fired) {
        errno = ENOMEM;
        return -1;
    }
    return ops->create(d);
}

int dispatch_set(struct dispatch *d, int fd, int mask)
{
    int old = d->mask[fd];
    if (mask & ~old) {
        if (d->ops->add(d, fd, mask & ~old) < 0)
            return -1;
        d->mask[fd] = (unsigned char)(old | mask);
    }
    if (old & ~mask) {
        d->ops->del(d, fd, old & ~mask);
        d->mask[fd] = (unsigned char)mask;
    }
    return 0;
}
