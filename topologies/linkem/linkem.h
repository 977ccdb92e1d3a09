/* wb-linkem: the shaping core (shaping.c), the forwarding loop (linkem.c) and the I/O back ends
 * (io_tun.c, io_xdp.c) share what is declared here. A back end moves packets between a device
 * and the core's buffers; it knows nothing of loss, rate, delay or the release heap. */
#ifndef LINKEM_H
#define LINKEM_H

#include <stdint.h>
#include <stdio.h>
#include <stddef.h>

#define SLOT_BYTES 2048   /* a packet up to the MTU with its header (virtio-net or Ethernet) */
#define TAIL_BYTES 65536  /* the rest of a GSO segment (up to 64 KB): a second buffer */
#define BATCH_MAX 256     /* packets one receive or send call moves at most */
#define LATE_BUCKETS 16   /* late_log2_us: [0] < 1 us, [i] < 2^i us, the last one the rest */

enum jitter_dist { DIST_UNIFORM, DIST_NORMAL };

struct shaping {
    int64_t delay_ns, jitter_ns;
    enum jitter_dist dist;
    double loss;        /* probability in [0, 1] */
    double rate_bps;    /* 0 = unlimited */
    size_t limit;       /* packets held (queued + in flight on the delay line) */
};

struct packet {
    int64_t release_ns;    /* set by receive to when it was read; by admit to when it leaves */
    uint64_t seq;          /* keeps FIFO order among equal release times */
    uint32_t len;          /* the device's header (virtio-net or Ethernet) included */
    uint32_t wire_packets; /* 1, or the MSS-sized packets of a GSO segment */
    uint32_t wire_bytes;   /* bytes of those packets on the wire, headers repeated */
    uint32_t failed;       /* set by send: the device did not take it */
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
    uint64_t receive_calls, send_calls; /* system calls made to receive and to send */
    int64_t late_ns_sum, late_ns_max; /* release accuracy: send time minus release time */
    uint64_t late_log2_us[LATE_BUCKETS];
    uint64_t late_over_res;     /* releases later than RESOLUTION_NS ... */
    uint64_t own_late_over_res; /* ... of which the emulator's own share was (should be 0) */
    int64_t own_late_ns_max;    /* lateness less the machine's share */
    int64_t stall_ns_max;       /* the machine's largest share of one release's lateness */
};

struct wake { /* the thread's last wait for input */
    int64_t entered_ns, armed_ns; /* armed_ns: when it asked to wake; INT64_MAX for never */
    int64_t woke_ns, cpu_ns;      /* when it returned; the thread's CPU clock then, or -1 */
};

struct direction {
    const char *name;
    int stop_fd;
    const char *sched;  /* --sched as given: fifo:N, batch or other */
    int sched_applied;
    int64_t busy_poll_ns; /* keep polling this long after the last packet read */
    struct shaping shape;
    const char *offload;  /* what the input takes from the kernel: csum,tso | csum | none */
    uint64_t rng;
    int64_t link_free_ns; /* when the rate limiter finishes serialising the last packet */
    struct packet *heap;
    size_t held, heap_cap, next_seq; /* held: heap entries */
    size_t held_packets;             /* the wire packets they stand for (the queue limit's) */
    struct pool slots, tails;
    struct wake wake;
    struct counters c;
    void *io;           /* the back end's own state for this direction */
};

/* Where the link's two sides are: side a's network namespace and device name, then b's. */
struct link_ends {
    const char *netns[2], *dev[2];
    int offload;        /* --offload on: take the kernel's offloads where shaping allows */
};

/* An I/O back end (one file each, as Redis's ae_epoll.c and ae_select.c): a private state
 * per direction behind these calls. dirs[0] forwards a to b, dirs[1] b to a. */
struct io_backend {
    const char *name;
    /* Opens both sides' devices for both directions; a failure ends the process with one
     * line on stderr (exit 1). */
    void (*open)(struct direction dirs[2], const struct link_ends *ends);
    int (*wait_fd)(const struct direction *d); /* polls readable when d's input has packets */
    /* 1: packets wait, 0: none (known without a system call); -1: only wait_fd can tell */
    int (*ready)(struct direction *d);
    /* Up to max packets into batch, each in a slot (and a tail) of d's pools; returns how
     * many, or -1 when the device is gone. */
    int (*receive)(struct direction *d, struct packet *batch, int max);
    /* Sends batch in order, marking what the device did not take; the core frees them. */
    void (*send)(struct direction *d, struct packet *batch, int n);
    /* Its own counters for d, as JSON members each followed by ", " */
    void (*print)(FILE *f, const struct direction *d);
    void (*close)(struct direction dirs[2]);
};

extern const struct io_backend io_tun, io_xdp;

/* ---- shaping.c: the core both back ends share ---- */
void die(const char *what);       /* what: strerror(errno), exit 1 */
void fail(const char *message);   /* one line, exit 1 */
int64_t now_ns(void);
int64_t thread_cpu_ns(void);
unsigned char *buf_get(struct pool *p);
void buf_put(struct pool *p, unsigned char *b);
struct shaping parse_shaping(const char *spec); /* exits 2 on a bad spec */
void admit(struct direction *d, struct packet p);
int take_due(struct direction *d, struct packet *batch, int max); /* pops what is due */
void settle(struct direction *d, struct packet *batch, int n);    /* counts a send, frees */
void print_counters(FILE *f, const struct direction *d, const struct io_backend *io,
                    const char *sep);
void direction_free(struct direction *d);

#endif
