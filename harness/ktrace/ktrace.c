/* wb-ktrace: times a process tree's event-dispatch and I/O system calls inside the kernel,
 * and every CPU's network softirqs, over exactly the window it is told; prints JSON.
 *
 *   wb-ktrace --pid PID [--pid PID ...] [--generator-pid PID ...] [--duration S]
 *   wb-ktrace --probe | --describe | --help
 *
 * Without --duration it is driven on stdin, as perf is over its control fifo: it loads and
 * verifies its programs, follows the trees' forks from then on, and prints "ready"; "start"
 * attaches the window's programs and answers "started"; "stop" detaches them, prints the
 * JSON document and exits. "start NS" and "stop NS" switch counting on and off at that
 * CLOCK_MONOTONIC instant (the caller's window edge; sent ahead of it, they wait for it).
 * End of input or a signal ends it without a document (loader.c: run_window). Nothing is
 * pinned: every program, map and link is held by this process's descriptors only, so the
 * kernel frees them when it exits, however it exits (SIGKILL included). tracefs and bpffs
 * are never needed (tp_btf programs attach by BTF name), so nothing is mounted.
 *
 * Function grain (fentry/fexit on ktrace.h's KT_FUNCTION_LIST) is loaded only where an fentry
 * program loads and attaches here (fentry_loads); a function this kernel lacks (inlined,
 * renamed) or will not trace is skipped and named, never fatal.
 *
 * Each document gives the CLOCK_MONOTONIC edges it counted over ("window": start_ns, end_ns:
 * bpf_ktime_get_ns's clock, read as counting was switched on and after it was switched off).
 *
 * Why it cannot run is one line on stderr and its own exit status (loader.h: kt_exit). */
#include <errno.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "ktrace.h"
#include "ktrace.skel.h"
#include "loader.h"

struct family {
    const char *name;
    const char *returns; /* what its positive return values add up to */
    int syscalls[6];     /* END ends the list; ABSENT: not on this architecture */
    const char *syscall_names;
};

#define END -2
/* arm64 has no select, poll, epoll_wait or accept: only their newer forms */
#define ABSENT -1
#ifdef SYS_select
#define NR_SELECT SYS_select
#else
#define NR_SELECT ABSENT
#endif
#ifdef SYS_poll
#define NR_POLL SYS_poll
#else
#define NR_POLL ABSENT
#endif
#ifdef SYS_epoll_wait
#define NR_EPOLL_WAIT SYS_epoll_wait
#else
#define NR_EPOLL_WAIT ABSENT
#endif
#ifdef SYS_epoll_pwait2
#define NR_EPOLL_PWAIT2 SYS_epoll_pwait2
#else
#define NR_EPOLL_PWAIT2 ABSENT
#endif
#ifdef SYS_accept
#define NR_ACCEPT SYS_accept
#else
#define NR_ACCEPT ABSENT
#endif
#ifndef SYS_io_uring_enter
#define SYS_io_uring_enter 426
#endif

/* In enum kt_family's order. */
static const struct family FAMILIES[KT_FAMILIES] = {
    [KT_SELECT] = {"select", "ready descriptors", {NR_SELECT, SYS_pselect6, END},
                   "select, pselect6"},
    [KT_POLL] = {"poll", "ready descriptors", {NR_POLL, SYS_ppoll, END}, "poll, ppoll"},
    [KT_EPOLL_WAIT] = {"epoll_wait", "ready descriptors",
                       {NR_EPOLL_WAIT, SYS_epoll_pwait, NR_EPOLL_PWAIT2, END},
                       "epoll_wait, epoll_pwait, epoll_pwait2"},
    [KT_IO_URING_ENTER] = {"io_uring_enter", "submissions consumed", {SYS_io_uring_enter, END},
                           "io_uring_enter"},
    [KT_SIGTIMEDWAIT] = {"sigtimedwait", "signal numbers", {SYS_rt_sigtimedwait, END},
                         "rt_sigtimedwait"},
    [KT_ACCEPT] = {"accept", "descriptor numbers", {NR_ACCEPT, SYS_accept4, END},
                   "accept, accept4"},
    [KT_READ] = {"read", "bytes", {SYS_read, SYS_readv, SYS_recvfrom, SYS_recvmsg, END},
                 "read, readv, recvfrom, recvmsg"},
    [KT_WRITE] = {"write", "bytes", {SYS_write, SYS_writev, SYS_sendto, SYS_sendmsg, END},
                  "write, writev, sendto, sendmsg"},
};

/* The functions' names and contexts, in enum kt_function's order. */
#define KT_FUNCTION_NAME(name, context) #name,
static const char *const FUNCTION_NAMES[KT_FUNCTIONS] = {KT_FUNCTION_LIST(KT_FUNCTION_NAME)};
#undef KT_FUNCTION_NAME
#define KT_FUNCTION_CONTEXT(name, context) context,
static const enum kt_context FUNCTION_CONTEXTS[KT_FUNCTIONS] = {
    KT_FUNCTION_LIST(KT_FUNCTION_CONTEXT)};
#undef KT_FUNCTION_CONTEXT
static const char *const CONTEXTS[] = {[KT_IN_PROCESS] = "process", [KT_IN_SOFTIRQ] = "softirq"};

/* Where a function became an inline wrapper, the function its body now is: timed in its
 * stead where the named one is not in the kernel's BTF. Since Linux 5.19 dev_queue_xmit(skb)
 * is `return __dev_queue_xmit(skb, NULL);` (dev_queue_xmit_accel, macvlan's offload, is its
 * only other caller). */
static const char *const FUNCTION_BODIES[KT_FUNCTIONS] = {
    [KT_FN_dev_queue_xmit] = "__dev_queue_xmit",
};

/* One function's fentry/fexit pair here: loaded (why empty) or skipped (why says why);
 * timed_as: the kernel function it is attached to. */
struct function {
    struct bpf_program *entry, *exit;
    struct bpf_link *links[2];
    const char *timed_as;
    char why[1024];
};

/* Every tracepoint the programs attach to (its BTF type is btf_trace_NAME). */
static const char *const TRACEPOINTS[] = {
    "sched_process_fork", "sys_enter", "sys_exit", "sched_switch", "softirq_entry",
    "softirq_exit", "netif_receive_skb", "net_dev_xmit",
};

const char TOOL_NAME[] = "wb-ktrace";
const char TOOL_USAGE[] =
    "usage: wb-ktrace --pid PID [--pid PID ...] [--generator-pid PID ...] "
    "[--duration SECONDS] [--hooks GROUP[,GROUP...]]\n"
    "       wb-ktrace --probe | --describe\n"
    "  --pid            a process whose tree is measured (the server), at most 64\n"
    "  --generator-pid  a process whose tree is traced apart, as the generator\n"
    "  --duration       count for this long (or until SIGINT/SIGTERM), then print\n"
    "                   the document; without it: ready / start [NS] / stop [NS] on stdin\n"
    "  --hooks          attach only these groups: calls, switch, softirq, packets,\n"
    "                   functions (default all); what each costs the traced machine\n"
    "                   (docs/bench-ktrace-hooks.md), not a document to read: the left-out\n"
    "                   groups' figures are missing from it, not null\n"
    "  --probe          what this machine allows (one JSON line), then exit\n"
    "  --describe       the families and exit statuses (JSON), then exit\n"
    "exit: 0 ok, 1 failed, 2 usage, 3 no CAP_BPF/CAP_SYS_ADMIN, 4 no BTF, "
    "5 a tracepoint missing\n";

static void describe(void)
{
    printf("{\"families\": [");
    for (int f = 0; f < KT_FAMILIES; f++)
        printf("%s{\"name\": \"%s\", \"syscalls\": \"%s\", \"returned\": \"%s\", "
               "\"dispatch\": %s}", f ? ", " : "", FAMILIES[f].name, FAMILIES[f].syscall_names,
               FAMILIES[f].returns, f <= KT_LAST_DISPATCH ? "true" : "false");
    printf("], \"functions\": [");
    for (int f = 0; f < KT_FUNCTIONS; f++)
        printf("%s{\"name\": \"%s\", \"context\": \"%s\"}", f ? ", " : "", FUNCTION_NAMES[f],
               CONTEXTS[FUNCTION_CONTEXTS[f]]);
    printf("], \"roles\": [\"%s\", \"%s\"], \"hist_buckets\": %d, \"exit\": {\"failed\": %d, "
           "\"usage\": %d, \"no_capability\": %d, \"no_btf\": %d, \"no_tracepoint\": %d}}\n",
           ROLES[0], ROLES[1], KT_HIST_BUCKETS, EXIT_FAILED, EXIT_USAGE, EXIT_NO_CAPABILITY,
           EXIT_NO_BTF, EXIT_NO_TRACEPOINT);
}

/* Whether an fentry program may be loaded on function and attached here; why not. */
static bool fentry_loads(const struct btf *vmlinux, const char *function, char *why,
                         size_t size)
{
    int id = vmlinux ? btf__find_by_name_kind(vmlinux, function, BTF_KIND_FUNC) : -1;
    if (id < 0) {
        snprintf(why, size, "no %s in this kernel's BTF (inlined or renamed)", function);
        return false;
    }
    struct bpf_insn return_zero[] = {
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
        {.code = BPF_JMP | BPF_EXIT},
    };
    LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = BPF_TRACE_FENTRY,
                .attach_btf_id = id);
    int prog = bpf_prog_load(BPF_PROG_TYPE_TRACING, "wb_ktrace_probe", "GPL", return_zero, 2,
                             &opts);
    if (prog < 0) {
        snprintf(why, size, "loading an fentry program on %s: %s", function, strerror(errno));
        return false;
    }
    int link = bpf_link_create(prog, 0, BPF_TRACE_FENTRY, NULL);
    int saved = errno;
    close(prog);
    if (link < 0) {
        snprintf(why, size, "attaching an fentry program to %s: %s", function, strerror(saved));
        return false;
    }
    close(link);
    snprintf(why, size, "fentry loads and attaches (%s)", function);
    return true;
}

/* fentry here at all, tried on do_select (every kernel the papers' select runs on has it);
 * fentry_detail says what was found. */
static char fentry_detail[256];

static bool fentry_allowed(void)
{
    struct btf *vmlinux = btf__load_vmlinux_btf();
    bool allowed = fentry_loads(vmlinux, "do_select", fentry_detail, sizeof fentry_detail);
    btf__free(vmlinux);
    return allowed;
}

/* Before the object loads: each function's pair stays unloaded unless fentry is allowed and
 * an fentry program loads and attaches on it (or, where it is not in the BTF, on its body)
 * here. */
static void choose_functions(struct ktrace_bpf *skel, struct function *functions,
                             bool fentry)
{
#define KT_FUNCTION_PAIR(name, context)                                  \
    functions[KT_FN_##name] = (struct function){                        \
        .entry = skel->progs.kt_in_##name, .exit = skel->progs.kt_out_##name};
    KT_FUNCTION_LIST(KT_FUNCTION_PAIR)
#undef KT_FUNCTION_PAIR
    struct btf *vmlinux = fentry ? btf__load_vmlinux_btf() : NULL;
    for (int f = 0; f < KT_FUNCTIONS; f++) {
        struct function *fn = &functions[f];
        fn->timed_as = FUNCTION_NAMES[f];
        const char *body = FUNCTION_BODIES[f];
        if (fentry && body &&
            btf__find_by_name_kind(vmlinux, fn->timed_as, BTF_KIND_FUNC) < 0) {
            char whole[sizeof fn->why];
            if (fentry_loads(vmlinux, body, whole, sizeof whole) &&
                bpf_program__set_attach_target(fn->entry, 0, body) == 0 &&
                bpf_program__set_attach_target(fn->exit, 0, body) == 0)
                fn->timed_as = body;
        }
        if (!fentry)
            snprintf(fn->why, sizeof fn->why, "fentry refused here (%s)", fentry_detail);
        else if (fentry_loads(vmlinux, fn->timed_as, fn->why, sizeof fn->why))
            fn->why[0] = '\0';
        bpf_program__set_autoload(fn->entry, fn->why[0] == '\0');
        bpf_program__set_autoload(fn->exit, fn->why[0] == '\0');
    }
    btf__free(vmlinux);
}

static void fill_families(int map_fd)
{
    for (__u32 f = 0; f < KT_FAMILIES; f++)
        for (const int *nr = FAMILIES[f].syscalls; *nr != END; nr++) {
            if (*nr == ABSENT || *nr >= KT_MAX_SYSCALL)
                continue;
            __u32 key = (__u32)*nr, value = f + 1;
            bpf_map_update_elem(map_fd, &key, &value, BPF_ANY);
        }
}

/* The loaded functions' pairs; one that will not attach is skipped and named, not fatal. */
static void attach_functions(struct function *functions)
{
    for (int f = 0; f < KT_FUNCTIONS; f++) {
        struct function *fn = &functions[f];
        if (fn->why[0])
            continue;
        struct bpf_program *pair[2] = {fn->entry, fn->exit};
        for (int i = 0; i < 2 && !fn->why[0]; i++) {
            fn->links[i] = bpf_program__attach(pair[i]);
            if (!fn->links[i]) {
                snprintf(fn->why, sizeof fn->why, "attaching %s: %s (%s)",
                         bpf_program__name(pair[i]), strerror(errno), libbpf_said);
                fprintf(stderr, "wb-ktrace: %s skipped: %s\n", FUNCTION_NAMES[f], fn->why);
            }
        }
        if (fn->why[0])
            destroy_links(fn->links, 2);
    }
}

static void detach_functions(struct function *functions)
{
    for (int f = 0; f < KT_FUNCTIONS; f++)
        destroy_links(functions[f].links, 2);
}

/* Where fentry works: the functions skipped for a reason of their own (else: none). */
static void print_skipped(const struct function *functions, bool fentry)
{
    printf("{");
    for (int f = 0, printed = 0; f < KT_FUNCTIONS; f++) {
        if (!fentry || !functions[f].why[0])
            continue;
        printf("%s\"%s\": ", printed++ ? ", " : "", FUNCTION_NAMES[f]);
        print_json_string(functions[f].why);
    }
    printf("}");
}

/* The functions timed in the stead of one not in the BTF: {name: body}. */
static void print_timed_as(const struct function *functions)
{
    printf("{");
    for (int f = 0, printed = 0; f < KT_FUNCTIONS; f++)
        if (!functions[f].why[0] && functions[f].timed_as != FUNCTION_NAMES[f])
            printf("%s\"%s\": \"%s\"", printed++ ? ", " : "", FUNCTION_NAMES[f],
                   functions[f].timed_as);
    printf("}");
}

/* The window's programs by the group of tracepoints each is attached to: --hooks attaches
 * some groups only, to measure what each costs. */
enum hook_group { HOOK_CALLS, HOOK_SWITCH, HOOK_SOFTIRQ, HOOK_PACKETS, HOOK_FUNCTIONS, HOOK_GROUPS };
static const char *const HOOK_GROUP_NAMES[HOOK_GROUPS] = {"calls", "switch", "softirq", "packets",
                                                          "functions"};
#define ALL_HOOKS ((1u << HOOK_GROUPS) - 1)

/* What a window holds: the skeleton, the functions' pairs, the calls' and softirqs' links,
 * the groups to attach. */
#define WINDOW_PROGRAMS 7
struct calls_window {
    struct ktrace_bpf *skel;
    struct function *functions;
    struct bpf_link *links[WINDOW_PROGRAMS];
    unsigned hooks; /* bit per enum hook_group */
};

/* --hooks: a comma-separated list of group names, as a bit set. */
static unsigned parse_hooks(const char *list)
{
    unsigned hooks = 0;
    char copy[128];
    snprintf(copy, sizeof copy, "%s", list);
    for (char *saved, *name = strtok_r(copy, ",", &saved); name; name = strtok_r(NULL, ",", &saved)) {
        int g = 0;
        while (g < HOOK_GROUPS && strcmp(name, HOOK_GROUP_NAMES[g]) != 0)
            g++;
        if (g == HOOK_GROUPS)
            usage_error("--hooks %s: %s is not a group (the usage lists them)", list, name);
        hooks |= 1u << g;
    }
    if (!hooks)
        usage_error("--hooks: give at least one group");
    return hooks;
}

/* Attaches the window's programs and, at the instant at (0: at once), switches counting on:
 * the instant it did (CLOCK_MONOTONIC, bpf_ktime_get_ns's clock), before which nothing counts.
 * The programs are attached first, so that attaching takes none of the window. */
static uint64_t window_opens(void *held, uint64_t at)
{
    struct calls_window *window = held;
    struct ktrace_bpf *skel = window->skel;
    const struct {
        struct bpf_program *program;
        enum hook_group group;
    } hooked[WINDOW_PROGRAMS] = {
        {skel->progs.kt_sys_enter, HOOK_CALLS}, {skel->progs.kt_sys_exit, HOOK_CALLS},
        {skel->progs.kt_sched_switch, HOOK_SWITCH}, {skel->progs.kt_softirq_entry, HOOK_SOFTIRQ},
        {skel->progs.kt_softirq_exit, HOOK_SOFTIRQ},
        {skel->progs.kt_netif_receive_skb, HOOK_PACKETS}, {skel->progs.kt_net_dev_xmit, HOOK_PACKETS},
    };
    struct bpf_program *programs[WINDOW_PROGRAMS];
    size_t count = 0;
    for (size_t i = 0; i < WINDOW_PROGRAMS; i++)
        if (window->hooks & (1u << hooked[i].group))
            programs[count++] = hooked[i].program;
    attach_programs(programs, count, window->links);
    if (window->hooks & (1u << HOOK_FUNCTIONS))
        attach_functions(window->functions);
    sleep_until(at);
    uint64_t start = now_ns();
    skel->bss->counting_since_ns = start;
    skel->bss->counting = 1;
    return start;
}

/* At the instant at (0: at once), switches counting off, then detaches: the instant counting
 * had stopped by (CLOCK_MONOTONIC). */
static uint64_t window_closes(void *held, uint64_t at)
{
    struct calls_window *window = held;
    sleep_until(at);
    window->skel->bss->counting = 0;
    uint64_t end = now_ns();
    destroy_links(window->links, WINDOW_PROGRAMS);
    detach_functions(window->functions);
    return end;
}

static void print_calls(const struct kt_calls *c)
{
    printf("{\"calls\": %llu, \"kernel_ns\": %llu, \"off_cpu_ns\": %llu, \"softirq_ns\": %llu, "
           "\"returned\": %llu, \"errors\": %llu, \"hist_log2_ns\": [",
           c->calls, c->kernel_ns, c->off_cpu_ns, c->softirq_ns, c->returned, c->errors);
    for (int b = 0; b < KT_HIST_BUCKETS; b++)
        printf("%s%llu", b ? ", " : "", c->hist[b]);
    printf("]}");
}

/* The traced functions' calls, CPUs summed: {name: {timed_as, context, calls, kernel_ns,
 * untimed}}. */
static void print_functions(struct ktrace_bpf *skel, const struct function *functions, int cpus)
{
    struct kt_fn *per_cpu = calloc((size_t)cpus, sizeof *per_cpu);
    if (!per_cpu)
        die(EXIT_FAILED, "out of memory");
    printf("{");
    for (__u32 f = 0, printed = 0; f < KT_FUNCTIONS; f++) {
        if (functions[f].why[0])
            continue;
        if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.kt_fns), &f, per_cpu) != 0)
            die(EXIT_FAILED, "reading the functions map: %s", strerror(errno));
        struct kt_fn sum;
        sum_cpus(&sum, per_cpu, sizeof sum, cpus);
        printf("%s\"%s\": {\"timed_as\": \"%s\", \"context\": \"%s\", \"calls\": %llu, "
               "\"kernel_ns\": %llu, \"untimed\": %llu}", printed++ ? ", " : "",
               FUNCTION_NAMES[f], functions[f].timed_as, CONTEXTS[FUNCTION_CONTEXTS[f]],
               sum.calls, sum.kernel_ns, sum.untimed);
    }
    printf("}");
    free(per_cpu);
}

/* Each role's threads' time on a CPU, CPUs summed: {role: ns}. */
static void print_on_cpu(struct ktrace_bpf *skel, int roles, int cpus)
{
    struct kt_on_cpu *per_cpu = calloc((size_t)cpus, sizeof *per_cpu);
    if (!per_cpu)
        die(EXIT_FAILED, "out of memory");
    printf("{");
    for (__u32 role = 0; role < (__u32)roles; role++) {
        if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.kt_on_cpu), &role, per_cpu) != 0)
            die(EXIT_FAILED, "reading the on-CPU map: %s", strerror(errno));
        struct kt_on_cpu sum;
        sum_cpus(&sum, per_cpu, sizeof sum, cpus);
        printf("%s\"%s\": %llu", role ? ", " : "", ROLES[role], sum.ns);
    }
    printf("}");
    free(per_cpu);
}

static void print_document(struct ktrace_bpf *skel, const struct function *functions,
                           bool fentry, struct window window, bool generator)
{
    int cpus = possible_cpus();
    struct kt_calls *per_cpu = calloc((size_t)cpus, sizeof *per_cpu);
    struct kt_cpu *cpu_values = calloc((size_t)cpus, sizeof *cpu_values);
    if (!per_cpu || !cpu_values)
        die(EXIT_FAILED, "out of memory");
    printf("{");
    print_window(window);
    printf(", \"attach\": \"tp_btf\", \"fentry\": %s, \"fentry_detail\": ",
           fentry ? "true" : "false");
    print_json_string(fentry_detail);
    printf(", \"functions\": ");
    print_functions(skel, functions, cpus);
    printf(", \"functions_skipped\": ");
    print_skipped(functions, fentry);
    printf(", \"on_cpu_ns\": ");
    print_on_cpu(skel, generator ? KT_ROLES : 1, cpus);
    printf(", \"roles\": {");
    int calls_fd = bpf_map__fd(skel->maps.kt_calls);
    for (int role = 0; role < (generator ? KT_ROLES : 1); role++) {
        printf("%s\"%s\": {", role ? ", " : "", ROLES[role]);
        for (int f = 0; f < KT_FAMILIES; f++) {
            __u32 slot = (__u32)(role * KT_FAMILIES + f);
            if (bpf_map_lookup_elem(calls_fd, &slot, per_cpu) != 0)
                die(EXIT_FAILED, "reading the calls map: %s", strerror(errno));
            struct kt_calls sum;
            sum_cpus(&sum, per_cpu, sizeof sum, cpus);
            printf("%s\"%s\": ", f ? ", " : "", FAMILIES[f].name);
            print_calls(&sum);
        }
        printf("}");
    }
    __u32 zero = 0;
    if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.kt_cpu), &zero, cpu_values) != 0)
        die(EXIT_FAILED, "reading the per-CPU maps: %s", strerror(errno));
    printf("}, \"cpus\": [");
    for (int c = 0; c < cpus; c++) {
        const struct kt_cpu *v = &cpu_values[c];
        printf("%s{\"cpu\": %d, \"net_rx_ns\": %llu, \"net_rx_count\": %llu, "
               "\"net_tx_ns\": %llu, \"net_tx_count\": %llu, \"rx_packets\": %llu, "
               "\"tx_packets\": %llu}", c ? ", " : "", c, v->net_rx_ns, v->net_rx_count,
               v->net_tx_ns, v->net_tx_count, v->rx_packets, v->tx_packets);
    }
    printf("]");
    print_events(bpf_map__fd(skel->maps.kt_events), cpus);
    free(per_cpu);
    free(cpu_values);
}

int main(int argc, char **argv)
{
    struct common_options options = COMMON_OPTIONS_INIT;
    unsigned hooks = ALL_HOOKS;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--describe") == 0) {
            describe();
            return EXIT_OK;
        }
        if (strcmp(argv[i], "--hooks") == 0 && i + 1 < argc) {
            hooks = parse_hooks(argv[++i]);
            continue;
        }
        if (!common_option(argc, argv, &i, &options))
            usage_error("%s: unknown option or missing value", argv[i]);
    }
    if (!options.probe && options.root_count[KT_SERVER] == 0)
        usage_error("give the measured process with --pid PID");
    keep_libbpf_warnings();
    check_machine(TRACEPOINTS, sizeof TRACEPOINTS / sizeof *TRACEPOINTS);

    struct ktrace_bpf *skel = ktrace_bpf__open();
    if (!skel)
        die(EXIT_FAILED, "opening the BPF object: %s", strerror(errno));
    bool fentry = fentry_allowed();
    struct function functions[KT_FUNCTIONS];
    choose_functions(skel, functions, fentry);
    if (ktrace_bpf__load(skel) != 0)
        die_unloaded();
    struct calls_window held = {.skel = skel, .functions = functions, .hooks = hooks};
    if (options.probe) {
        /* the window's programs attach and detach once: what a point would do */
        window_opens(&held, 0);
        window_closes(&held, 0);
        ktrace_bpf__destroy(skel);
        printf("{\"tracepoints\": true, \"fentry\": %s, \"fentry_detail\": ",
               fentry ? "true" : "false");
        print_json_string(fentry_detail);
        printf(", \"functions_skipped\": ");
        print_skipped(functions, fentry);
        printf(", \"functions_timed_as\": ");
        print_timed_as(functions);
        printf("}\n");
        return EXIT_OK;
    }
    for (int f = 0; f < KT_FUNCTIONS && fentry; f++)
        if (functions[f].why[0])
            fprintf(stderr, "wb-ktrace: %s skipped: %s\n", FUNCTION_NAMES[f], functions[f].why);
        else if (functions[f].timed_as != FUNCTION_NAMES[f])
            fprintf(stderr, "wb-ktrace: %s timed as %s (not in this kernel's BTF: an inline "
                    "wrapper of it)\n", FUNCTION_NAMES[f], functions[f].timed_as);
    fill_families(bpf_map__fd(skel->maps.kt_syscall_family));
    struct bpf_link *follow = follow_trees(skel->progs.kt_follow_fork,
                                           bpf_map__fd(skel->maps.kt_tgids), &options);
    struct window window;
    if (!run_window(options.duration, window_opens, window_closes, &held, &window))
        return EXIT_OK;
    print_document(skel, functions, fentry, window, options.root_count[KT_GENERATOR] > 0);
    bpf_link__destroy(follow);
    ktrace_bpf__destroy(skel);
    return EXIT_OK;
}
