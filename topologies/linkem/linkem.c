/* wb-linkem: userspace link emulator between two TUN devices in two network namespaces.
 *
 * One thread per direction reads every packet its input TUN has ready (a batch per
 * wakeup), applies seeded loss, the queue limit and the rate (a token bucket one packet
 * deep: each packet is serialised after the previous one), and holds the packet in a
 * release heap until now >= arrival + serialisation + delay + jitter (CLOCK_MONOTONIC).
 *
 * The TUNs carry virtio-net headers and take the kernel's offloads (checksum, TSO4/6), so a
 * bulk flow crosses as GSO segments of up to 64 KB, as it crosses a veth pair: one read and
 * one write move tens of packets. Shaping stays per wire packet: a segment counts as the
 * MSS-sized packets it stands for, each with its headers, against the queue limit and the
 * rate, and is delayed as one (its packets would leave back to back). A direction that
 * drops or reorders packets one by one (loss, jitter) takes no TSO on its input TUN: the
 * kernel segments before the emulator reads, so every draw is a wire packet's.
 * With --busy-poll-us N a thread that has just forwarded keeps polling its TUN for N us
 * (yielding to any runnable task between polls) before it sleeps: no wake-up per burst. It
 * pauses polling while other tasks' runnable count exceeds the CPUs (it would take their time).
 * Counters go to --stats as JSON on exit (SIGINT/SIGTERM).
 *
 * Release lateness (write time minus release time) has two owners. The machine's share is
 * time the thread was kept from running when it had asked to: its timer fired late, or it
 * was preempted, or the host took its virtual CPU (the thread's CPU clock does not advance
 * then). The rest is the emulator's own: sleeping past a release or working too long
 * before it. Counters keep both, so a late packet says whose it was. */
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <linux/virtio_net.h>
#include <endian.h>
#include <math.h>
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
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define VNET_BYTES ((uint32_t)sizeof(struct virtio_net_hdr)) /* before every packet */
#define SLOT_BYTES 2048 /* a virtio-net header and a packet at the TUN MTU of 1500 */
#define TAIL_BYTES 65536 /* the rest of a GSO segment (up to 64 KB): a second buffer */
#define READ_BATCH 256  /* packets read per wakeup before releasing due ones ... */
#define READ_BATCH_BYTES 262144 /* ... or bytes: four GSO segments */
#define SPIN_NS 200000 /* wake this early and poll without sleeping: VM timer wakeups run late */
#define CHECK_NS 200000      /* while busy-polling, sample the machine's runnable tasks this often */
#define PAUSE_NS 50000000LL  /* first busy-poll pause on contended CPUs; doubles while it lasts */
#define PAUSE_MAX_SHIFT 5    /* ... up to 1.6 s */
#define RESOLUTION_NS 1000000 /* promised: no release later than this by the emulator's own doing */
#define LATE_BUCKETS 16      /* late_log2_us: [0] < 1 us, [i] < 2^i us, the last one the rest */

enum jitter_dist { DIST_UNIFORM, DIST_NORMAL };

struct shaping {
    int64_t delay_ns, jitter_ns;
    enum jitter_dist dist;
    double loss;        /* probability in [0, 1] */
    double rate_bps;    /* 0 = unlimited */
    size_t limit;       /* packets held (queued + in flight on the delay line) */
};

struct packet {
    int64_t release_ns;
    uint64_t seq;       /* keeps FIFO order among equal release times */
    uint32_t len;       /* virtio-net header included */
    uint32_t wire_packets; /* 1, or the MSS-sized packets of a GSO segment */
    uint32_t wire_bytes;   /* IP bytes of those packets, headers repeated */
    unsigned char *data;   /* a slot: the first SLOT_BYTES */
    unsigned char *tail;   /* a tail buffer: the rest of a GSO segment, or NULL */
};

struct pool { /* free buffers of one size, allocated on first use so a large limit costs
               * nothing idle */
    size_t bytes, count, cap;
    unsigned char **free;
};

struct counters { /* packets are wire packets: a GSO segment counts as its packets */
    uint64_t received, forwarded, forwarded_bytes, dropped_loss, dropped_queue;
    uint64_t dropped_oversize, write_errors, max_queue_depth, wakeups; /* wakeups: sleeps ended */
    uint64_t busy_poll_pauses;
    uint64_t reads, gso_reads, gso_packets; /* reads that carried a GSO segment, its packets */
    int64_t late_ns_sum, late_ns_max; /* release accuracy: write time minus release time */
    uint64_t late_log2_us[LATE_BUCKETS];
    uint64_t late_over_res;     /* releases later than RESOLUTION_NS ... */
    uint64_t own_late_over_res; /* ... of which the emulator's own share was (should be 0) */
    int64_t own_late_ns_max;    /* lateness less the machine's share */
    int64_t stall_ns_max;       /* the machine's largest share of one release's lateness */
};

struct wake { /* the thread's last ppoll */
    int64_t entered_ns, armed_ns; /* armed_ns: when it asked to wake; INT64_MAX for never */
    int64_t woke_ns, cpu_ns;      /* when it returned; the thread's CPU clock then, or -1 */
};

struct direction {
    const char *name;
    int in_fd, out_fd, stop_fd;
    const char *sched;  /* --sched as given: fifo:N, batch or other */
    int sched_applied;
    int64_t busy_poll_ns; /* keep polling this long after the last packet read */
    struct shaping shape;
    unsigned offload;   /* TUN_F_* taken on in_fd */
    uint64_t rng;
    int64_t link_free_ns; /* when the rate limiter finishes serialising the last packet */
    struct packet *heap;
    size_t held, heap_cap, next_seq; /* held: heap entries */
    size_t held_packets;             /* the wire packets they stand for (the queue limit's) */
    struct pool slots, tails;
    unsigned char *spare_tail;       /* where the next read past SLOT_BYTES continues */
    struct wake wake;
    struct counters c;
};

static atomic_int awake; /* forwarding threads not asleep in ppoll: runnable or running */
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

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "wb-linkem: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* splitmix64: small, seedable, good enough for loss and jitter draws. */
static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double unit(uint64_t *s) { return (next_u64(s) >> 11) * 0x1.0p-53; }

static int64_t jitter_draw(struct direction *d) {
    double j = (double)d->shape.jitter_ns;
    if (j == 0) return 0;
    switch (d->shape.dist) {
    case DIST_NORMAL: { /* Box-Muller; sigma = jitter, as netem's normal table */
        double u1 = unit(&d->rng), u2 = unit(&d->rng);
        if (u1 < 1e-300) u1 = 1e-300;
        return (int64_t)(j * sqrt(-2 * log(u1)) * cos(2 * M_PI * u2));
    }
    default: /* uniform on [-jitter, +jitter], netem's default */
        return (int64_t)(j * (2 * unit(&d->rng) - 1));
    }
}

/* ---- release heap, keyed on (release_ns, seq) ---- */
static int before(const struct packet *a, const struct packet *b) {
    return a->release_ns < b->release_ns || (a->release_ns == b->release_ns && a->seq < b->seq);
}

static void heap_push(struct direction *d, struct packet p) {
    if (d->held == d->heap_cap) {
        d->heap_cap = d->heap_cap ? d->heap_cap * 2 : 1024;
        d->heap = realloc(d->heap, d->heap_cap * sizeof *d->heap);
        if (!d->heap) die("realloc");
    }
    size_t i = d->held++;
    while (i > 0 && before(&p, &d->heap[(i - 1) / 2])) {
        d->heap[i] = d->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    d->heap[i] = p;
}

static struct packet heap_pop(struct direction *d) {
    struct packet top = d->heap[0], last = d->heap[--d->held];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, m = l;
        if (l >= d->held) break;
        if (l + 1 < d->held && before(&d->heap[l + 1], &d->heap[l])) m = l + 1;
        if (!before(&d->heap[m], &last)) break;
        d->heap[i] = d->heap[m];
        i = m;
    }
    if (d->held) d->heap[i] = last;
    return top;
}

/* ---- buffers: slots and GSO tails ---- */
static unsigned char *buf_get(struct pool *p) {
    if (p->count) return p->free[--p->count];
    unsigned char *b = malloc(p->bytes);
    if (!b) die("malloc");
    return b;
}

static void buf_put(struct pool *p, unsigned char *b) {
    if (!b) return;
    if (p->count == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 1024;
        p->free = realloc(p->free, p->cap * sizeof *p->free);
        if (!p->free) die("realloc");
    }
    p->free[p->count++] = b;
}

static void pool_free(struct pool *p) {
    for (size_t i = 0; i < p->count; i++) free(p->free[i]);
    free(p->free);
}

static void packet_free(struct direction *d, struct packet *p) {
    buf_put(&d->slots, p->data);
    buf_put(&d->tails, p->tail);
}

/* The wire packets a read stands for: a GSO segment is ceil(payload / gso_size) packets,
 * each carrying the segment's IP and TCP headers (csum_start is where TCP begins). */
static void wire_size(struct packet *p) {
    const struct virtio_net_hdr *h = (const struct virtio_net_hdr *)p->data;
    uint32_t ip_len = p->len - VNET_BYTES, mss = le16toh(h->gso_size);
    uint32_t l4 = le16toh(h->csum_start);
    p->wire_packets = 1;
    p->wire_bytes = ip_len;
    if ((h->gso_type & ~VIRTIO_NET_HDR_GSO_ECN) == VIRTIO_NET_HDR_GSO_NONE || !mss ||
        l4 + 20 > ip_len || VNET_BYTES + l4 + 20 > SLOT_BYTES)
        return;
    uint32_t headers = l4 + (uint32_t)(p->data[VNET_BYTES + l4 + 12] >> 4) * 4;
    if (headers >= ip_len) return;
    p->wire_packets = (ip_len - headers + mss - 1) / mss;
    p->wire_bytes = ip_len + (p->wire_packets - 1) * headers;
}

/* Loss, queue limit, then rate and delay: the order netem applies them in. A lossy
 * direction reads no GSO segments (main), so its one draw per read is per wire packet. */
static void admit(struct direction *d, struct packet p, int64_t now) {
    wire_size(&p);
    d->c.reads++;
    d->c.received += p.wire_packets;
    if (p.wire_packets > 1) {
        d->c.gso_reads++;
        d->c.gso_packets += p.wire_packets;
    }
    if (d->shape.loss > 0 && unit(&d->rng) < d->shape.loss) {
        d->c.dropped_loss += p.wire_packets;
        packet_free(d, &p);
        return;
    }
    if (d->held_packets + p.wire_packets > d->shape.limit) {
        d->c.dropped_queue += p.wire_packets;
        packet_free(d, &p);
        return;
    }
    int64_t sent = now;
    if (d->shape.rate_bps > 0) { /* a segment's packets leave back to back */
        int64_t start = d->link_free_ns > now ? d->link_free_ns : now;
        sent = start + (int64_t)(p.wire_bytes * 8.0 * 1e9 / d->shape.rate_bps);
        d->link_free_ns = sent;
    }
    p.release_ns = sent + d->shape.delay_ns + jitter_draw(d);
    if (p.release_ns < sent) p.release_ns = sent;
    p.seq = d->next_seq++;
    heap_push(d, p);
    d->held_packets += p.wire_packets;
    if (d->held_packets > d->c.max_queue_depth) d->c.max_queue_depth = d->held_packets;
}

/* The machine's share of a release at `at` due at `release`: sleep past both the armed wake-up
 * and the release, plus time off the CPU since waking (wall time the thread's CPU clock did
 * not see), counting only what fell after the release. */
static int64_t machine_share(const struct wake *w, int64_t release, int64_t at, int64_t cpu) {
    int64_t share = 0, from = w->armed_ns > release ? w->armed_ns : release;
    if (w->armed_ns != INT64_MAX && w->woke_ns > from) share += w->woke_ns - from;
    if (w->cpu_ns >= 0) {
        int64_t off = (at - w->woke_ns) - (cpu - w->cpu_ns);
        int64_t after = at - (w->woke_ns > release ? w->woke_ns : release);
        share += off < after ? (off > 0 ? off : 0) : after;
    }
    return share < at - release ? share : at - release;
}

/* Lateness below the resolution is all counted as the emulator's own: splitting it would
 * cost a CPU clock read per packet. *cpu caches that read for one release round. */
static void account_lateness(struct direction *d, int64_t release, int64_t at, int64_t *cpu,
                             uint32_t packets) {
    int64_t late = at - release, own = late;
    d->c.late_ns_sum += late * packets;
    if (late > d->c.late_ns_max) d->c.late_ns_max = late;
    int bucket = 0;
    for (int64_t us = late / 1000; us > 0 && bucket < LATE_BUCKETS - 1; us >>= 1) bucket++;
    d->c.late_log2_us[bucket] += packets;
    if (late > RESOLUTION_NS) {
        if (*cpu < 0) *cpu = thread_cpu_ns();
        int64_t machine = machine_share(&d->wake, release, at, *cpu);
        own = late - machine;
        d->c.late_over_res += packets;
        if (own > RESOLUTION_NS) d->c.own_late_over_res += packets;
        if (machine > d->c.stall_ns_max) d->c.stall_ns_max = machine;
    }
    if (own > d->c.own_late_ns_max) d->c.own_late_ns_max = own;
}

static void release_due(struct direction *d) {
    int64_t cpu = -1;
    while (d->held && d->heap[0].release_ns <= now_ns()) {
        struct packet p = heap_pop(d);
        d->held_packets -= p.wire_packets;
        account_lateness(d, p.release_ns, now_ns(), &cpu, p.wire_packets);
        struct iovec iov[2] = {{p.data, p.tail ? SLOT_BYTES : p.len},
                               {p.tail, p.tail ? p.len - SLOT_BYTES : 0}};
        if (writev(d->out_fd, iov, p.tail ? 2 : 1) == (ssize_t)p.len) {
            d->c.forwarded += p.wire_packets;
            d->c.forwarded_bytes += p.wire_bytes;
        } else {
            d->c.write_errors += p.wire_packets;
        }
        packet_free(d, &p);
    }
}

/* Reads until the TUN is drained or a batch's bytes are read (a batch of GSO segments would
 * keep due packets waiting); returns -1 when the device is gone. */
static int read_batch(struct direction *d) {
    uint64_t bytes = 0;
    for (int n = 0; n < READ_BATCH && bytes < READ_BATCH_BYTES; n++) {
        unsigned char *s = buf_get(&d->slots);
        if (!d->spare_tail) d->spare_tail = buf_get(&d->tails);
        /* a packet up to the MTU stays in its slot; a GSO segment continues in a tail */
        struct iovec iov[2] = {{s, SLOT_BYTES}, {d->spare_tail, TAIL_BYTES}};
        ssize_t r = readv(d->in_fd, iov, 2);
        if (r <= 0) {
            buf_put(&d->slots, s);
            if (r < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
            return -1;
        }
        bytes += (uint64_t)r;
        if (r >= SLOT_BYTES + TAIL_BYTES || r <= (ssize_t)VNET_BYTES) {
            /* cannot tell a full buffer from a truncated packet */
            d->c.dropped_oversize++;
            buf_put(&d->slots, s);
            continue;
        }
        struct packet p = {.len = (uint32_t)r, .data = s};
        if (r > SLOT_BYTES) {
            p.tail = d->spare_tail;
            d->spare_tail = NULL;
        }
        admit(d, p, now_ns());
    }
    return 0;
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

static void *run_direction(void *arg) {
    struct direction *d = arg;
    struct pollfd fds[2] = {{d->in_fd, POLLIN, 0}, {d->stop_fd, POLLIN, 0}};
    prctl(PR_SET_TIMERSLACK, 1UL); /* default 50 us slack would skew short delays */
    d->sched_applied = apply_sched(d->sched);
    atomic_fetch_add(&awake, 1);
    struct poller bp = {.last_read_ns = INT64_MIN / 2}; /* end of the last round that read */
    for (;;) {
        struct timespec ts = {0, 0}, *timeout = NULL;
        int64_t now = now_ns();
        int busy = keep_polling(d, &bp, now);
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
        if (fds[1].revents) break;
        if (fds[0].revents & (POLLERR | POLLHUP | POLLNVAL)) break;
        int got = (fds[0].revents & POLLIN) != 0;
        /* Only a round that may release needs the CPU clock (an empty busy poll does not). */
        d->wake.cpu_ns = got || d->held ? thread_cpu_ns() : -1;
        release_due(d); /* what is due goes first: reading a full batch takes a while */
        if (got && read_batch(d) < 0) break;
        release_due(d); /* then what the batch made due at once */
        if (got) bp.last_read_ns = now_ns(); /* the window starts when the work is done */
        if (busy) sched_yield(); /* whoever else can run here goes first */
    }
    return NULL;
}

/* Creates a TUN (no packet-info header; virtio-net headers) inside the namespace at
 * netns_path, taking the offloads given (TUN_F_*: what the kernel may hand us unsegmented). */
static int open_tun_in(const char *netns_path, const char *ifname, unsigned offload) {
    int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    int target = open(netns_path, O_RDONLY | O_CLOEXEC);
    if (home < 0 || target < 0) die(netns_path);
    if (setns(target, CLONE_NEWNET) < 0) die("setns");
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) die("/dev/net/tun");
    struct ifreq ifr = {0};
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI | IFF_VNET_HDR;
    snprintf(ifr.ifr_name, IFNAMSIZ, "%s", ifname);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) die(ifname);
    if (ioctl(fd, TUNSETOFFLOAD, offload) < 0) die("TUNSETOFFLOAD");
    if (setns(home, CLONE_NEWNET) < 0) die("setns back");
    close(home);
    close(target);
    return fd;
}

/* --ab/--ba "delay_us=25000,jitter_us=0,dist=normal,loss=0.01,rate_bps=1e7,limit=1000" */
static struct shaping parse_shaping(const char *spec) {
    struct shaping s = {0, 0, DIST_UNIFORM, 0, 0, 1000};
    char *copy = strdup(spec), *save = NULL;
    for (char *kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) goto bad;
        *eq = '\0';
        const char *k = kv, *v = eq + 1;
        char *end;
        double x = strtod(v, &end);
        int numeric = *v && !*end && x >= 0;
        if (!strcmp(k, "dist")) {
            if (!strcmp(v, "uniform")) s.dist = DIST_UNIFORM;
            else if (!strcmp(v, "normal")) s.dist = DIST_NORMAL;
            else goto bad;
        } else if (!numeric) goto bad;
        else if (!strcmp(k, "delay_us")) s.delay_ns = (int64_t)(x * 1000);
        else if (!strcmp(k, "jitter_us")) s.jitter_ns = (int64_t)(x * 1000);
        else if (!strcmp(k, "loss") && x <= 1) s.loss = x;
        else if (!strcmp(k, "rate_bps")) s.rate_bps = x;
        else if (!strcmp(k, "limit") && x >= 1) s.limit = (size_t)x;
        else goto bad;
        continue;
    bad:
        fprintf(stderr, "wb-linkem: bad shaping item '%s' in '%s'; keys: delay_us, jitter_us, "
                "dist=uniform|normal, loss (0..1), rate_bps (0 = unlimited), limit (>=1)\n",
                kv, spec);
        exit(2);
    }
    free(copy);
    return s;
}

static void direction_free(struct direction *d) {
    for (size_t i = 0; i < d->held; i++) packet_free(d, &d->heap[i]);
    free(d->heap);
    buf_put(&d->tails, d->spare_tail);
    pool_free(&d->slots);
    pool_free(&d->tails);
}

/* Offloads a direction's input TUN takes: TSO only where shaping acts on whole packets. */
static unsigned direction_offload(const struct shaping *s, int offload) {
    if (!offload) return 0;
    int per_packet = s->loss > 0 || s->jitter_ns > 0; /* drops and reorders one by one */
    return TUN_F_CSUM | (per_packet ? 0 : TUN_F_TSO4 | TUN_F_TSO6);
}

static const char *offload_name(unsigned offload) {
    return offload & TUN_F_TSO4 ? "csum,tso" : offload ? "csum" : "none";
}

static void print_counters(FILE *f, const struct direction *d, const char *sep) {
    const struct counters *c = &d->c;
    fprintf(f, "  \"%s\": {\"received\": %llu, \"forwarded\": %llu, \"forwarded_bytes\": %llu, "
            "\"dropped_loss\": %llu, \"dropped_queue\": %llu, \"dropped_oversize\": %llu, "
            "\"write_errors\": %llu, \"max_queue_depth\": %llu, \"wakeups\": %llu, "
            "\"held_at_exit\": %zu, \"late_us_mean\": %.1f, \"late_us_max\": %.1f, "
            "\"resolution_us\": %d, \"late_over_resolution\": %llu, "
            "\"own_late_over_resolution\": %llu, \"own_late_us_max\": %.1f, "
            "\"stall_us_max\": %.1f, \"reads\": %llu, \"gso_reads\": %llu, "
            "\"gso_packets\": %llu, \"offload\": \"%s\", \"late_log2_us\": [", d->name,
            (unsigned long long)c->received, (unsigned long long)c->forwarded,
            (unsigned long long)c->forwarded_bytes, (unsigned long long)c->dropped_loss,
            (unsigned long long)c->dropped_queue, (unsigned long long)c->dropped_oversize,
            (unsigned long long)c->write_errors, (unsigned long long)c->max_queue_depth,
            (unsigned long long)c->wakeups, d->held_packets,
            c->forwarded ? c->late_ns_sum / 1e3 / (double)c->forwarded : 0.0,
            c->late_ns_max / 1e3, RESOLUTION_NS / 1000, (unsigned long long)c->late_over_res,
            (unsigned long long)c->own_late_over_res, c->own_late_ns_max / 1e3,
            c->stall_ns_max / 1e3, (unsigned long long)c->reads,
            (unsigned long long)c->gso_reads, (unsigned long long)c->gso_packets,
            offload_name(d->offload));
    for (int i = 0; i < LATE_BUCKETS; i++)
        fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)c->late_log2_us[i]);
    fprintf(f, "], \"queue_limit\": %zu, \"busy_poll_us\": %lld, \"busy_poll_pauses\": %llu, "
            "\"sched\": \"%s\", \"sched_applied\": %s}%s\n", d->shape.limit,
            (long long)(d->busy_poll_ns / 1000), (unsigned long long)c->busy_poll_pauses,
            d->sched, d->sched_applied ? "true" : "false", sep);
}

static void usage(void) {
    fprintf(stderr,
            "usage: wb-linkem --a-netns PATH --a-dev NAME --b-netns PATH --b-dev NAME\n"
            "                 [--ab SHAPING] [--ba SHAPING] [--seed N] [--stats PATH]\n"
            "                 [--sched fifo:N|batch|other]  (forwarding threads' policy)\n"
            "                 [--busy-poll-us N]  (poll N us after a packet before sleeping;\n"
            "                                      not with fifo: it yields to no one)\n"
            "                 [--offload on|off]  (on: checksum and TSO offloads, GSO segments\n"
            "                                      forwarded whole where shaping allows)\n"
            "SHAPING: delay_us=N,jitter_us=N,dist=uniform|normal,loss=P,rate_bps=N,"
            "limit=N\nPrints 'ready' on stdout once both TUNs exist; SIGTERM/SIGINT stop it.\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *a_ns = NULL, *a_dev = NULL, *b_ns = NULL, *b_dev = NULL, *stats = NULL;
    const char *ab = "", *ba = "";
    uint64_t seed = 1;
    const char *sched = "other";
    int64_t busy_poll_ns = 0;
    int offload = 1;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!val) usage();
        if (!strcmp(arg, "--a-netns")) a_ns = val;
        else if (!strcmp(arg, "--a-dev")) a_dev = val;
        else if (!strcmp(arg, "--b-netns")) b_ns = val;
        else if (!strcmp(arg, "--b-dev")) b_dev = val;
        else if (!strcmp(arg, "--ab")) ab = val;
        else if (!strcmp(arg, "--ba")) ba = val;
        else if (!strcmp(arg, "--seed")) seed = strtoull(val, NULL, 10);
        else if (!strcmp(arg, "--stats")) stats = val;
        else if (!strcmp(arg, "--sched")) sched = val;
        else if (!strcmp(arg, "--busy-poll-us")) busy_poll_ns = strtoll(val, NULL, 10) * 1000;
        else if (!strcmp(arg, "--offload") && !strcmp(val, "on")) offload = 1;
        else if (!strcmp(arg, "--offload") && !strcmp(val, "off")) offload = 0;
        else usage();
        i++;
    }
    if (!a_ns || !a_dev || !b_ns || !b_dev) usage();
    if (strncmp(sched, "fifo:", 5) && strcmp(sched, "batch") && strcmp(sched, "other")) usage();
    if (busy_poll_ns < 0 || (busy_poll_ns && !strncmp(sched, "fifo:", 5))) usage();

    /* Block the stop signals in every thread; main waits for them with sigwait. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);

    struct shaping ab_shape = parse_shaping(ab), ba_shape = parse_shaping(ba);
    loadavg_fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC); /* none: poll regardless */
    ncpus = (int)sysconf(_SC_NPROCESSORS_ONLN); /* what /proc/loadavg's count runs on */
    unsigned ab_offload = direction_offload(&ab_shape, offload);
    unsigned ba_offload = direction_offload(&ba_shape, offload);
    int a_fd = open_tun_in(a_ns, a_dev, ab_offload), b_fd = open_tun_in(b_ns, b_dev, ba_offload);
    int stop_fd = eventfd(0, EFD_CLOEXEC);
    if (stop_fd < 0) die("eventfd");
    struct direction dirs[2] = {
        {.name = "a_to_b", .in_fd = a_fd, .out_fd = b_fd, .stop_fd = stop_fd,
         .shape = ab_shape, .offload = ab_offload, .rng = seed * 2 + 1, .sched = sched,
         .busy_poll_ns = busy_poll_ns},
        {.name = "b_to_a", .in_fd = b_fd, .out_fd = a_fd, .stop_fd = stop_fd,
         .shape = ba_shape, .offload = ba_offload, .rng = seed * 2 + 2, .sched = sched,
         .busy_poll_ns = busy_poll_ns},
    };
    for (int i = 0; i < 2; i++) {
        dirs[i].slots.bytes = SLOT_BYTES;
        dirs[i].tails.bytes = TAIL_BYTES;
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
    uint64_t one = 1;
    if (write(stop_fd, &one, sizeof one) != sizeof one) die("eventfd write");
    for (int i = 0; i < 2; i++)
        if (threads[i]) pthread_join(threads[i], NULL);

    FILE *f = stats ? fopen(stats, "w") : stdout;
    if (!f) die(stats);
    fprintf(f, "{\n");
    print_counters(f, &dirs[0], ",");
    print_counters(f, &dirs[1], "");
    fprintf(f, "}\n");
    if (f != stdout) fclose(f);
    direction_free(&dirs[0]);
    direction_free(&dirs[1]);
    return 0;
}
