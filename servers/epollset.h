/* epollset.h: the epoll instance and ready-list fetch shared by the devpoll and epoll
 * backends (they differ only in how interest is declared). */
#ifndef WB_EPOLLSET_H
#define WB_EPOLLSET_H

#include <sys/epoll.h>

#include "dispatch.h"

struct epollset {
    int epfd;
    struct epoll_event *events; /* setsize entries: the whole ready list in one call */
};

int epollset_create(struct dispatch *d);
int epollset_ctl(struct dispatch *d, int op, int fd, unsigned events);
int epollset_wait(struct dispatch *d, int timeout_ms);
void epollset_destroy(struct dispatch *d);

#endif
