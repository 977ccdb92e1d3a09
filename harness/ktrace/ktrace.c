/* wb-ktrace: times a process tree's event-dispatch and I/O system calls inside the kernel,
 * and every CPU's network softirqs, over exactly the window it is told; prints JSON.
 *
 *   wb-ktrace --pid PID [--pid PID ...] [--generator-pid PID ...] [--duration S]
 *   wb-ktrace --who-ran CPU (--generator-pid PID ... | --pid PID ...) [--late-us US] [--duration S]
 *   wb-ktrace --probe | --describe | --help
 *
 * Without --duration it is driven on stdin, as perf is over its control fifo: it loads and
 * verifies its programs, follows the trees' forks from then on, and prints "ready"; "start"
 * attaches the window's programs and answers "started"; "stop" detaches them, prints the
 * JSON document and exits. "start NS" and "stop NS" switch counting on and off at that
 * CLOCK_MONOTONIC instant (the caller's window edge; sent ahead of it, they wait for it). End of input or a signal ends it without a document. Nothing is
 * pinned: every program, map and link is held by this process's descriptors only, so the
 * kernel frees them when it exits, however it exits (SIGKILL included). tracefs and bpffs
 * are never needed (tp_btf programs attach by BTF name), so nothing is mounted.
 *
 * Function grain (fentry/fexit on ktrace.h's KT_FUNCTION_LIST) is loaded only where an fentry
 * program loads and attaches here (fentry_loads); a function this kernel lacks (inlined,
 * renamed) or will not trace is skipped and named, never fatal.
 *
 * --who-ran CPU loads only what tells who ran on that CPU (the measured trees: the generator's,
 * or with --pid the server's; the CPU's ksoftirqd, idle, each other task by name) and how long
 * the measured threads waited for it while other tasks held it: a context switch's worth of
 * work on that CPU, none on the others.
 *
 * Each document gives the CLOCK_MONOTONIC edges it counted over ("window": start_ns, end_ns:
 * bpf_ktime_get_ns's clock, read as counting was switched on and after it was switched off).
 *
 * Why it cannot run is one line on stderr and its own exit status (kt_exit below). */
#include <errno.h>
#include <dirent.h>
#include <linux/bpf.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "ktrace.h"
#include "ktrace.skel.h"

enum kt_exit {
    EXIT_OK = 0,
    EXIT_FAILED = 1,      /* anything else (the message says what) */
    EXIT_USAGE = 2,
    EXIT_NO_CAPABILITY = 3,
    EXIT_NO_BTF = 4,
    EXIT_NO_TRACEPOINT = 5,
};

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

#define VMLINUX_BTF "/sys/kernel/btf/vmlinux"
#define MAX_ROOTS 64

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

static const char *const ROLES[KT_ROLES] = {"server", "generator"};

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
    "softirq_exit", "netif_receive_skb", "net_dev_xmit", "sched_wakeup",
};

static char libbpf_said[512]; /* libbpf's last warning: the detail of a failed load */

static int keep_warning(enum libbpf_print_level level, const char *format, va_list args)
{
    if (level == LIBBPF_DEBUG)
        return 0;
    char line[sizeof libbpf_said];
    vsnprintf(line, sizeof line, format, args);
    line[strcspn(line, "\n")] = '\0';
    if (line[0])
        memcpy(libbpf_said, line, sizeof line);
    return 0;
}

static void die(enum kt_exit status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    fputs("wb-ktrace: ", stderr);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
    exit(status);
}

/* s as a JSON string (the reasons quote libbpf and strerror) */
static void print_json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            putchar('\\');
        if ((unsigned char)*s >= 0x20)
            putchar(*s);
    }
    putchar('"');
}

static void usage(void)
{
    fputs("usage: wb-ktrace --pid PID [--pid PID ...] [--generator-pid PID ...] "
          "[--duration SECONDS]\n"
          "       wb-ktrace --who-ran CPU (--generator-pid PID ... | --pid PID ...)\n"
          "                 [--late-us US]\n"
          "                 [--duration SECONDS]\n"
          "       wb-ktrace --probe | --describe\n"
          "  --pid            a process whose tree is measured (the server), at most 64\n"
          "  --generator-pid  a process whose tree is traced apart, as the generator\n"
          "  --who-ran        only who ran on this CPU and whom the measured tree (the\n"
          "                   generator's, or with --pid the server's) waited behind\n"
          "  --late-us        with --who-ran: each wait behind others also counted past this\n"
          "  --duration       count for this long (or until SIGINT/SIGTERM), then print\n"
          "                   the document; without it: ready / start [NS] / stop [NS] on stdin\n"
          "  --probe          what this machine allows (one JSON line), then exit\n"
          "  --describe       the families and exit statuses (JSON), then exit\n"
          "exit: 0 ok, 1 failed, 2 usage, 3 no CAP_BPF/CAP_SYS_ADMIN, 4 no BTF, "
          "5 a tracepoint missing\n", stderr);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Until CLOCK_MONOTONIC reads at (at once if it has, or at is 0). */
static void sleep_until(uint64_t at)
{
    struct timespec when = {(time_t)(at / 1000000000ull), (long)(at % 1000000000ull)};
    while (at > now_ns() && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &when, NULL) == EINTR)
        ;
}

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

/* Loading tracing programs needs CAP_BPF with CAP_PERFMON, or CAP_SYS_ADMIN. */
static bool capable_of_bpf(void)
{
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2] = {{0}};
    if (syscall(SYS_capget, &header, data) != 0)
        return false;
    unsigned long long effective =
        (unsigned long long)data[1].effective << 32 | data[0].effective;
    bool admin = effective >> CAP_SYS_ADMIN & 1;
    bool bpf = (effective >> CAP_BPF & 1) && (effective >> CAP_PERFMON & 1);
    return admin || bpf;
}

static const char CAPABILITY_FIX[] =
    "loading BPF programs needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN; fix: run as root "
    "(or setcap cap_bpf,cap_perfmon+ep build/bin/wb-ktrace)";

/* The checks any use starts with: capability, BTF, every tracepoint. */
static void check_machine(void)
{
    if (!capable_of_bpf())
        die(EXIT_NO_CAPABILITY, "%s", CAPABILITY_FIX);
    if (access(VMLINUX_BTF, R_OK) != 0)
        die(EXIT_NO_BTF, "%s: %s: this kernel has no BTF; fix: a kernel built with "
            "CONFIG_DEBUG_INFO_BTF=y (Debian's and most distributions' are)", VMLINUX_BTF,
            strerror(errno));
    struct btf *vmlinux = btf__load_vmlinux_btf();
    if (!vmlinux)
        die(EXIT_NO_BTF, "cannot read %s: %s; fix: a kernel built with CONFIG_DEBUG_INFO_BTF=y",
            VMLINUX_BTF, strerror(errno));
    for (size_t i = 0; i < sizeof TRACEPOINTS / sizeof *TRACEPOINTS; i++) {
        char type[128];
        snprintf(type, sizeof type, "btf_trace_%s", TRACEPOINTS[i]);
        if (btf__find_by_name_kind(vmlinux, type, BTF_KIND_TYPEDEF) < 0) {
            btf__free(vmlinux);
            die(EXIT_NO_TRACEPOINT, "tracepoint %s is not in this kernel (no %s in its BTF); "
                "fix: a kernel with it (CONFIG_TRACEPOINTS; Linux 5.5 or later)",
                TRACEPOINTS[i], type);
        }
    }
    btf__free(vmlinux);
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

/* pid and every descendant it has now into the tgids map (forks later: follow_fork). */
static int add_tree(int map_fd, int pid, __u32 role)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *tasks = opendir(path);
    if (!tasks)
        return -1; /* gone */
    __u32 key = (__u32)pid;
    bpf_map_update_elem(map_fd, &key, &role, BPF_ANY);
    struct dirent *task;
    while ((task = readdir(tasks)) != NULL) {
        if (task->d_name[0] == '.')
            continue;
        char children_path[320];
        snprintf(children_path, sizeof children_path, "/proc/%d/task/%s/children", pid,
                 task->d_name);
        FILE *children = fopen(children_path, "r");
        if (!children)
            continue;
        int child;
        while (fscanf(children, "%d", &child) == 1)
            add_tree(map_fd, child, role);
        fclose(children);
    }
    closedir(tasks);
    return 0;
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

struct window_links {
    struct bpf_link *links[8];
    int count;
};

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
        if (fn->why[0]) {
            bpf_link__destroy(fn->links[0]); /* NULL-safe */
            fn->links[0] = fn->links[1] = NULL;
        }
    }
}

static void detach_functions(struct function *functions)
{
    for (int f = 0; f < KT_FUNCTIONS; f++)
        for (int i = 0; i < 2; i++) {
            bpf_link__destroy(functions[f].links[i]);
            functions[f].links[i] = NULL;
        }
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

/* The window's programs: the calls' and softirqs' (who_ran: false), or who ran on a CPU. */
static size_t window_programs(struct ktrace_bpf *skel, bool who_ran,
                              struct bpf_program *programs[7])
{
    struct bpf_program *calls[] = {
        skel->progs.kt_sys_enter, skel->progs.kt_sys_exit, skel->progs.kt_sched_switch,
        skel->progs.kt_softirq_entry, skel->progs.kt_softirq_exit, skel->progs.kt_netif_receive_skb,
        skel->progs.kt_net_dev_xmit,
    };
    struct bpf_program *who[] = {skel->progs.kt_who_wakeup, skel->progs.kt_who_switch,
                                 skel->progs.kt_who_idle};
    size_t count = who_ran ? sizeof who / sizeof *who : sizeof calls / sizeof *calls;
    memcpy(programs, who_ran ? who : calls, count * sizeof *programs);
    return count;
}

/* Before the object loads: only the mode's programs (and follow_fork) are loaded. */
static void choose_mode(struct ktrace_bpf *skel, bool who_ran)
{
    struct bpf_program *other[7];
    size_t count = window_programs(skel, !who_ran, other);
    for (size_t i = 0; i < count; i++)
        bpf_program__set_autoload(other[i], false);
}

/* Attaches the window's programs and, at the instant at (0: at once), switches counting on:
 * the instant it did (CLOCK_MONOTONIC, bpf_ktime_get_ns's clock), before which nothing counts.
 * The programs are attached first, so that attaching takes none of the window. */
static uint64_t attach_window(struct ktrace_bpf *skel, struct function *functions, bool who_ran,
                              struct window_links *held, uint64_t at)
{
    struct bpf_program *window[7];
    size_t count = window_programs(skel, who_ran, window);
    for (size_t i = 0; i < count; i++) {
        struct bpf_link *link = bpf_program__attach(window[i]);
        if (!link)
            die(EXIT_FAILED, "attaching %s: %s (%s)", bpf_program__name(window[i]),
                strerror(errno), libbpf_said);
        held->links[held->count++] = link;
    }
    attach_functions(functions);
    sleep_until(at);
    uint64_t start = now_ns();
    skel->bss->counting_since_ns = start;
    skel->bss->counting = 1;
    return start;
}

/* At the instant at (0: at once), switches counting off, then detaches: the instant counting
 * had stopped by (CLOCK_MONOTONIC). */
static uint64_t detach_window(struct ktrace_bpf *skel, struct function *functions,
                              struct window_links *held, uint64_t at)
{
    sleep_until(at);
    skel->bss->counting = 0;
    uint64_t end = now_ns();
    for (int i = 0; i < held->count; i++)
        bpf_link__destroy(held->links[i]);
    held->count = 0;
    detach_functions(functions);
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

/* The CPUs' values of a per-CPU map entry added up: its structs hold __u64 fields only. */
static void sum_cpus(void *total, const void *per_cpu, size_t size, int cpus)
{
    __u64 *sum = total;
    const __u64 *value = per_cpu;
    memset(total, 0, size);
    for (int c = 0; c < cpus; c++)
        for (size_t i = 0; i < size / sizeof *sum; i++)
            sum[i] += value[c * (size / sizeof *sum) + i];
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

/* The programs' runs, CPUs summed, and the document's end. */
static void print_events(struct ktrace_bpf *skel, int cpus)
{
    struct kt_events *per_cpu = calloc((size_t)cpus, sizeof *per_cpu);
    if (!per_cpu)
        die(EXIT_FAILED, "out of memory");
    __u32 zero = 0;
    if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.kt_events), &zero, per_cpu) != 0)
        die(EXIT_FAILED, "reading the events map: %s", strerror(errno));
    struct kt_events total;
    sum_cpus(&total, per_cpu, sizeof total, cpus);
    printf(", \"events\": {\"runs\": %llu, \"traced\": %llu, \"untimed\": %llu, "
           "\"followed\": %llu, \"untraced_switches\": %llu}}\n", total.runs, total.traced,
           total.untimed, total.followed, total.untraced_switches);
    fflush(stdout);
    free(per_cpu);
}

/* The window counted over: its edges on CLOCK_MONOTONIC (bpf_ktime_get_ns's clock), ns. */
struct window {
    uint64_t start_ns, end_ns;
};

static void print_window(struct window window)
{
    printf("\"window_ns\": %llu, \"window\": {\"start_ns\": %llu, \"end_ns\": %llu}",
           (unsigned long long)(window.end_ns - window.start_ns),
           (unsigned long long)window.start_ns, (unsigned long long)window.end_ns);
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

/* An entry of the who-ran tasks map, with its key. */
struct who_task {
    __u32 pid;
    struct kt_who_task task;
};

static void print_document(struct ktrace_bpf *skel, const struct function *functions,
                           bool fentry, struct window window, bool generator)
{
    int cpus = libbpf_num_possible_cpus();
    if (cpus <= 0)
        die(EXIT_FAILED, "cannot count this machine's CPUs: %s", strerror(-cpus));
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
    print_events(skel, cpus);
    free(per_cpu);
    free(cpu_values);
}

static int by_time_spent(const void *a, const void *b)
{
    const struct who_task *x = a, *y = b;
    return (y->task.ran_ns > x->task.ran_ns) - (y->task.ran_ns < x->task.ran_ns);
}

/* --who-ran: the CPU's time by who ran there, the generator's waits, and each other task that
 * ran there (most time first). */
static void print_who_ran(struct ktrace_bpf *skel, struct window window, int cpu, int role,
                          double late_us)
{
    int cpus = libbpf_num_possible_cpus();
    if (cpus <= 0)
        die(EXIT_FAILED, "cannot count this machine's CPUs: %s", strerror(-cpus));
    __u32 zero = 0;
    struct kt_who_cpu who;
    if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.kt_who), &zero, &who) != 0)
        die(EXIT_FAILED, "reading the who-ran map: %s", strerror(errno));
    static struct who_task tasks[KT_MAX_WHO_TASKS];
    size_t count = 0;
    int tasks_fd = bpf_map__fd(skel->maps.kt_who_tasks);
    __u32 key, *previous = NULL;
    while (count < KT_MAX_WHO_TASKS && bpf_map_get_next_key(tasks_fd, previous, &key) == 0) {
        if (bpf_map_lookup_elem(tasks_fd, &key, &tasks[count].task) == 0)
            tasks[count++].pid = key;
        previous = &key;
    }
    qsort(tasks, count, sizeof *tasks, by_time_spent);
    printf("{");
    print_window(window);
    printf(", \"who_ran\": {\"cpu\": %d, \"role\": \"%s\", \"idle_ns\": %llu, "
           "\"measured_ns\": %llu, \"ksoftirqd_ns\": %llu, \"other_ns\": %llu, "
           "\"waited_ns\": %llu, \"waited_others_ns\": %llu, \"late_us\": %g, "
           "\"waited_others_late_ns\": %llu, \"waits\": %llu, \"untraced_switches\": %llu, "
           "\"tasks\": [",
           cpu, ROLES[role], who.ran_ns[KT_WHO_IDLE], who.ran_ns[KT_WHO_MEASURED], who.ran_ns[KT_WHO_KSOFTIRQD], who.ran_ns[KT_WHO_OTHER],
           who.waited_ns, who.waited_others_ns, late_us, who.waited_others_late_ns, who.waits,
           who.untraced_switches);
    for (size_t i = 0; i < count; i++) {
        printf("%s{\"pid\": %u, \"comm\": ", i ? ", " : "", tasks[i].pid);
        print_json_string(tasks[i].task.comm);
        printf(", \"ran_ns\": %llu}", tasks[i].task.ran_ns);
    }
    printf("]}");
    print_events(skel, cpus);
}

static volatile sig_atomic_t stop_requested;

static void request_stop(int signo)
{
    (void)signo;
    stop_requested = 1;
}

/* --duration: count until it has passed or a stop signal comes. */
static void count_for(double seconds)
{
    struct sigaction action = {.sa_handler = request_stop}; /* no SA_RESTART: sleeps end */
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGTERM, &action, NULL);
    uint64_t until = now_ns() + (uint64_t)(seconds * 1e9);
    while (!stop_requested) {
        uint64_t now = now_ns();
        if (now >= until)
            break;
        uint64_t left = until - now;
        struct timespec nap = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
        nanosleep(&nap, NULL);
    }
}

/* The control protocol: false at end of input (no document then). "COMMAND NS" names the
 * CLOCK_MONOTONIC instant it takes effect at (*at; 0 without one: at once), so that the
 * window's edges are the caller's, not when a line happened to be read. */
static bool await_command(const char *command, uint64_t *at)
{
    char line[64];
    size_t length = strlen(command);
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = '\0';
        char *end = NULL;
        *at = 0;
        if (strncmp(line, command, length) == 0 && line[length] == '\0')
            return true;
        if (strncmp(line, command, length) == 0 && line[length] == ' ') {
            errno = 0;
            *at = strtoull(line + length + 1, &end, 10);
            if (errno == 0 && end != line + length + 1 && *end == '\0')
                return true;
        }
        die(EXIT_USAGE, "expected '%s' or '%s NS' on stdin, got '%s'", command, command, line);
    }
    return false;
}

static long parse_pid(const char *flag, const char *value)
{
    char *end;
    errno = 0;
    long pid = strtol(value, &end, 10);
    if (errno || *end || pid <= 0 || pid > 4194304) {
        fprintf(stderr, "wb-ktrace: %s %s: not a process id\n", flag, value);
        usage();
        exit(EXIT_USAGE);
    }
    return pid;
}

int main(int argc, char **argv)
{
    long roots[KT_ROLES][MAX_ROOTS];
    int root_count[KT_ROLES] = {0, 0};
    double duration = -1;
    bool probe = false;
    long who_cpu = -1;
    double late_us = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        bool has_value = i + 1 < argc;
        if (strcmp(arg, "--describe") == 0) {
            describe();
            return EXIT_OK;
        } else if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage();
            return EXIT_OK;
        } else if (strcmp(arg, "--probe") == 0) {
            probe = true;
        } else if ((strcmp(arg, "--pid") == 0 || strcmp(arg, "--generator-pid") == 0) &&
                   has_value) {
            int role = arg[2] == 'p' ? KT_SERVER : KT_GENERATOR;
            if (root_count[role] == MAX_ROOTS)
                die(EXIT_USAGE, "%s: at most %d", arg, MAX_ROOTS);
            roots[role][root_count[role]++] = parse_pid(arg, argv[++i]);
        } else if (strcmp(arg, "--who-ran") == 0 && has_value) {
            char *end;
            errno = 0;
            who_cpu = strtol(argv[++i], &end, 10);
            if (errno || *end || who_cpu < 0 || who_cpu >= libbpf_num_possible_cpus()) {
                fprintf(stderr, "wb-ktrace: --who-ran %s: not a CPU of this machine\n",
                        argv[i]);
                usage();
                return EXIT_USAGE;
            }
        } else if (strcmp(arg, "--late-us") == 0 && has_value) {
            char *end;
            late_us = strtod(argv[++i], &end);
            if (*end || !(late_us >= 0 && late_us <= 1e9)) {
                fprintf(stderr, "wb-ktrace: --late-us %s: not a number of microseconds in "
                        "[0, 1e9]\n", argv[i]);
                usage();
                return EXIT_USAGE;
            }
        } else if (strcmp(arg, "--duration") == 0 && has_value) {
            char *end;
            duration = strtod(argv[++i], &end);
            if (*end || !(duration > 0 && duration <= 86400)) {
                fprintf(stderr, "wb-ktrace: --duration %s: not a number of seconds in "
                        "(0, 86400]\n", argv[i]);
                usage();
                return EXIT_USAGE;
            }
        } else {
            fprintf(stderr, "wb-ktrace: %s: unknown option or missing value\n", arg);
            usage();
            return EXIT_USAGE;
        }
    }
    bool who_ran = who_cpu >= 0;
    if (!probe && !who_ran && root_count[KT_SERVER] == 0) {
        fputs("wb-ktrace: give the measured process with --pid PID\n", stderr);
        usage();
        return EXIT_USAGE;
    }
    if (who_ran && (probe || (root_count[KT_GENERATOR] == 0) == (root_count[KT_SERVER] == 0))) {
        fputs("wb-ktrace: --who-ran needs one measured tree (--generator-pid PID or --pid PID, "
              "not both) and no --probe\n", stderr);
        usage();
        return EXIT_USAGE;
    }
    int who_role = root_count[KT_SERVER] ? KT_SERVER : KT_GENERATOR;
    libbpf_set_print(keep_warning);
    check_machine();

    struct ktrace_bpf *skel = ktrace_bpf__open();
    if (!skel)
        die(EXIT_FAILED, "opening the BPF object: %s", strerror(errno));
    bool fentry = !who_ran && fentry_allowed();
    struct function functions[KT_FUNCTIONS];
    choose_functions(skel, functions, fentry);
    choose_mode(skel, who_ran);
    skel->rodata->who_cpu = (__s32)who_cpu;
    skel->rodata->who_role = (__u32)who_role;
    skel->rodata->late_ns = (__u64)(late_us * 1e3);
    if (ktrace_bpf__load(skel) != 0) {
        int saved = errno;
        if (saved == EPERM || saved == EACCES)
            die(EXIT_NO_CAPABILITY, "%s (load: %s)", CAPABILITY_FIX, strerror(saved));
        die(EXIT_FAILED, "loading the BPF programs: %s (%s)", strerror(saved), libbpf_said);
    }
    if (probe) {
        /* the window's programs attach and detach once: what a point would do */
        struct window_links held = {.count = 0};
        attach_window(skel, functions, false, &held, 0);
        detach_window(skel, functions, &held, 0);
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
    /* forks followed before the trees are walked: none slips between the two */
    struct bpf_link *follow = bpf_program__attach(skel->progs.kt_follow_fork);
    if (!follow)
        die(EXIT_FAILED, "attaching follow_fork: %s (%s)", strerror(errno), libbpf_said);
    int tgids_fd = bpf_map__fd(skel->maps.kt_tgids);
    for (int role = 0; role < KT_ROLES; role++)
        for (int i = 0; i < root_count[role]; i++)
            if (add_tree(tgids_fd, (int)roots[role][i], (__u32)role) != 0)
                die(EXIT_USAGE, "%s %ld: no such process", role ? "--generator-pid" : "--pid",
                    roots[role][i]);

    struct window_links held = {.count = 0};
    struct window window;
    uint64_t stop_at = 0;
    if (duration > 0) {
        window.start_ns = attach_window(skel, functions, who_ran, &held, 0);
        count_for(duration);
    } else {
        setvbuf(stdout, NULL, _IOLBF, 0);
        printf("ready\n");
        uint64_t start_at;
        if (!await_command("start", &start_at))
            return EXIT_OK;
        window.start_ns = attach_window(skel, functions, who_ran, &held, start_at);
        printf("started\n");
        if (!await_command("stop", &stop_at))
            return EXIT_OK;
    }
    window.end_ns = detach_window(skel, functions, &held, stop_at);
    if (who_ran)
        print_who_ran(skel, window, (int)who_cpu, who_role, late_us);
    else
        print_document(skel, functions, fentry, window, root_count[KT_GENERATOR] > 0);
    bpf_link__destroy(follow);
    ktrace_bpf__destroy(skel);
    return EXIT_OK;
}
