/* What wb-ktrace's BPF programs (ktrace.bpf.c) and its loader (ktrace.c) share: the map
 * layouts. Both sides include it, the BPF side after vmlinux.h, the loader after <stdint.h>. */
#ifndef WB_KTRACE_H
#define WB_KTRACE_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* System-call families. The order is the loader's JSON and harness/results/format.py's
 * KERNEL_TRACE_FAMILIES (tests/ktrace/test_describe.py holds the two together). */
enum kt_family {
    KT_SELECT,         /* select, pselect6 */
    KT_POLL,           /* poll, ppoll */
    KT_EPOLL_WAIT,     /* epoll_wait, epoll_pwait, epoll_pwait2 */
    KT_IO_URING_ENTER, /* io_uring_enter */
    KT_SIGTIMEDWAIT,   /* rt_sigtimedwait: the rtsig backend's dispatch call */
    KT_LAST_DISPATCH = KT_SIGTIMEDWAIT, /* the event-dispatch calls end here */
    KT_ACCEPT,         /* accept, accept4 */
    KT_READ,           /* read, readv, recvfrom, recvmsg */
    KT_WRITE,          /* write, writev, sendto, sendmsg */
    KT_FAMILIES
};

/* Whose calls: the measured tree (the server's) and, when asked, the generator's. */
enum kt_role { KT_SERVER, KT_GENERATOR, KT_ROLES };

#define KT_MAX_SYSCALL 512   /* syscall numbers at or past this are never traced */
#define KT_HIST_BUCKETS 32   /* [i]: on-CPU ns in [2^i, 2^(i+1)); [0] also 0; the last: the rest */
#define KT_MAX_TGIDS 4096    /* processes followed */

/* One role's calls of one family, per CPU (the loader sums the CPUs). */
struct kt_calls {
    __u64 calls;
    __u64 kernel_ns;   /* on a CPU inside the call, less the softirqs that ran inside it */
    __u64 off_cpu_ns;  /* switched out inside the call: blocked, or preempted */
    __u64 softirq_ns;  /* network softirqs that ran on the caller's time inside it */
    __u64 returned;    /* positive return values added up (dispatch: ready descriptors) */
    __u64 errors;      /* negative returns (EAGAIN, EINTR ...) */
    __u64 hist[KT_HIST_BUCKETS];
};

/* Softirq vectors (include/linux/interrupt.h): the network's two. */
#define KT_NET_TX_SOFTIRQ 2
#define KT_NET_RX_SOFTIRQ 3

/* One CPU's network softirqs and packets; machine-wide, not filtered by process. */
struct kt_cpu {
    __u64 softirq_start_ns; /* the running softirq's entry; 0: none */
    __u64 softirq_vec;
    __u64 net_rx_ns, net_rx_count;
    __u64 net_tx_ns, net_tx_count;
    __u64 rx_packets; /* net:netif_receive_skb */
    __u64 tx_packets; /* net:net_dev_xmit */
};

/* Program runs (every invocation, matched or not: the probe's cost) and events traced. */
struct kt_events {
    __u64 runs;
    __u64 traced;
    __u64 untimed;       /* calls not timed: no task storage for the thread (out of memory) */
    __u64 followed;      /* processes added by fork */
};

#endif
