// SPDX-License-Identifier: GPL-2.0
/* wb-linkem's XDP program: every frame arriving on the veth end it is attached to goes to the
 * emulator's AF_XDP socket on that end (io_xdp.c), or is dropped while there is none: the
 * link is down while its emulator is, as with a TUN. The loader puts its one socket in xsks
 * before it attaches the program. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

struct {
    __uint(type, BPF_MAP_TYPE_XSKMAP);
    __uint(max_entries, 1); /* the emulator reads receive queue 0, a veth's only one */
    __type(key, __u32);
    __type(value, __u32);
} xsks SEC(".maps");

SEC("xdp")
int to_emulator(struct xdp_md *ctx)
{
    return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_DROP);
}
