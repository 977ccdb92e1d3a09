/* wb-linkem's AF_XDP back end: an AF_XDP socket on the far end of each host's veth pair.
 *
 * Host X's device (--X-dev, in X's namespace) is one end of a veth pair whose other end has
 * the same name and lives in the other host's namespace. An XDP program on that far end
 * (io_xdp.bpf.c) redirects every frame X sends to the socket there; frames for X leave from
 * the same socket's transmit ring and arrive on X's device. Each socket has a UMEM of its
 * own, split in two: receive frames, owned by the direction that reads this end, and transmit
 * frames, owned by the direction that writes it, so every ring has one user-space owner.
 *
 * Frames are copied into the core's buffers on receipt and their UMEM frames go back to the
 * fill ring at once: a held packet pins no UMEM, so a deep queue costs memory only while it
 * is full (the UMEM is pinned whole when registered). Receiving takes no system call (a ring
 * in shared memory); sending writes a batch of descriptors and kicks the kernel once
 * (sendto) when the ring asks for it (need_wakeup: always, in copy mode, which is what a
 * veth offers). The kernel then builds an skb per frame and hands it to the host's stack.
 *
 * A frame crosses as bytes, with none of the kernel's metadata: host X's device loses its
 * transmit checksum offload, so checksums are complete before they leave (and with it TSO;
 * a veth whose peer runs XDP takes no GSO either). Every frame is one wire packet. */
#include <errno.h>
#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "linkem.h"
#include "io_xdp.skel.h"

#define FRAME_BYTES 2048 /* one UMEM chunk: an Ethernet frame up to the veth's 1500-byte MTU */
#define RX_FRAMES 8192   /* frames the kernel may fill before the emulator reads them */
#define TX_FRAMES 2048   /* frames handed to the kernel and not yet completed */
#define KICKS_MAX 64     /* sendto calls per batch before what is left waits for the next */
#ifndef XDP_MAX_TX_SKB_BUDGET
#define XDP_MAX_TX_SKB_BUDGET 9 /* frames one sendto sends (kernels from 6.17; else 32) */
#endif
#define TX_BUDGET BATCH_MAX

struct ring { /* one of a socket's four rings, shared with the kernel */
    uint32_t *producer, *consumer, *flags;
    void *entries; /* struct xdp_desc (rx, tx) or a frame address (fill, completion) */
    uint32_t size;
    void *map;
    size_t map_bytes;
};

struct xdp_end { /* the socket on one host's far veth end, its UMEM and its program */
    int fd, link_fd;
    unsigned char *umem;
    struct ring fill, comp, rx, tx;
    struct io_xdp_bpf *skel;
    const char *mode; /* native (veth's own XDP) or generic (the stack's) */
};

struct xdp_dir { /* one direction: the input end's receive side, the output end's transmit side */
    struct xdp_end *in, *out;
    uint64_t *tx_free; /* transmit frames of `out` that are ours: not in its rings */
    uint32_t tx_free_count;
    uint64_t kick_retries, tx_dropped, no_frame;
};

static struct xdp_end ends[2]; /* side a's far end (a's frames come in there), then b's */

static uint32_t ring_ready(const struct ring *r) { /* entries to consume (rx, completion) */
    return __atomic_load_n(r->producer, __ATOMIC_ACQUIRE) - *r->consumer;
}

static void ring_consumed(struct ring *r, uint32_t n) {
    __atomic_store_n(r->consumer, *r->consumer + n, __ATOMIC_RELEASE);
}

static uint32_t ring_room(const struct ring *r) { /* entries we may produce (fill, tx) */
    return r->size - (*r->producer - __atomic_load_n(r->consumer, __ATOMIC_ACQUIRE));
}

static void ring_produced(struct ring *r, uint32_t n) {
    __atomic_store_n(r->producer, *r->producer + n, __ATOMIC_RELEASE);
}

static int ring_needs_wakeup(const struct ring *r) {
    return __atomic_load_n(r->flags, __ATOMIC_RELAXED) & XDP_RING_NEED_WAKEUP;
}

static void enter(const char *netns_path) {
    int fd = open(netns_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) die(netns_path);
    if (setns(fd, CLONE_NEWNET) < 0) die("setns");
    close(fd);
}

static int ethtool(const char *dev, void *request) {
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) die("socket");
    struct ifreq ifr = {0};
    snprintf(ifr.ifr_name, IFNAMSIZ, "%s", dev);
    ifr.ifr_data = request;
    int r = ioctl(s, SIOCETHTOOL, &ifr);
    close(s);
    return r;
}

static void map_ring(struct ring *r, int fd, const struct xdp_ring_offset *off, uint32_t size,
                     size_t entry_bytes, off_t pgoff) {
    r->size = size;
    r->map_bytes = off->desc + size * entry_bytes;
    r->map = mmap(NULL, r->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
                  pgoff);
    if (r->map == MAP_FAILED) die("mmap AF_XDP ring");
    r->producer = (uint32_t *)((char *)r->map + off->producer);
    r->consumer = (uint32_t *)((char *)r->map + off->consumer);
    r->flags = (uint32_t *)((char *)r->map + off->flags);
    r->entries = (char *)r->map + off->desc;
}

static void set_ring_size(int fd, int option, uint32_t size, const char *what) {
    if (setsockopt(fd, SOL_XDP, option, &size, sizeof size) < 0) die(what);
}

/* The AF_XDP socket, its UMEM and rings, bound to queue 0 of ifindex (in the namespace
 * entered); every receive frame handed to the kernel's fill ring. */
static void open_socket(struct xdp_end *end, int ifindex, const char *dev) {
    end->fd = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (end->fd < 0) die("AF_XDP socket");
    size_t umem_bytes = (size_t)(RX_FRAMES + TX_FRAMES) * FRAME_BYTES;
    end->umem = mmap(NULL, umem_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (end->umem == MAP_FAILED) die("mmap UMEM");
    struct xdp_umem_reg reg = {.addr = (uint64_t)(uintptr_t)end->umem, .len = umem_bytes,
                               .chunk_size = FRAME_BYTES};
    if (setsockopt(end->fd, SOL_XDP, XDP_UMEM_REG, &reg, sizeof reg) < 0) die("XDP_UMEM_REG");
    set_ring_size(end->fd, XDP_UMEM_FILL_RING, RX_FRAMES, "XDP_UMEM_FILL_RING");
    set_ring_size(end->fd, XDP_UMEM_COMPLETION_RING, TX_FRAMES, "XDP_UMEM_COMPLETION_RING");
    set_ring_size(end->fd, XDP_RX_RING, RX_FRAMES, "XDP_RX_RING");
    set_ring_size(end->fd, XDP_TX_RING, TX_FRAMES, "XDP_TX_RING");
    struct xdp_mmap_offsets off;
    socklen_t len = sizeof off;
    if (getsockopt(end->fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &len) < 0) die("XDP_MMAP_OFFSETS");
    map_ring(&end->fill, end->fd, &off.fr, RX_FRAMES, sizeof(uint64_t),
             XDP_UMEM_PGOFF_FILL_RING);
    map_ring(&end->comp, end->fd, &off.cr, TX_FRAMES, sizeof(uint64_t),
             XDP_UMEM_PGOFF_COMPLETION_RING);
    map_ring(&end->rx, end->fd, &off.rx, RX_FRAMES, sizeof(struct xdp_desc), XDP_PGOFF_RX_RING);
    map_ring(&end->tx, end->fd, &off.tx, TX_FRAMES, sizeof(struct xdp_desc), XDP_PGOFF_TX_RING);
    uint64_t *fill = end->fill.entries;
    for (uint32_t i = 0; i < RX_FRAMES; i++) fill[i] = (uint64_t)i * FRAME_BYTES;
    ring_produced(&end->fill, RX_FRAMES);
    struct sockaddr_xdp addr = {.sxdp_family = AF_XDP, .sxdp_ifindex = (uint32_t)ifindex,
                                .sxdp_queue_id = 0,
                                .sxdp_flags = XDP_COPY | XDP_USE_NEED_WAKEUP};
    if (bind(end->fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        char what[64];
        snprintf(what, sizeof what, "bind AF_XDP socket to %s", dev);
        die(what);
    }
    int budget = TX_BUDGET; /* older kernels keep their own (32 frames per sendto) */
    setsockopt(end->fd, SOL_XDP, XDP_MAX_TX_SKB_BUDGET, &budget, sizeof budget);
}

/* Loads the program, gives it the socket and attaches it to ifindex (in the namespace
 * entered) by a BPF link: closing the link, or the process ending, detaches it. */
static void attach_program(struct xdp_end *end, int ifindex, const char *dev) {
    end->skel = io_xdp_bpf__open_and_load();
    if (!end->skel) die("loading the XDP program");
    uint32_t queue = 0;
    if (bpf_map_update_elem(bpf_map__fd(end->skel->maps.xsks), &queue, &end->fd, BPF_ANY))
        die("XSKMAP update");
    int prog = bpf_program__fd(end->skel->progs.to_emulator);
    end->mode = "native";
    end->link_fd = bpf_link_create(prog, ifindex, BPF_XDP, NULL);
    if (end->link_fd < 0) { /* a device without XDP of its own: the stack's */
        LIBBPF_OPTS(bpf_link_create_opts, generic, .flags = XDP_FLAGS_SKB_MODE);
        end->mode = "generic";
        end->link_fd = bpf_link_create(prog, ifindex, BPF_XDP, &generic);
    }
    if (end->link_fd < 0) {
        errno = -end->link_fd;
        char what[64];
        snprintf(what, sizeof what, "attaching XDP to %s", dev);
        die(what);
    }
}

/* Side s: host s's device loses its transmit checksum offload (in host s's namespace); its
 * far end, in the other host's, gets the socket and the program. */
static void open_end(struct xdp_end *end, const struct link_ends *where, int s, int home) {
    const char *dev = where->dev[s];
    enter(where->netns[s]);
    struct ethtool_value csum = {.cmd = ETHTOOL_STXCSUM, .data = 0};
    if (ethtool(dev, &csum) < 0) die(dev);
    enter(where->netns[1 - s]);
    int ifindex = (int)if_nametoindex(dev);
    if (!ifindex) {
        fprintf(stderr, "wb-linkem: no device %s in %s: --io xdp wants host %c's veth pair "
                "to end there under the same name\n", dev, where->netns[1 - s], "ab"[s]);
        exit(1);
    }
    struct ethtool_channels channels = {.cmd = ETHTOOL_GCHANNELS};
    if (ethtool(dev, &channels) == 0 && channels.rx_count > 1) {
        fprintf(stderr, "wb-linkem: %s in %s has %u receive queues; the emulator reads the "
                "first only (create the veth pair with one)\n", dev, where->netns[1 - s],
                channels.rx_count);
        exit(1);
    }
    open_socket(end, ifindex, dev);
    attach_program(end, ifindex, dev);
    if (setns(home, CLONE_NEWNET) < 0) die("setns back");
}

static void xdp_open(struct direction dirs[2], const struct link_ends *where) {
    int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (home < 0) die("/proc/self/ns/net");
    libbpf_set_print(NULL); /* a failure is said once, by die() */
    for (int s = 0; s < 2; s++) open_end(&ends[s], where, s, home);
    close(home);
    for (int i = 0; i < 2; i++) {
        struct xdp_dir *x = calloc(1, sizeof *x);
        if (!x || !(x->tx_free = calloc(TX_FRAMES, sizeof *x->tx_free))) die("calloc");
        x->in = &ends[i];
        x->out = &ends[1 - i];
        for (uint32_t f = 0; f < TX_FRAMES; f++)
            x->tx_free[x->tx_free_count++] = (uint64_t)(RX_FRAMES + f) * FRAME_BYTES;
        dirs[i].io = x;
        dirs[i].offload = "none";
    }
}

static int xdp_wait_fd(const struct direction *d) {
    return ((const struct xdp_dir *)d->io)->in->fd;
}

static int xdp_ready(struct direction *d) {
    return ring_ready(&((struct xdp_dir *)d->io)->in->rx) > 0;
}

/* Copies what the receive ring holds (up to max frames) into slots, handing each frame back
 * to the fill ring at once. */
static int xdp_receive(struct direction *d, struct packet *batch, int max) {
    struct xdp_end *in = ((struct xdp_dir *)d->io)->in;
    uint32_t n = ring_ready(&in->rx), cons = *in->rx.consumer, prod = *in->fill.producer;
    if (n > (uint32_t)max) n = (uint32_t)max;
    const struct xdp_desc *descs = in->rx.entries;
    uint64_t *fill = in->fill.entries;
    int64_t now = now_ns();
    int got = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct xdp_desc desc = descs[(cons + i) & (RX_FRAMES - 1)];
        if (desc.len <= SLOT_BYTES) {
            unsigned char *slot = buf_get(&d->slots);
            memcpy(slot, in->umem + desc.addr, desc.len);
            batch[got++] = (struct packet){.release_ns = now, .len = desc.len, .data = slot,
                                           .wire_packets = 1, .wire_bytes = desc.len};
        } else {
            d->c.dropped_oversize++;
        }
        fill[(prod + i) & (RX_FRAMES - 1)] = desc.addr & ~(uint64_t)(FRAME_BYTES - 1);
    }
    ring_consumed(&in->rx, n);
    ring_produced(&in->fill, n); /* room: a frame is in the fill ring, the rx ring or here */
    if (n && ring_needs_wakeup(&in->fill)) {
        recvfrom(in->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
        d->c.receive_calls++;
    }
    return got;
}

static void reap_completions(struct xdp_dir *x) {
    struct ring *comp = &x->out->comp;
    uint32_t n = ring_ready(comp), cons = *comp->consumer;
    const uint64_t *done = comp->entries;
    for (uint32_t i = 0; i < n; i++) x->tx_free[x->tx_free_count++] = done[(cons + i) & (TX_FRAMES - 1)];
    ring_consumed(comp, n);
}

/* Asks the kernel to send what the transmit ring holds: a sendto sends up to its budget and
 * says EAGAIN while more is left, EBUSY when a frame was dropped on the way. */
static void kick(struct direction *d, struct xdp_dir *x) {
    struct ring *tx = &x->out->tx;
    for (int k = 0; k < KICKS_MAX && ring_needs_wakeup(tx); k++) {
        d->c.send_calls++;
        if (sendto(x->out->fd, NULL, 0, MSG_DONTWAIT, NULL, 0) >= 0) return;
        if (errno == EBUSY) x->tx_dropped++;
        else if (errno != EAGAIN && errno != ENOBUFS) return; /* the device is down */
        x->kick_retries++;
        reap_completions(x);
        if (ring_room(tx) == tx->size) return; /* all taken */
    }
}

static void xdp_send(struct direction *d, struct packet *batch, int n) {
    struct xdp_dir *x = d->io;
    struct ring *tx = &x->out->tx;
    reap_completions(x);
    if (x->tx_free_count < (uint32_t)n) { /* the kernel holds our frames: let it finish */
        kick(d, x);
        reap_completions(x);
    }
    uint32_t room = ring_room(tx), prod = *tx->producer, queued = 0;
    struct xdp_desc *descs = tx->entries;
    for (int i = 0; i < n; i++) {
        struct packet *p = &batch[i];
        if (queued == room || !x->tx_free_count || p->len > FRAME_BYTES) {
            p->failed = 1;
            x->no_frame++;
            continue;
        }
        uint64_t frame = x->tx_free[--x->tx_free_count];
        memcpy(x->out->umem + frame, p->data, p->len);
        descs[(prod + queued++) & (TX_FRAMES - 1)] = (struct xdp_desc){.addr = frame,
                                                                        .len = p->len};
    }
    ring_produced(tx, queued);
    kick(d, x);
}

static void xdp_print(FILE *f, const struct direction *d) {
    const struct xdp_dir *x = d->io;
    struct xdp_statistics in = {0}, out = {0};
    socklen_t len = sizeof in;
    getsockopt(x->in->fd, SOL_XDP, XDP_STATISTICS, &in, &len);
    len = sizeof out;
    getsockopt(x->out->fd, SOL_XDP, XDP_STATISTICS, &out, &len);
    fprintf(f, "\"xdp_mode\": \"%s\", \"xdp_rx_ring_full\": %llu, \"xdp_fill_ring_empty\": %llu, "
            "\"xdp_rx_dropped\": %llu, \"xdp_tx_invalid\": %llu, \"xdp_tx_dropped\": %llu, "
            "\"xdp_kick_retries\": %llu, \"xdp_no_frame\": %llu, ", x->in->mode,
            (unsigned long long)in.rx_ring_full, (unsigned long long)in.rx_fill_ring_empty_descs,
            (unsigned long long)in.rx_dropped, (unsigned long long)out.tx_invalid_descs,
            (unsigned long long)x->tx_dropped, (unsigned long long)x->kick_retries,
            (unsigned long long)x->no_frame);
}

static void close_end(struct xdp_end *end) {
    close(end->link_fd); /* detaches the program */
    io_xdp_bpf__destroy(end->skel);
    struct ring *rings[] = {&end->fill, &end->comp, &end->rx, &end->tx};
    for (int i = 0; i < 4; i++) munmap(rings[i]->map, rings[i]->map_bytes);
    close(end->fd);
    munmap(end->umem, (size_t)(RX_FRAMES + TX_FRAMES) * FRAME_BYTES);
}

static void xdp_close(struct direction dirs[2]) {
    for (int i = 0; i < 2; i++) {
        struct xdp_dir *x = dirs[i].io;
        free(x->tx_free);
        free(x);
        dirs[i].io = NULL;
        close_end(&ends[i]);
    }
}

const struct io_backend io_xdp = {
    .name = "xdp", .open = xdp_open, .wait_fd = xdp_wait_fd, .ready = xdp_ready,
    .receive = xdp_receive, .send = xdp_send, .print = xdp_print, .close = xdp_close,
};
