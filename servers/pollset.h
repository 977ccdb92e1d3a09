/* pollset.h: an interest set kept as a dense pollfd array, for poll(2) and the rtsig
 * backend's overflow rescan. */
#ifndef WB_POLLSET_H
#define WB_POLLSET_H

#include <poll.h>

#include "dispatch.h"

struct pollset {
    struct pollfd *fds; /* dense: fds[0..count) */
    int *slot;          /* fd -> index in fds, -1 when absent */
    int count;
};

int pollset_init(struct pollset *p, int setsize);
void pollset_free(struct pollset *p);
/* Applies the interest change the loop is about to make to fd (see dispatch.h). */
void pollset_add(struct pollset *p, const struct dispatch *d, int fd, int mask);
void pollset_del(struct pollset *p, const struct dispatch *d, int fd, int mask);
/* One poll() over the whole set; fills d->fired and returns the count. */
int pollset_scan(struct pollset *p, struct dispatch *d, int timeout_ms);

#endif
