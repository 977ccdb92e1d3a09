// SPDX-License-Identifier: GPL-2.0
/* wb-whoran's BPF side: who ran on one CPU (the measured tree, the CPU's ksoftirqd, idle, each
 * other task by pid), and whom the measured tree's threads waited behind there.
 *
 * BTF-typed raw tracepoints (tp_btf), as wb-ktrace's: sched_switch, sched_wakeup and cpu_idle,
 * and follow_fork. Their work is on that CPU only: a switch elsewhere returns at once, before
 * any map is read or written; a wake-up's target CPU is checked before its task is looked up. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "whoran.h"
#include "common.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* the CPU traced (--cpu), set by the loader before loading */
const volatile __s32 who_cpu = -1;
/* --late-us: a wait behind others shorter than this makes no send late */
const volatile __u64 late_ns = 0;
/* whether --own-pid gave any: without, no switch looks its task up in kt_who_own */
const volatile bool own_given = false;

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct kt_who_cpu);
} kt_who SEC(".maps");

/* the run's own other processes (--own-pid), by tgid: their threads are KT_WHO_OWN */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, KT_MAX_OWN_TGIDS);
    __type(key, __u32);
    __type(value, __u8);
} kt_who_own SEC(".maps");

/* pid -> its time on who_cpu, for tasks of KT_WHO_OTHER */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, KT_MAX_WHO_TASKS);
    __type(key, __u32);
    __type(value, struct kt_who_task);
} kt_who_tasks SEC(".maps");

/* A measured thread runnable on who_cpu but not running: since when, and the CPU's
 * KT_WHO_OTHER time then. */
struct who_wait {
    __u64 since_ns;
    __u64 others_at_ns;
};

struct {
    __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, int);
    __type(value, struct who_wait);
} kt_who_waits SEC(".maps");

/* The loader puts one role's trees in kt_tgids: whichever it is, they are the measured ones. */
static __always_inline bool measured(struct task_struct *task)
{
    __u32 tgid = task->tgid;
    return bpf_map_lookup_elem(&kt_tgids, &tgid) != NULL;
}

static __always_inline __u64 who_of(struct task_struct *task)
{
    if (task->pid == 0)
        return KT_WHO_IDLE;
    if (measured(task))
        return KT_WHO_MEASURED;
    __u32 tgid = task->tgid;
    if (own_given && bpf_map_lookup_elem(&kt_who_own, &tgid))
        return KT_WHO_OWN;
    /* the CPU's softirq thread does the network work its interrupts leave: the measured
     * tree's traffic, not a neighbour */
    if ((task->flags & 0x00200000 /* PF_KTHREAD */) && task->comm[0] == 'k' &&
        task->comm[1] == 's' && task->comm[2] == 'o' && task->comm[3] == 'f' &&
        task->comm[4] == 't' && task->comm[5] == 'i' && task->comm[6] == 'r' &&
        task->comm[7] == 'q' && task->comm[8] == 'd')
        return KT_WHO_KSOFTIRQD;
    return KT_WHO_OTHER;
}

/* Other tasks' time on the CPU up to now, the running slice's part included. */
static __always_inline __u64 others_until(const struct kt_who_cpu *w, __u64 now)
{
    __u64 ran = w->ran_ns[KT_WHO_OTHER];
    if (w->running == KT_WHO_OTHER && w->slice_since_ns && now > w->slice_since_ns)
        ran += now - w->slice_since_ns;
    return ran;
}

static __always_inline void wait_begins(struct task_struct *task, const struct kt_who_cpu *w,
                                        __u64 now)
{
    struct who_wait *wait = bpf_task_storage_get(&kt_who_waits, task, 0,
                                                 BPF_LOCAL_STORAGE_GET_F_CREATE);
    if (wait) {
        wait->since_ns = now;
        wait->others_at_ns = others_until(w, now);
    }
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(kt_who_wakeup, struct task_struct *p)
{
    __u32 zero = 0;
    struct kt_who_cpu *w;
    if (!counting || p->wake_cpu != who_cpu || !measured(p) ||
        !(w = bpf_map_lookup_elem(&kt_who, &zero)))
        return 0;
    wait_begins(p, w, bpf_ktime_get_ns());
    return 0;
}

/* ns of the CPU's time to who; a task other than the measured tree's, ksoftirqd and idle also by
 * its pid, under its latest name (a process that ran here before its exec keeps its pid). */
static __always_inline void credit(struct kt_who_cpu *w, __u64 who, __u32 pid, const char *comm,
                                   __u64 ns)
{
    if (who >= KT_WHOS)
        return;
    w->ran_ns[who] += ns;
    if (who != KT_WHO_OTHER)
        return;
    struct kt_who_task *t = bpf_map_lookup_elem(&kt_who_tasks, &pid);
    if (t) {
        t->ran_ns += ns;
        bpf_probe_read_kernel_str(t->comm, sizeof t->comm, comm);
    } else {
        struct kt_who_task fresh = {.ran_ns = ns};
        bpf_probe_read_kernel_str(fresh.comm, sizeof fresh.comm, comm);
        bpf_map_update_elem(&kt_who_tasks, &pid, &fresh, BPF_NOEXIST);
    }
}

/* A measured thread got the CPU at `at`: the wait it was in, if any, ends there. */
static __always_inline void wait_ends(struct kt_who_cpu *w, struct task_struct *task, __u64 at)
{
    struct who_wait *wait = bpf_task_storage_get(&kt_who_waits, task, 0, 0);
    if (!wait || !wait->since_ns || at <= wait->since_ns)
        return;
    w->waited_ns += at - wait->since_ns;
    /* a wake-up on another CPU may have read a slice this switch just closed */
    __u64 behind = w->ran_ns[KT_WHO_OTHER] > wait->others_at_ns
                       ? w->ran_ns[KT_WHO_OTHER] - wait->others_at_ns : 0;
    w->waited_others_ns += behind;
    if (behind > late_ns)
        w->waited_others_late_ns += behind - late_ns;
    w->waits++;
    wait->since_ns = 0;
}

static __always_inline void slice_begins(struct kt_who_cpu *w, __u64 who, __u32 pid,
                                         const char *comm, __u64 now)
{
    w->slice_since_ns = now;
    w->running = who;
    w->running_pid = pid;
    bpf_probe_read_kernel_str(w->running_comm, sizeof w->running_comm, comm);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(kt_who_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
    __u32 zero = 0;
    struct kt_who_cpu *w;
    if (bpf_get_smp_processor_id() != (__u32)who_cpu)
        return 0;
    struct kt_events *e = counted_run();
    if (!e || !(w = bpf_map_lookup_elem(&kt_who, &zero)))
        return 0;
    __u64 now = bpf_ktime_get_ns();
    __u64 prev_who = who_of(prev);
    if (w->slice_since_ns) {
        __u64 spent = now - w->slice_since_ns, prevs = spent;
        if (prev->pid != w->running_pid) {
            /* the switch into prev went unreported: the slice began with the task recorded
             * and ended with prev, which ran its own run since its pick */
            w->untraced_switches++;
            prevs = run_since_picked(prev);
            if (prevs > spent)
                prevs = spent;
            credit(w, w->running, (__u32)w->running_pid, w->running_comm, spent - prevs);
            if (prev_who == KT_WHO_MEASURED)
                wait_ends(w, prev, now - prevs);
        }
        credit(w, prev_who, prev->pid, prev->comm, prevs);
    }
    if (prev_who == KT_WHO_MEASURED) {
        if (prev->__state == 0) {
            /* preempted (still runnable): its wait for the CPU begins now */
            wait_begins(prev, w, now);
        } else {
            /* asleep: a wake-up that found it still running began no wait */
            struct who_wait *wait = bpf_task_storage_get(&kt_who_waits, prev, 0, 0);
            if (wait)
                wait->since_ns = 0;
        }
    }
    __u64 who = who_of(next);
    if (who == KT_WHO_MEASURED)
        wait_ends(w, next, now);
    slice_begins(w, who, next->pid, next->comm, now);
    traced(e);
    return 0;
}

/* The CPU enters an idle state (often, when idle polls: no counting of runs here). A task still
 * recorded as running means its switch to the idle task went unreported: its slice ends now. */
SEC("tp_btf/cpu_idle")
int BPF_PROG(kt_who_idle, unsigned int state, unsigned int cpu_id)
{
    __u32 zero = 0;
    struct kt_who_cpu *w;
    if (!counting || state == (unsigned int)-1 /* PWR_EVENT_EXIT */ ||
        cpu_id != (__u32)who_cpu || !(w = bpf_map_lookup_elem(&kt_who, &zero)) ||
        !w->slice_since_ns || w->running_pid == 0)
        return 0;
    __u64 now = bpf_ktime_get_ns();
    w->untraced_switches++;
    credit(w, w->running, (__u32)w->running_pid, w->running_comm, now - w->slice_since_ns);
    slice_begins(w, KT_WHO_IDLE, 0, "swapper", now);
    return 0;
}
