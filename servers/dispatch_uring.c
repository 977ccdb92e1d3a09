/* dispatch_uring.c: io_uring with multishot poll for connections and multishot accept
 * for the listener. Interest changes are queued as SQEs and submitted with the wait,
 * so ctl_calls counts SQEs, not system calls. Accepted fds arrive in completions and
 * are handed to the loop through the optional accept op. */
#include "dispatch.h"

#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>

#define URING_ENTRIES 4096
#define KIND_POLL 0ULL
#define KIND_ACCEPT 1ULL
#define KIND_REMOVE 2ULL
#define KIND_LISTEN_POLL 3ULL /* out of fds: wait for a pending connection, then accept */
#define GEN_MASK 0x3fffffffu /* 30 bits between the kind and the fd */

struct uring_state {
    struct io_uring ring;
    unsigned *gen;        /* per fd, bumped on removal: completions of old polls are stale */
    int *accepted;        /* ring buffer of fds accepted by the kernel */
    int acc_head, acc_count;
    int accept_error;     /* errno of a failed accept completion, reported once */
    int accept_armed;     /* an accept or listener poll is in flight */
    int out_of_fds;       /* accept failed with EMFILE: re-arming it at once would spin,
                             as accept fails before looking for a pending connection */
};

static unsigned long long tag(unsigned long long kind, unsigned gen, int fd)
{
    return kind << 62 | (unsigned long long)(gen & GEN_MASK) << 32 | (unsigned)fd;
}

static struct io_uring_sqe *next_sqe(struct dispatch *d)
{
    struct uring_state *s = d->state;
    struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);
    if (!sqe) { /* submission queue full: hand it to the kernel now */
        io_uring_submit(&s->ring);
        sqe = io_uring_get_sqe(&s->ring);
    }
    d->stats->ctl_calls++;
    return sqe;
}

static int arm_poll(struct dispatch *d, int fd)
{
    struct uring_state *s = d->state;
    struct io_uring_sqe *sqe = next_sqe(d);
    if (!sqe)
        return errno = EBUSY, -1;
    io_uring_prep_poll_multishot(sqe, fd, POLLIN | POLLOUT | POLLRDHUP);
    io_uring_sqe_set_data64(sqe, tag(KIND_POLL, s->gen[fd], fd));
    return 0;
}

static int arm_accept(struct dispatch *d)
{
    struct uring_state *s = d->state;
    struct io_uring_sqe *sqe = next_sqe(d);
    if (!sqe)
        return errno = EBUSY, -1;
    if (s->out_of_fds) {
        io_uring_prep_poll_add(sqe, d->listen_fd, POLLIN);
        io_uring_sqe_set_data64(sqe, tag(KIND_LISTEN_POLL, 0, d->listen_fd));
    } else {
        io_uring_prep_multishot_accept(sqe, d->listen_fd, NULL, NULL,
                                       SOCK_NONBLOCK | SOCK_CLOEXEC);
        io_uring_sqe_set_data64(sqe, tag(KIND_ACCEPT, 0, d->listen_fd));
    }
    s->accept_armed = 1;
    return 0;
}

static int uring_create(struct dispatch *d)
{
    struct uring_state *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->gen = calloc((size_t)d->setsize, sizeof *s->gen);
    s->accepted = calloc((size_t)d->setsize, sizeof *s->accepted);
    /* Completion work runs only when we wait: no interruptions of the loop between waits. */
    struct io_uring_params params = {
        .flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN};
    int err = s->gen && s->accepted ? io_uring_queue_init_params(URING_ENTRIES, &s->ring, &params)
                                    : -ENOMEM;
    if (err < 0) {
        free(s->gen);
        free(s->accepted);
        free(s);
        return errno = -err, -1;
    }
    d->state = s;
    return 0;
}

static int uring_add(struct dispatch *d, int fd, int mask)
{
    (void)mask;
    if (d->mask[fd] != DISPATCH_NONE)
        return 0; /* the multishot poll already covers both directions */
    return fd == d->listen_fd ? arm_accept(d) : arm_poll(d, fd);
}

/* The poll holds a reference on the socket: cancel it or close() would not free it. */
static void cancel_poll(struct dispatch *d, int fd, unsigned gen)
{
    struct io_uring_sqe *sqe = next_sqe(d);
    if (sqe) {
        io_uring_prep_poll_remove(sqe, tag(KIND_POLL, gen, fd));
        io_uring_sqe_set_data64(sqe, tag(KIND_REMOVE, gen, fd));
    }
}

static void uring_del(struct dispatch *d, int fd, int mask)
{
    struct uring_state *s = d->state;
    if ((d->mask[fd] & ~mask) != DISPATCH_NONE)
        return;
    cancel_poll(d, fd, s->gen[fd]);
    s->gen[fd]++;
}

static int completion(struct dispatch *d, struct io_uring_cqe *cqe, int *listener_fired)
{
    struct uring_state *s = d->state;
    unsigned long long data = io_uring_cqe_get_data64(cqe);
    unsigned long long kind = data >> 62;
    int fd = (int)(data & 0xffffffffu);
    int more = cqe->flags & IORING_CQE_F_MORE;

    if (kind == KIND_LISTEN_POLL) {
        s->accept_armed = s->out_of_fds = 0; /* a connection is pending: try accepting */
        return 0;
    }
    if (kind == KIND_ACCEPT) {
        if (cqe->res >= 0)
            s->accepted[(s->acc_head + s->acc_count++) % d->setsize] = cqe->res;
        else
            s->accept_error = -cqe->res;
        s->out_of_fds = cqe->res == -EMFILE || cqe->res == -ENFILE;
        s->accept_armed = more;
        if (*listener_fired)
            return 0; /* one listener event per batch: the loop accepts from the queue */
        *listener_fired = 1;
        return DISPATCH_READABLE;
    }
    unsigned gen = (unsigned)(data >> 32 & GEN_MASK);
    if (kind == KIND_REMOVE && cqe->res == -EALREADY)
        cancel_poll(d, fd, gen); /* the poll was busy with a wakeup: ask again */
    if (kind != KIND_POLL || gen != (s->gen[fd] & GEN_MASK))
        return 0; /* removal results and completions for an fd since closed */
    if (!more && d->mask[fd] != DISPATCH_NONE)
        arm_poll(d, fd); /* the kernel ended the multishot (e.g. CQ overflow): re-arm */
    int mask = 0;
    if (cqe->res < 0 || (cqe->res & (POLLIN | POLLRDHUP | POLLERR | POLLHUP)))
        mask |= DISPATCH_READABLE;
    if (cqe->res < 0 || (cqe->res & (POLLOUT | POLLERR | POLLHUP)))
        mask |= DISPATCH_WRITABLE;
    if (cqe->res < 0 || (cqe->res & (POLLRDHUP | POLLERR | POLLHUP)))
        mask |= DISPATCH_HUP;
    return mask;
}

static int uring_wait(struct dispatch *d, int timeout_ms)
{
    struct uring_state *s = d->state;
    if (!s->accept_armed && !s->accept_error && d->mask[d->listen_fd] != DISPATCH_NONE)
        arm_accept(d);
    struct __kernel_timespec ts = {timeout_ms / 1000, (long long)(timeout_ms % 1000) * 1000000};
    struct io_uring_cqe *cqe;
    d->stats->dispatch_calls++;
    int err = io_uring_submit_and_wait_timeout(&s->ring, &cqe, 1, timeout_ms < 0 ? NULL : &ts,
                                               NULL);
    if (err < 0 && err != -ETIME)
        return errno = -err, -1;

    int fired = 0, listener_fired = 0;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&s->ring, head, cqe) {
        seen++;
        int fd = (int)(io_uring_cqe_get_data64(cqe) & 0xffffffffu);
        int mask = completion(d, cqe, &listener_fired);
        if (mask)
            d->fired[fired++] = (struct fired){fd, mask};
        if (fired == d->setsize)
            break;
    }
    io_uring_cq_advance(&s->ring, seen);
    d->stats->dispatch_events += (uint64_t)fired;
    return fired;
}

static int uring_accept(struct dispatch *d)
{
    struct uring_state *s = d->state;
    if (s->acc_count > 0) {
        int fd = s->accepted[s->acc_head];
        s->acc_head = (s->acc_head + 1) % d->setsize;
        s->acc_count--;
        return fd;
    }
    errno = s->accept_error ? s->accept_error : EAGAIN;
    s->accept_error = 0;
    return -1;
}

static void uring_destroy(struct dispatch *d)
{
    struct uring_state *s = d->state;
    io_uring_queue_exit(&s->ring);
    free(s->gen);
    free(s->accepted);
    free(s);
}

const struct dispatch_ops dispatch_uring = {
    .name = "uring", .flags = DISPATCH_EDGE, .create = uring_create, .add = uring_add,
    .del = uring_del, .wait = uring_wait, .destroy = uring_destroy, .accept = uring_accept,
};
