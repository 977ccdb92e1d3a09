/* wb-linkem: userspace link emulator between two network namespaces.
 *
 * One thread per direction takes every packet its input has ready (a batch per wakeup) from
 * an I/O back end, hands each to the shaping core (shaping.c: seeded loss, the queue limit,
 * the rate as a token bucket one packet deep, delay and jitter, a release heap on
 * CLOCK_MONOTONIC), and gives the back end what is due, in batches. Two back ends (--io):
 * tun (io_tun.c: a TUN device in each namespace, a system call per packet, the kernel's
 * offloads) and xdp (io_xdp.c: AF_XDP sockets on the far ends of the hosts' veth pairs, rings
 * in shared memory, a system call per batch sent). --check opens the back end and exits: what
 * a probe asks. Counters go to --stats as JSON on exit (SIGINT/SIGTERM).
 *
 * With --busy-poll-us N a thread that has just forwarded keeps polling its input for N us
 * (yielding to any runnable task between polls) before it sleeps: no wake-up per burst. A
 * back end that sees its input without a system call (xdp's receive ring) is polled with
 * none. Polling pauses while other tasks' runnable count exceeds the CPUs (it would take
 * their time).
 *
 * Release lateness (send time minus release time) has two owners. The machine's share is
 * time the thread was kept from running when it had asked to: its timer fired late, or it
 * was preempted, or the host took its virtual CPU (the thread's CPU clock does not advance
 * then). The rest is the emulator's own: sleeping past a release or working too long
 * before it. Counters keep both, so a late packet says whose it was. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "linkem.h"

#define SPIN_NS 200000 /* wake this early and poll without sleeping: VM timer wakeups run late */
#define CHECK_NS 200000      /* while busy-polling, sample the machine's runnable tasks this often */
#define PAUSE_NS 50000000LL  /* first busy-poll pause on contended CPUs; doubles while it lasts */
#define PAUSE_MAX_SHIFT 5    /* ... up to 1.6 s */

static const struct io_backend *io = &io_tun;
static atomic_int awake; /* forwarding threads not asleep in ppoll: runnable or running */
static atomic_int stopping; /* set before stop_fd is written: no thread waits for it to poll */
static int loadavg_fd = -1, ncpus = 1;

/* Runnable tasks other than our forwarding threads: the R of /proc/loadavg's "R/T". */
static int others_runnable(void) {
    char buf[128];
    ssize_t n = pread(loadavg_fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = '\0';
    char *p = strchr(buf, '/');
    if (!p) return 0;
    while (p > buf && p[-1] != ' ') p--;
    return atoi(p) - atomic_load(&awake);
}

/* fifo:N forwards ahead of ordinary tasks, as netem's softirq does, so timed releases are
 * not late on a busy machine; batch never preempts the server on a packet's arrival, so
 * packets gather and one wake-up forwards many. Returns 1 when the kernel agreed. */
static int apply_sched(const char *sched) {
    struct sched_param sp = {0};
    if (!strncmp(sched, "fifo:", 5)) {
        sp.sched_priority = atoi(sched + 5);
        return pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0;
    }
    if (!strcmp(sched, "batch")) return pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp) == 0;
    return 1;
}

struct poller { /* one thread's busy-poll state */
    int64_t last_read_ns, paused_until, next_check_ns;
    double others; /* moving average of others_runnable() */
    int streak;
};

/* Busy-poll while a packet was read in the last busy_poll_ns, unless other runnable tasks
 * outnumber the CPUs: then polling takes their CPU time, not idle time, so it pauses, twice
 * as long each time in a row. */
static int keep_polling(struct direction *d, struct poller *p, int64_t now) {
    int on = now - p->last_read_ns < d->busy_poll_ns && now >= p->paused_until;
    if (on && now >= p->next_check_ns) {
        p->next_check_ns = now + CHECK_NS;
        p->others = 0.8 * p->others + 0.2 * others_runnable();
        if (p->others > ncpus + 0.5) {
            if (now - p->paused_until > 1000000000) p->streak = 0; /* contention had ended */
            p->paused_until = now + (PAUSE_NS << p->streak);
            if (p->streak < PAUSE_MAX_SHIFT) p->streak++;
            p->others = 0;
            d->c.busy_poll_pauses++;
            on = 0;
        }
    }
    return on;
}

/* Sends everything due, a batch per call. */
static void release_due(struct direction *d) {
    struct packet batch[BATCH_MAX];
    int n;
    while ((n = take_due(d, batch, BATCH_MAX)) > 0) {
        io->send(d, batch, n);
        settle(d, batch, n);
    }
}

/* Waits in ppoll for input, for the stop signal, for the next release (less SPIN_NS) or, busy,
 * not at all; 1: input ready, 0: none, -1: stop (or the device is gone). */
static int wait_input(struct direction *d, struct pollfd fds[2], int busy, int64_t now) {
    struct timespec ts = {0, 0}, *timeout = NULL;
    if (busy) {
        timeout = &ts;
    } else if (d->held) {
        int64_t wait = d->heap[0].release_ns - now - SPIN_NS;
        if (wait < 0) wait = 0;
        ts = (struct timespec){wait / 1000000000, wait % 1000000000};
        timeout = &ts;
    }
    int may_sleep = !timeout || ts.tv_sec || ts.tv_nsec;
    if (may_sleep) atomic_fetch_sub(&awake, 1);
    d->wake.entered_ns = now_ns();
    d->wake.armed_ns = timeout ? d->wake.entered_ns + ts.tv_sec * 1000000000LL + ts.tv_nsec
                               : INT64_MAX;
    int n = ppoll(fds, 2, timeout, NULL);
    if (n < 0 && errno != EINTR) die("ppoll");
    d->wake.woke_ns = now_ns();
    if (may_sleep) {
        atomic_fetch_add(&awake, 1);
        d->c.wakeups++;
    }
    if (fds[1].revents || (fds[0].revents & (POLLERR | POLLHUP | POLLNVAL))) return -1;
    return (fds[0].revents & POLLIN) != 0;
}

static void *run_direction(void *arg) {
    struct direction *d = arg;
    struct pollfd fds[2] = {{io->wait_fd(d), POLLIN, 0}, {d->stop_fd, POLLIN, 0}};
    struct packet batch[BATCH_MAX];
    prctl(PR_SET_TIMERSLACK, 1UL); /* default 50 us slack would skew short delays */
    d->sched_applied = apply_sched(d->sched);
    atomic_fetch_add(&awake, 1);
    struct poller bp = {.last_read_ns = INT64_MIN / 2}; /* end of the last round that read */
    while (!atomic_load_explicit(&stopping, memory_order_relaxed)) {
        int64_t now = now_ns();
        int busy = keep_polling(d, &bp, now);
        int ready = io->ready(d), got;
        if (ready > 0 || (ready == 0 && busy)) { /* known without a system call */
            d->wake = (struct wake){now, now, now, -1};
            got = ready > 0;
        } else if ((got = wait_input(d, fds, busy, now)) < 0) {
            break;
        }
        /* Only a round that may release needs the CPU clock (an empty busy poll does not). */
        d->wake.cpu_ns = got || d->held ? thread_cpu_ns() : -1;
        release_due(d); /* what is due goes first: receiving a full batch takes a while */
        if (got) {
            int n = io->receive(d, batch, BATCH_MAX);
            if (n < 0) break;
            for (int i = 0; i < n; i++) admit(d, batch[i]);
        }
        release_due(d); /* then what the batch made due at once */
        if (got) bp.last_read_ns = now_ns(); /* the window starts when the work is done */
        if (busy) sched_yield(); /* whoever else can run here goes first */
    }
    return NULL;
}

static void usage(void) {
    fprintf(stderr,
            "usage: wb-linkem --a-netns PATH --a-dev NAME --b-netns PATH --b-dev NAME\n"
            "                 [--io tun|xdp] [--check]\n"
            "                 [--ab SHAPING] [--ba SHAPING] [--seed N] [--stats PATH]\n"
            "                 [--sched fifo:N|batch|other]  (forwarding threads' policy)\n"
            "                 [--busy-poll-us N]  (poll N us after a packet before sleeping;\n"
            "                                      not with fifo: it yields to no one)\n"
            "                 [--offload on|off]  (tun: checksum and TSO offloads, GSO segments\n"
            "                                      forwarded whole where shaping allows)\n"
            "--io tun (default): creates a TUN named --X-dev in each namespace.\n"
            "--io xdp: --X-dev is host X's end of a veth pair whose other end, of the same\n"
            "          name, is in the other side's namespace; frames from X arrive there (an\n"
            "          XDP program redirects them to an AF_XDP socket) and frames to X leave\n"
            "          from it. Host X's end loses its transmit checksum offload.\n"
            "--check: open the devices as a run would, print 'ok' and exit 0 (a probe).\n"
            "SHAPING: delay_us=N,jitter_us=N,dist=uniform|normal,loss=P,rate_bps=N,"
            "limit=N\nPrints 'ready' on stdout once both sides are open; SIGTERM/SIGINT stop it.\n");
    exit(2);
}

int main(int argc, char **argv) {
    struct link_ends ends = {.offload = 1};
    const char *stats = NULL, *ab = "", *ba = "", *sched = "other";
    uint64_t seed = 1;
    int64_t busy_poll_ns = 0;
    int check = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(arg, "--check")) {
            check = 1;
            continue;
        }
        if (!val) usage();
        if (!strcmp(arg, "--a-netns")) ends.netns[0] = val;
        else if (!strcmp(arg, "--a-dev")) ends.dev[0] = val;
        else if (!strcmp(arg, "--b-netns")) ends.netns[1] = val;
        else if (!strcmp(arg, "--b-dev")) ends.dev[1] = val;
        else if (!strcmp(arg, "--ab")) ab = val;
        else if (!strcmp(arg, "--ba")) ba = val;
        else if (!strcmp(arg, "--seed")) seed = strtoull(val, NULL, 10);
        else if (!strcmp(arg, "--stats")) stats = val;
        else if (!strcmp(arg, "--sched")) sched = val;
        else if (!strcmp(arg, "--busy-poll-us")) busy_poll_ns = strtoll(val, NULL, 10) * 1000;
        else if (!strcmp(arg, "--offload") && !strcmp(val, "on")) ends.offload = 1;
        else if (!strcmp(arg, "--offload") && !strcmp(val, "off")) ends.offload = 0;
        else if (!strcmp(arg, "--io") && !strcmp(val, io_tun.name)) io = &io_tun;
        else if (!strcmp(arg, "--io") && !strcmp(val, io_xdp.name)) io = &io_xdp;
        else usage();
        i++;
    }
    if (!ends.netns[0] || !ends.dev[0] || !ends.netns[1] || !ends.dev[1]) usage();
    if (strncmp(sched, "fifo:", 5) && strcmp(sched, "batch") && strcmp(sched, "other")) usage();
    if (busy_poll_ns < 0 || (busy_poll_ns && !strncmp(sched, "fifo:", 5))) usage();

    /* Block the stop signals in every thread; main waits for them with sigwait. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);

    loadavg_fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC); /* none: poll regardless */
    ncpus = (int)sysconf(_SC_NPROCESSORS_ONLN); /* what /proc/loadavg's count runs on */
    int stop_fd = eventfd(0, EFD_CLOEXEC);
    if (stop_fd < 0) die("eventfd");
    struct direction dirs[2] = {
        {.name = "a_to_b", .shape = parse_shaping(ab), .rng = seed * 2 + 1},
        {.name = "b_to_a", .shape = parse_shaping(ba), .rng = seed * 2 + 2},
    };
    for (int i = 0; i < 2; i++) {
        dirs[i].stop_fd = stop_fd;
        dirs[i].sched = sched;
        dirs[i].busy_poll_ns = busy_poll_ns;
        dirs[i].slots.bytes = SLOT_BYTES;
        dirs[i].tails.bytes = TAIL_BYTES;
    }
    io->open(dirs, &ends);
    if (check) {
        io->close(dirs);
        printf("ok\n");
        return 0;
    }
    pthread_t threads[2];
    for (int i = 0; i < 2; i++)
        if (pthread_create(&threads[i], NULL, run_direction, &dirs[i]) != 0) die("pthread_create");
    printf("ready\n");
    fflush(stdout);

    /* A direction thread ending (device gone with its namespace) also ends the run. */
    struct timespec tick = {0, 200000000};
    siginfo_t info;
    while (sigtimedwait(&stop, &info, &tick) < 0) {
        if (pthread_tryjoin_np(threads[0], NULL) == 0) { threads[0] = 0; break; }
        if (pthread_tryjoin_np(threads[1], NULL) == 0) { threads[1] = 0; break; }
    }
    atomic_store(&stopping, 1);
    uint64_t one = 1;
    if (write(stop_fd, &one, sizeof one) != sizeof one) die("eventfd write");
    for (int i = 0; i < 2; i++)
        if (threads[i]) pthread_join(threads[i], NULL);

    FILE *f = stats ? fopen(stats, "w") : stdout;
    if (!f) die(stats);
    fprintf(f, "{\n");
    print_counters(f, &dirs[0], io, ",");
    print_counters(f, &dirs[1], io, "");
    fprintf(f, "}\n");
    if (f != stdout) fclose(f);
    io->close(dirs);
    direction_free(&dirs[0]);
    direction_free(&dirs[1]);
    return 0;
}
