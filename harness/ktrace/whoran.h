/* What wb-whoran's BPF programs (whoran.bpf.c) and its loader (whoran.c) share: the map
 * layouts. Both sides include it, the BPF side after vmlinux.h, the loader after <stdint.h>. */
#ifndef WB_WHORAN_H
#define WB_WHORAN_H

#include "common.h"

/* Who ran a slice of the traced CPU: idle, the measured tree, the CPU's ksoftirqd, the run's
 * own other processes (--own-pid: its link emulators, which the measured tree may wait behind
 * by the run's design, not a neighbour's doing), or another task. */
enum kt_who { KT_WHO_IDLE, KT_WHO_MEASURED, KT_WHO_KSOFTIRQD, KT_WHO_OTHER, KT_WHO_OWN, KT_WHOS };

#define KT_MAX_OWN_TGIDS 64

/* The traced CPU's time by who ran there, and the measured tree's waits for it (who held the
 * CPU meanwhile). One entry, written by the programs on that CPU only and read by a wake-up
 * on any CPU. */
struct kt_who_cpu {
    __u64 slice_since_ns;   /* the running task's slice began (0: no switch seen yet) */
    __u64 running;          /* enum kt_who of the running task */
    __u64 running_pid;      /* and its pid (0: the idle task) */
    char running_comm[16];  /* and its name then */
    __u64 ran_ns[KT_WHOS];  /* closed slices by who ran them (interrupts inside them included) */
    __u64 waited_ns;        /* the measured tree's threads runnable there but not running */
    __u64 waited_others_ns; /* of that, while a KT_WHO_OTHER task ran there */
    __u64 waited_others_late_ns; /* of that, each wait's part past late_ns (--late-us) */
    __u64 waits;            /* waits that ended with a measured thread getting the CPU */
    /* switches the sched_switch tracepoint did not report: a slice that began with one task and
     * ended with another (some kernels do not report some tasks' switches out: a VM agent's
     * threads here), or an idle entry while a task was thought to run */
    __u64 untraced_switches;
};

/* A task other than the measured tree's, the run's own, the CPU's ksoftirqd and idle that ran on
 * that CPU. */
struct kt_who_task {
    __u64 ran_ns;
    char comm[16];
};

#define KT_MAX_WHO_TASKS 1024

#endif
