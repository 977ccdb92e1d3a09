// SPDX-License-Identifier: GPL-2.0
/* wb-ktrace's BPF side: the measured processes' event-dispatch and I/O system calls timed
 * from entry to exit (their time on a CPU, off it, and in softirqs that ran inside them),
 * and every CPU's network softirqs and packets.
 *
 * BTF-typed raw tracepoints (tp_btf) throughout: they need BTF, which CO-RE needs anyway,
 * but no tracefs, and they load where fentry is refused. sys_enter/sys_exit fire for every
 * system call of the machine; an array lookup by number drops the untraced ones, a hash
 * lookup by tgid the other processes.
 *
 * Where the kernel allows fentry (the loader probes it), also the functions the papers timed
 * (ktrace.h's KT_FUNCTION_LIST), one fentry/fexit pair each; the loader leaves them unloaded
 * where fentry is refused or the function is not in this kernel's BTF. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "ktrace.h"
#include "common.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* CLOCK_MONOTONIC (bpf_ktime_get_ns's clock) when the loader set counting: no time before it
 * counts */
volatile __u64 counting_since_ns;

/* syscall number -> family + 1 (0: not traced); the loader fills it from <sys/syscall.h> */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, KT_MAX_SYSCALL);
    __type(key, __u32);
    __type(value, __u32);
} kt_syscall_family SEC(".maps");

enum membership { UNKNOWN, MEMBER, STRANGER };

/* Each thread's state, in its task's local storage: a pointer away, where a hash lookup by
 * tid cost every system call exit and context switch of the machine one. Whether the thread
 * belongs to a measured tree is learnt at its first traced call (kt_tgids) and kept. */
struct task_state {
    __u64 entered_ns;   /* the traced call it is inside began; 0: in none */
    __u64 off_since_ns; /* switched out inside it at; 0: on a CPU */
    __u64 off_cpu_ns;
    __u64 softirq_ns;
    __u64 on_since_ns;  /* on a CPU since, counted up to then; 0: off one, or not yet seen */
    __u32 slot; /* of kt_calls: role * KT_FAMILIES + family */
    __u16 membership;
    __u16 role;
    /* process-context functions (KT_IN_PROCESS): entered at; 0: not inside one */
    __u64 fn_entered_ns[KT_FUNCTIONS];
    __u64 fn_away_ns[KT_FUNCTIONS]; /* off_cpu_ns + softirq_ns when it was entered */
};

struct {
    __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, int);
    __type(value, struct task_state);
} kt_tasks SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, KT_ROLES * KT_FAMILIES);
    __type(key, __u32);
    __type(value, struct kt_calls);
} kt_calls SEC(".maps");

/* role -> its threads' time on a CPU in the window (ktrace.h's struct kt_on_cpu) */
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, KT_ROLES);
    __type(key, __u32);
    __type(value, struct kt_on_cpu);
} kt_on_cpu SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct kt_cpu);
} kt_cpu SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, KT_FUNCTIONS);
    __type(key, __u32);
    __type(value, struct kt_fn);
} kt_fns SEC(".maps");

/* softirq-context functions' calls in progress, per CPU */
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, KT_FUNCTIONS);
    __type(key, __u32);
    __type(value, struct kt_fn_stack);
} kt_fn_stacks SEC(".maps");

/* floor(log2(v)), 0 for 0, capped to the histogram */
static __always_inline __u32 bucket_of(__u64 v)
{
    __u32 b = 0;
    if (v >> 32) { v >>= 32; b += 32; }
    if (v >> 16) { v >>= 16; b += 16; }
    if (v >> 8) { v >>= 8; b += 8; }
    if (v >> 4) { v >>= 4; b += 4; }
    if (v >> 2) { v >>= 2; b += 2; }
    if (v >> 1) b += 1;
    return b < KT_HIST_BUCKETS ? b : KT_HIST_BUCKETS - 1;
}

/* The current thread's state if it belongs to a measured tree (learnt once, then kept). */
static __always_inline struct task_state *member_state(struct kt_events *e)
{
    struct task_struct *task = bpf_get_current_task_btf();
    struct task_state *state = bpf_task_storage_get(&kt_tasks, task, 0,
                                                    BPF_LOCAL_STORAGE_GET_F_CREATE);
    if (!state) {
        e->untimed++;
        return NULL;
    }
    if (state->membership == UNKNOWN) {
        __u32 tgid = task->tgid;
        __u32 *role = bpf_map_lookup_elem(&kt_tgids, &tgid);
        state->membership = role ? MEMBER : STRANGER;
        state->role = role ? *role : 0;
    }
    return state->membership == MEMBER ? state : NULL;
}

/* The current thread of a measured tree runs, yet its switch back in went unreported (a kernel
 * may not report some tasks' switches out, and so the switch to the task after them): it got
 * the CPU at its pick, which the kernel's account of its run since then dates. Without this,
 * its next switch out would overwrite the time it went off, and that time count as the call's.
 * Its time on the CPU is counted from the same instant (on_cpu_until). */
static __always_inline void back_on_cpu(struct kt_events *e, struct task_state *state,
                                        struct task_struct *task, __u64 now)
{
    if (!state->off_since_ns)
        return;
    __u64 picked = now - run_since_picked(task);
    if (picked > state->off_since_ns)
        state->off_cpu_ns += picked - state->off_since_ns;
    state->on_since_ns = picked > state->off_since_ns ? picked : state->off_since_ns;
    state->off_since_ns = 0;
    e->untraced_switches++;
}

/* A measured thread's time on the CPU up to now, added to its role's; still_on: it runs on
 * (counted from now next time), else it goes off. Not seen on the CPU yet (running since before
 * the window, or its switch in went unreported), it is counted from its pick, as the kernel
 * dates it, and never from before the window. Every traced call's on-CPU time lies between its
 * entry and its return, both of which count up to themselves: no call's kernel_ns, nor any
 * sum of them, can pass its role's on-CPU time. */
static __always_inline void on_cpu_until(struct task_state *state, struct task_struct *task,
                                         __u64 now, bool still_on)
{
    __u64 since = state->on_since_ns;
    if (!since) {
        __u64 ran = run_since_picked(task);
        since = now > ran ? now - ran : 0;
        if (since < counting_since_ns)
            since = counting_since_ns;
    }
    __u32 role = state->role;
    struct kt_on_cpu *on = bpf_map_lookup_elem(&kt_on_cpu, &role);
    if (on && now > since)
        on->ns += now - since;
    state->on_since_ns = still_on ? now : 0;
}

/* A task's state if it belongs to a measured tree: its storage, or, for a task that has none
 * yet (one that made no traced call, a kernel thread), made once its tgid is found among the
 * trees'. A stranger's switch costs a lookup and updates no map. */
static __always_inline struct task_state *tree_state(struct task_struct *task)
{
    struct task_state *state = bpf_task_storage_get(&kt_tasks, task, 0, 0);
    if (state)
        return state->membership == MEMBER ? state : NULL;
    __u32 tgid = task->tgid;
    __u32 *role = bpf_map_lookup_elem(&kt_tgids, &tgid);
    if (!role)
        return NULL;
    __u16 found = (__u16)*role;
    state = bpf_task_storage_get(&kt_tasks, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
    if (state) {
        state->membership = MEMBER;
        state->role = found;
    }
    return state;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(kt_sys_enter, struct pt_regs *regs, long id)
{
    struct kt_events *e = counted_run();
    if (!e || id < 0 || id >= KT_MAX_SYSCALL)
        return 0;
    __u32 nr = id;
    __u32 *family = bpf_map_lookup_elem(&kt_syscall_family, &nr);
    if (!family || *family == 0)
        return 0;
    struct task_state *state = member_state(e);
    if (!state)
        return 0;
    __u64 now = bpf_ktime_get_ns();
    on_cpu_until(state, bpf_get_current_task_btf(), now, true);
    state->slot = state->role * KT_FAMILIES + (*family - 1);
    state->off_since_ns = state->off_cpu_ns = state->softirq_ns = 0;
    state->entered_ns = now;
    return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(kt_sys_exit, struct pt_regs *regs, long ret)
{
    struct kt_events *e = counted_run();
    if (!e)
        return 0;
    struct task_state *state = bpf_task_storage_get(&kt_tasks, bpf_get_current_task_btf(), 0,
                                                    0);
    if (!state || !state->entered_ns)
        return 0;
    __u64 now = bpf_ktime_get_ns();
    back_on_cpu(e, state, bpf_get_current_task_btf(), now);
    on_cpu_until(state, bpf_get_current_task_btf(), now, true);
    __u64 elapsed = now - state->entered_ns;
    state->entered_ns = 0;
    __u64 away = state->off_cpu_ns + state->softirq_ns;
    __u64 own = elapsed > away ? elapsed - away : 0;
    __u32 slot = state->slot;
    struct kt_calls *c = bpf_map_lookup_elem(&kt_calls, &slot);
    if (!c)
        return 0;
    c->calls++;
    c->kernel_ns += own;
    c->off_cpu_ns += state->off_cpu_ns;
    c->softirq_ns += state->softirq_ns;
    if (ret > 0)
        c->returned += ret;
    else if (ret < 0)
        c->errors++;
    __u32 b = bucket_of(own);
    if (b < KT_HIST_BUCKETS)
        c->hist[b]++;
    traced(e);
    return 0;
}

/* Time a traced call spends switched out (asleep in the dispatch call, or preempted) is not
 * the kernel's work for it; the measured threads' slices on the CPU are their on-CPU time. */
SEC("tp_btf/sched_switch")
int BPF_PROG(kt_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
    struct kt_events *e = counted_run();
    if (!e)
        return 0;
    __u64 now = 0;
    struct task_state *out = tree_state(prev);
    if (out) {
        now = bpf_ktime_get_ns();
        if (out->entered_ns)
            back_on_cpu(e, out, prev, now);
        on_cpu_until(out, prev, now, false);
        if (out->entered_ns)
            out->off_since_ns = now;
        traced(e);
    }
    struct task_state *in = tree_state(next);
    if (in) {
        if (!now)
            now = bpf_ktime_get_ns();
        if (in->entered_ns && in->off_since_ns) {
            in->off_cpu_ns += now - in->off_since_ns;
            in->off_since_ns = 0;
        }
        in->on_since_ns = now;
    }
    return 0;
}

/* The network's softirqs only: the others (timers, RCU, scheduling) are left in the time of
 * the call they interrupt, as in the papers' profiles. */
static __always_inline bool network(unsigned int vec)
{
    return vec == KT_NET_RX_SOFTIRQ || vec == KT_NET_TX_SOFTIRQ;
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(kt_softirq_entry, unsigned int vec)
{
    if (!network(vec) || !counted_run())
        return 0;
    __u32 zero = 0;
    struct kt_cpu *c = bpf_map_lookup_elem(&kt_cpu, &zero);
    if (c) {
        c->softirq_start_ns = bpf_ktime_get_ns();
        c->softirq_vec = vec;
    }
    return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(kt_softirq_exit, unsigned int vec)
{
    if (!network(vec))
        return 0;
    struct kt_events *e = counted_run();
    __u32 zero = 0;
    struct kt_cpu *c = e ? bpf_map_lookup_elem(&kt_cpu, &zero) : NULL;
    if (!c || !c->softirq_start_ns || c->softirq_vec != vec)
        return 0; /* entered before the window */
    __u64 spent = bpf_ktime_get_ns() - c->softirq_start_ns;
    c->softirq_start_ns = 0;
    if (vec == KT_NET_RX_SOFTIRQ) {
        c->net_rx_ns += spent;
        c->net_rx_count++;
    } else {
        c->net_tx_ns += spent;
        c->net_tx_count++;
    }
    traced(e);
    /* ran on the time of a traced call that it interrupted: not that call's work */
    struct task_struct *current = bpf_get_current_task_btf();
    struct task_state *state = bpf_task_storage_get(&kt_tasks, current, 0, 0);
    if (state && state->entered_ns) {
        back_on_cpu(e, state, current, bpf_ktime_get_ns());
        state->softirq_ns += spent;
    }
    return 0;
}

SEC("tp_btf/netif_receive_skb")
int BPF_PROG(kt_netif_receive_skb, struct sk_buff *skb)
{
    struct kt_events *e = counted_run();
    __u32 zero = 0;
    struct kt_cpu *c = e ? bpf_map_lookup_elem(&kt_cpu, &zero) : NULL;
    if (c) {
        c->rx_packets++;
        traced(e);
    }
    return 0;
}

SEC("tp_btf/net_dev_xmit")
int BPF_PROG(kt_net_dev_xmit, struct sk_buff *skb, int rc, struct net_device *dev, unsigned int len)
{
    struct kt_events *e = counted_run();
    __u32 zero = 0;
    struct kt_cpu *c = e ? bpf_map_lookup_elem(&kt_cpu, &zero) : NULL;
    if (c && rc == 0) { /* NETDEV_TX_OK: the device took it */
        c->tx_packets++;
        traced(e);
    }
    return 0;
}

/* Function grain (fentry/fexit): each call's time from entry to return, its callees included.
 * A process-context function counts for the measured trees only, and what it spent switched
 * out or in network softirqs inside a traced system call is taken off, as for the calls
 * above; a softirq-context one counts machine-wide, per CPU, nested calls of itself each
 * timed (their time is inside the outer call's too). */
static __always_inline void add_call(struct kt_events *e, __u32 fn, __u64 ns)
{
    struct kt_fn *f = bpf_map_lookup_elem(&kt_fns, &fn);
    if (!f)
        return;
    f->calls++;
    f->kernel_ns += ns;
    traced(e);
}

static __always_inline int function_entered(__u32 fn, enum kt_context context)
{
    struct kt_events *e = counted_run();
    if (!e || fn >= KT_FUNCTIONS)
        return 0;
    if (context == KT_IN_PROCESS) {
        struct task_state *state = member_state(e);
        if (state) {
            state->fn_away_ns[fn] = state->off_cpu_ns + state->softirq_ns;
            state->fn_entered_ns[fn] = bpf_ktime_get_ns();
        }
        return 0;
    }
    struct kt_fn_stack *stack = bpf_map_lookup_elem(&kt_fn_stacks, &fn);
    if (!stack)
        return 0;
    __u64 depth = stack->depth;
    if (depth < KT_FN_DEPTH)
        stack->entered_ns[depth & (KT_FN_DEPTH - 1)] = bpf_ktime_get_ns();
    stack->depth = depth + 1;
    return 0;
}

static __always_inline int function_returned(__u32 fn, enum kt_context context)
{
    struct kt_events *e = counted_run();
    if (!e || fn >= KT_FUNCTIONS)
        return 0;
    __u64 now = bpf_ktime_get_ns();
    if (context == KT_IN_PROCESS) {
        struct task_struct *current = bpf_get_current_task_btf();
        struct task_state *state = bpf_task_storage_get(&kt_tasks, current, 0, 0);
        if (!state || !state->fn_entered_ns[fn])
            return 0; /* a stranger's, or entered before the window */
        back_on_cpu(e, state, current, now);
        __u64 elapsed = now - state->fn_entered_ns[fn];
        __u64 away = state->off_cpu_ns + state->softirq_ns - state->fn_away_ns[fn];
        state->fn_entered_ns[fn] = 0;
        add_call(e, fn, elapsed > away ? elapsed - away : 0);
        return 0;
    }
    struct kt_fn_stack *stack = bpf_map_lookup_elem(&kt_fn_stacks, &fn);
    if (!stack || stack->depth == 0)
        return 0; /* entered before the window (or on another CPU) */
    __u64 depth = --stack->depth;
    if (depth < KT_FN_DEPTH) {
        add_call(e, fn, now - stack->entered_ns[depth & (KT_FN_DEPTH - 1)]);
    } else {
        struct kt_fn *f = bpf_map_lookup_elem(&kt_fns, &fn);
        if (f)
            f->untimed++;
    }
    return 0;
}

#define KT_FUNCTION_PROGRAMS(name, context)                  \
    SEC("fentry/" #name)                                     \
    int BPF_PROG(kt_in_##name)                               \
    {                                                        \
        return function_entered(KT_FN_##name, context);      \
    }                                                        \
    SEC("fexit/" #name)                                      \
    int BPF_PROG(kt_out_##name)                              \
    {                                                        \
        return function_returned(KT_FN_##name, context);     \
    }
KT_FUNCTION_LIST(KT_FUNCTION_PROGRAMS)
