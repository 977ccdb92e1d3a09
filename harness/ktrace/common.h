/* What both tools' BPF programs and loaders share: the roles, the trees' bound, the events.
 * Each side includes it through its tool's header (ktrace.h, whoran.h). */
#ifndef WB_KTRACE_COMMON_H
#define WB_KTRACE_COMMON_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Whose trees: the measured server's and, when asked, the generator's. */
enum kt_role { KT_SERVER, KT_GENERATOR, KT_ROLES };

#define KT_MAX_TGIDS 4096 /* processes followed */

/* Program runs (every invocation, matched or not: the probe's cost) and events traced. */
struct kt_events {
    __u64 runs;
    __u64 traced;
    __u64 untimed;       /* calls not timed: no task storage for the thread (out of memory) */
    __u64 followed;      /* processes added by fork */
    __u64 untraced_switches; /* a measured thread's switch back in, unreported (back_on_cpu) */
};

#endif
