/* What wb-ktrace's BPF programs (ktrace.bpf.c) and its loader (ktrace.c) share: the map
 * layouts. Both sides include it, the BPF side after vmlinux.h, the loader after <stdint.h>. */
#ifndef WB_KTRACE_H
#define WB_KTRACE_H

#include "common.h"

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

#define KT_MAX_SYSCALL 512   /* syscall numbers at or past this are never traced */
#define KT_HIST_BUCKETS 32   /* [i]: on-CPU ns in [2^i, 2^(i+1)); [0] also 0; the last: the rest */

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

/* One role's threads' time on a CPU in the window, per CPU (the loader sums the CPUs): from each
 * switch in (for a thread running when the window began, from then) to its switch out, or to
 * its latest traced call's return for the slice running at the window's end. The same clock as
 * kt_calls' kernel_ns, so that a call's share of it cannot pass 100 %. */
struct kt_on_cpu {
    __u64 ns;
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

/* The functions the papers timed (fentry/fexit, where this kernel allows it), in the order of
 * the loader's JSON and harness/results/format.py's KERNEL_FUNCTIONS. X(name, context):
 * process-context ones are timed for the measured trees only, in their task's storage;
 * softirq-context ones (they also run from a sender's bottom-half-disabled transmit) per CPU,
 * machine-wide, as the softirqs are. */
#define KT_FUNCTION_LIST(X)                    \
    X(do_select, KT_IN_PROCESS)                \
    X(do_sys_poll, KT_IN_PROCESS)              \
    X(ep_poll, KT_IN_PROCESS)                  \
    X(alloc_fd, KT_IN_PROCESS)                 \
    X(tcp_sendmsg, KT_IN_PROCESS)              \
    X(tcp_recvmsg, KT_IN_PROCESS)              \
    X(tcp_v4_rcv, KT_IN_SOFTIRQ)               \
    X(ip_rcv, KT_IN_SOFTIRQ)                   \
    X(__netif_receive_skb_core, KT_IN_SOFTIRQ) \
    X(dev_queue_xmit, KT_IN_SOFTIRQ)

enum kt_context { KT_IN_PROCESS, KT_IN_SOFTIRQ };

#define KT_FUNCTION_INDEX(name, context) KT_FN_##name,
enum kt_function { KT_FUNCTION_LIST(KT_FUNCTION_INDEX) KT_FUNCTIONS };
#undef KT_FUNCTION_INDEX

/* Calls of one function nested in one of its own on a CPU (dev_queue_xmit of an ACK sent by
 * the receive softirq that ran as the outer one enabled bottom halves) timed up to this depth;
 * deeper ones are not timed and counted as such. */
#define KT_FN_DEPTH 4

/* One function's calls that both entered and returned inside the window, per CPU. */
struct kt_fn {
    __u64 calls;
    __u64 kernel_ns; /* entry to return, callees included; process context: on a CPU, less the
                      * network softirqs that ran inside (as kt_calls.kernel_ns) */
    __u64 untimed;   /* softirq context: entered deeper than KT_FN_DEPTH */
};

/* A softirq-context function's calls in progress on one CPU. */
struct kt_fn_stack {
    __u64 depth;
    __u64 entered_ns[KT_FN_DEPTH];
};

#endif
