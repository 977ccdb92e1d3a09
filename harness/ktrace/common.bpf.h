/* What both tools' BPF programs share: the window's counting flag, the measured trees (tgid ->
 * role, followed through forks), the events counted, and the kernel's account of a task's run.
 * Each .bpf.c includes it after vmlinux.h, the libbpf headers and its tool's header. */
#ifndef WB_COMMON_BPF_H
#define WB_COMMON_BPF_H

/* The loader sets it once every program is attached and clears it before detaching: the
 * counted window is exactly the one between its two answers. */
volatile __u32 counting;

/* tgid -> role: the loader puts the measured trees in, follow_fork their children */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, KT_MAX_TGIDS);
    __type(key, __u32);
    __type(value, __u32);
} kt_tgids SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct kt_events);
} kt_events SEC(".maps");

/* This CPU's events, with this run counted; NULL outside the window. */
static __always_inline struct kt_events *counted_run(void)
{
    __u32 zero = 0;
    if (!counting)
        return NULL;
    struct kt_events *e = bpf_map_lookup_elem(&kt_events, &zero);
    if (e)
        e->runs++;
    return e;
}

static __always_inline void traced(struct kt_events *e)
{
    e->traced++;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(kt_follow_fork, struct task_struct *parent, struct task_struct *child)
{
    __u32 parent_tgid = parent->tgid, child_tgid = child->tgid;
    __u32 *role = bpf_map_lookup_elem(&kt_tgids, &parent_tgid);
    if (!role || child_tgid == parent_tgid) /* a thread: its process is already in */
        return 0;
    __u32 inherited = *role;
    if (bpf_map_update_elem(&kt_tgids, &child_tgid, &inherited, BPF_NOEXIST) == 0) {
        __u32 zero = 0;
        struct kt_events *e = bpf_map_lookup_elem(&kt_events, &zero);
        if (e)
            e->followed++;
    }
    return 0;
}

/* A fair-class task's run since it was last picked (the kernel's own account, set at the pick);
 * 0 for others (real-time, stop, idle), whose picks leave no such mark. */
static __always_inline __u64 run_since_picked(struct task_struct *task)
{
    unsigned int policy = task->policy;
    if (task->pid == 0 || (policy != 0 /* NORMAL */ && policy != 3 /* BATCH */ &&
                           policy != 5 /* IDLE */))
        return 0;
    __u64 sum = task->se.sum_exec_runtime, at_pick = task->se.prev_sum_exec_runtime;
    return sum > at_pick ? sum - at_pick : 0;
}

#endif
