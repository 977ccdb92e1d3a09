/* dispatch.h: the one small interface every event-dispatch backend implements.
 *
 * Like Redis ae: the loop owns the interest mask per fd (d->mask) and the fired array;
 * a backend keeps private state and implements create, add, del, wait, destroy, name.
 * add/del are called with the mask bits to add or remove *before* d->mask is updated,
 * so a backend can see the old interest. What the interface cannot express (RT-signal
 * overflow, io_uring completions) stays inside the backend's own file. */
#ifndef WB_DISPATCH_H
#define WB_DISPATCH_H

#include <stddef.h>

#include "stats.h"

#define DISPATCH_NONE 0
#define DISPATCH_READABLE 1
#define DISPATCH_WRITABLE 2
#define DISPATCH_HUP 4 /* fired only: the peer closed or the socket failed */

/* Backend properties the loop must honour. */
#define DISPATCH_EDGE 1          /* reports changes, not states: the loop remembers fds it
                                    left before EAGAIN and services them again itself */
#define DISPATCH_NO_INITIAL 2    /* registering a ready fd reports nothing: the loop checks
                                    a newly added connection once by itself */

struct fired {
    int fd;
    int mask;
};

struct dispatch;

struct dispatch_ops {
    const char *name;
    int flags;
    int (*create)(struct dispatch *d);                  /* 0, or -1 with errno */
    int (*add)(struct dispatch *d, int fd, int mask);   /* 0, or -1 with errno */
    void (*del)(struct dispatch *d, int fd, int mask);
    int (*wait)(struct dispatch *d, int timeout_ms);    /* fills d->fired, returns count;
                                                           timeout_ms < 0: no timeout */
    void (*destroy)(struct dispatch *d);
    int (*accept)(struct dispatch *d); /* optional: next fd accepted by the backend itself,
                                          or -1 with errno (EAGAIN when none) */
};

struct dispatch {
    const struct dispatch_ops *ops;
    void *state;
    int setsize;          /* fds are < setsize */
    int listen_fd;
    unsigned char *mask;  /* interest per fd */
    struct fired *fired;  /* setsize entries */
    struct stats *stats;  /* dispatch_calls, dispatch_events, ctl_calls, signal counters */
};

extern const struct dispatch_ops dispatch_select, dispatch_poll, dispatch_devpoll,
    dispatch_epoll, dispatch_rtsig, dispatch_uring;

/* The backend called `name`, or NULL. */
const struct dispatch_ops *dispatch_find(const char *name);
/* Every backend's name, in table order, joined by '|' into buf (for usage and errors). */
const char *dispatch_names(char *buf, size_t size);
/* The i-th backend of the table, NULL past its end. */
const struct dispatch_ops *dispatch_at(size_t i);

int dispatch_open(struct dispatch *d, const struct dispatch_ops *ops, int setsize,
                  int listen_fd, struct stats *stats);
/* Sets fd's interest to exactly `mask`, calling the backend's add/del for the difference. */
int dispatch_set(struct dispatch *d, int fd, int mask);

#endif
