/* dispatch_rtsig.c: POSIX RT signals (F_SETOWN + F_SETSIG + O_ASYNC), one signal per
 * sigtimedwait. When the RT queue overflows the kernel raises SIGIO instead: we drop
 * the queued signals, rescan the whole interest set with one poll(), and go back to
 * signals (Chandra & Mosberger 2001, section 3 and Table 1). */
#include "pollset.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define RTSIG_SIGNAL (SIGRTMIN + 1)

struct rtsig_state {
    struct pollset interest; /* for the overflow rescan */
    sigset_t waited;         /* RTSIG_SIGNAL and SIGIO, kept blocked */
};

static int rtsig_create(struct dispatch *d)
{
    struct rtsig_state *s = malloc(sizeof *s);
    if (!s || pollset_init(&s->interest, d->setsize) < 0)
        return -1;
    sigemptyset(&s->waited);
    sigaddset(&s->waited, RTSIG_SIGNAL);
    sigaddset(&s->waited, SIGIO);
    if (sigprocmask(SIG_BLOCK, &s->waited, NULL) < 0)
        return -1;
    d->state = s;
    return 0;
}

static int rtsig_add(struct dispatch *d, int fd, int mask)
{
    struct rtsig_state *s = d->state;
    int fresh = d->mask[fd] == DISPATCH_NONE;
    pollset_add(&s->interest, d, fd, mask);
    if (!fresh)
        return 0; /* signals already cover both directions */
    d->stats->ctl_calls += 3;
    int fl = fcntl(fd, F_GETFL);
    if (fcntl(fd, F_SETOWN, getpid()) < 0 || fcntl(fd, F_SETSIG, RTSIG_SIGNAL) < 0 ||
        fl < 0 || fcntl(fd, F_SETFL, fl | O_ASYNC | O_NONBLOCK) < 0)
        return -1;
    return 0;
}

/* close() ends the signals; ones still queued for the old fd are harmless (EAGAIN). */
static void rtsig_del(struct dispatch *d, int fd, int mask)
{
    struct rtsig_state *s = d->state;
    pollset_del(&s->interest, d, fd, mask);
}

static int rescan(struct dispatch *d, struct rtsig_state *s)
{
    d->stats->sigio_overflows++;
    /* Setting the action to ignore discards every queued instance of the signal. */
    signal(RTSIG_SIGNAL, SIG_IGN);
    signal(RTSIG_SIGNAL, SIG_DFL);
    d->stats->fallback_rescans++;
    return pollset_scan(&s->interest, d, 0);
}

static int rtsig_wait(struct dispatch *d, int timeout_ms)
{
    struct rtsig_state *s = d->state;
    struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
    siginfo_t si;
    d->stats->dispatch_calls++;
    int sig = sigtimedwait(&s->waited, &si, timeout_ms < 0 ? NULL : &ts);
    if (sig < 0)
        return errno == EAGAIN ? 0 : -1;
    d->stats->signals_dequeued++;
    int n;
    if (sig == SIGIO) {
        n = rescan(d, s);
    } else {
        int mask = 0;
        if (si.si_band & (POLLIN | POLLERR | POLLHUP))
            mask |= DISPATCH_READABLE;
        if (si.si_band & (POLLOUT | POLLERR | POLLHUP))
            mask |= DISPATCH_WRITABLE;
        if (si.si_band & (POLLRDHUP | POLLERR | POLLHUP))
            mask |= DISPATCH_HUP;
        d->fired[0] = (struct fired){si.si_fd, mask ? mask : DISPATCH_READABLE};
        n = si.si_fd >= 0 && si.si_fd < d->setsize ? 1 : 0;
    }
    if (n > 0)
        d->stats->dispatch_events += (uint64_t)n;
    return n;
}

static void rtsig_destroy(struct dispatch *d)
{
    struct rtsig_state *s = d->state;
    pollset_free(&s->interest);
    free(s);
}

const struct dispatch_ops dispatch_rtsig = {
    .name = "rtsig", .flags = DISPATCH_EDGE | DISPATCH_NO_INITIAL, .create = rtsig_create,
    .add = rtsig_add, .del = rtsig_del, .wait = rtsig_wait, .destroy = rtsig_destroy,
};
