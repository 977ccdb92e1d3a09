/* wb-linkem's TUN back end: a TUN device in each side's namespace, one packet per read() and
 * per write().
 *
 * The TUNs carry virtio-net headers and take the kernel's offloads (checksum, TSO4/6), so a
 * bulk flow crosses as GSO segments of up to 64 KB, as it crosses a veth pair: one read and
 * one write move tens of packets. A segment is handed to the core as the MSS-sized packets
 * it stands for, each with its headers. A direction that drops or reorders packets one by
 * one (loss, jitter) takes no TSO on its input TUN: the kernel segments before the emulator
 * reads, so every draw is a wire packet's. */
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <linux/virtio_net.h>
#include <endian.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "linkem.h"

#define VNET_BYTES ((uint32_t)sizeof(struct virtio_net_hdr)) /* before every packet */
#define READ_BATCH_BYTES 262144 /* a receive stops past this: four GSO segments */

struct tun_state {
    int in_fd, out_fd;
    unsigned char *spare_tail; /* where the next read past SLOT_BYTES continues */
};

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

/* Offloads a direction's input TUN takes: TSO only where shaping acts on whole packets. */
static unsigned input_offload(const struct shaping *s, int offload) {
    if (!offload) return 0;
    int per_packet = s->loss > 0 || s->jitter_ns > 0; /* drops and reorders one by one */
    return TUN_F_CSUM | (per_packet ? 0 : TUN_F_TSO4 | TUN_F_TSO6);
}

static const char *offload_name(unsigned offload) {
    return offload & TUN_F_TSO4 ? "csum,tso" : offload ? "csum" : "none";
}

static void tun_open(struct direction dirs[2], const struct link_ends *ends) {
    int fds[2];
    for (int side = 0; side < 2; side++) { /* side a's TUN is dirs[0]'s input */
        unsigned offload = input_offload(&dirs[side].shape, ends->offload);
        fds[side] = open_tun_in(ends->netns[side], ends->dev[side], offload);
        dirs[side].offload = offload_name(offload);
    }
    for (int i = 0; i < 2; i++) {
        struct tun_state *t = calloc(1, sizeof *t);
        if (!t) die("calloc");
        t->in_fd = fds[i];
        t->out_fd = fds[1 - i];
        dirs[i].io = t;
    }
}

static int tun_wait_fd(const struct direction *d) {
    return ((const struct tun_state *)d->io)->in_fd;
}

static int tun_ready(struct direction *d) {
    (void)d;
    return -1; /* a TUN's queue is the kernel's: only poll sees it */
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

/* Reads until the TUN is drained, max packets are read or a batch's bytes are (a batch of
 * GSO segments would keep due packets waiting); -1 when the device is gone. */
static int tun_receive(struct direction *d, struct packet *batch, int max) {
    struct tun_state *t = d->io;
    uint64_t bytes = 0;
    int n = 0;
    while (n < max && bytes < READ_BATCH_BYTES) {
        unsigned char *s = buf_get(&d->slots);
        if (!t->spare_tail) t->spare_tail = buf_get(&d->tails);
        /* a packet up to the MTU stays in its slot; a GSO segment continues in a tail */
        struct iovec iov[2] = {{s, SLOT_BYTES}, {t->spare_tail, TAIL_BYTES}};
        ssize_t r = readv(t->in_fd, iov, 2);
        d->c.receive_calls++;
        if (r <= 0) {
            buf_put(&d->slots, s);
            if (r < 0 && (errno == EAGAIN || errno == EINTR)) return n;
            return n ? n : -1;
        }
        bytes += (uint64_t)r;
        if (r >= SLOT_BYTES + TAIL_BYTES || r <= (ssize_t)VNET_BYTES) {
            /* cannot tell a full buffer from a truncated packet */
            d->c.dropped_oversize++;
            buf_put(&d->slots, s);
            continue;
        }
        struct packet *p = &batch[n++];
        *p = (struct packet){.len = (uint32_t)r, .data = s, .release_ns = now_ns()};
        if (r > SLOT_BYTES) {
            p->tail = t->spare_tail;
            t->spare_tail = NULL;
        }
        wire_size(p);
    }
    return n;
}

static void tun_send(struct direction *d, struct packet *batch, int n) {
    struct tun_state *t = d->io;
    for (int i = 0; i < n; i++) {
        struct packet *p = &batch[i];
        struct iovec iov[2] = {{p->data, p->tail ? SLOT_BYTES : p->len},
                               {p->tail, p->tail ? p->len - SLOT_BYTES : 0}};
        p->failed = writev(t->out_fd, iov, p->tail ? 2 : 1) != (ssize_t)p->len;
        d->c.send_calls++;
    }
}

static void tun_print(FILE *f, const struct direction *d) {
    (void)f;
    (void)d; /* a TUN counts nothing the core does not */
}

static void tun_close(struct direction dirs[2]) {
    for (int i = 0; i < 2; i++) {
        struct tun_state *t = dirs[i].io;
        buf_put(&dirs[i].tails, t->spare_tail);
        close(t->in_fd); /* each TUN is one direction's input */
        free(t);
        dirs[i].io = NULL;
    }
}

const struct io_backend io_tun = {
    .name = "tun", .open = tun_open, .wait_fd = tun_wait_fd, .ready = tun_ready,
    .receive = tun_receive, .send = tun_send, .print = tun_print, .close = tun_close,
};
