/* wb-whoran: who ran on one CPU over exactly the window it is told, and how long the measured
 * tree's threads waited for that CPU while other tasks held it; prints JSON.
 *
 *   wb-whoran --cpu CPU (--generator-pid PID ... | --pid PID ...) [--late-us US]
 *             [--own-pid PID ...] [--duration S]
 *   wb-whoran --probe | --help
 *
 * The measured tree is one role's: the generator's (the generator's CPU) or, with --pid, the
 * server's (the server's CPU); its forks are followed. The CPU's ksoftirqd, idle, the run's own
 * other processes (--own-pid) and each other task by name are told apart. A context switch's worth of work on that CPU, none on the
 * others. Driven as wb-ktrace is (loader.c: run_window), nothing pinned, and why it cannot run
 * is one line on stderr and its own exit status (loader.h: kt_exit). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "whoran.h"
#include "whoran.skel.h"
#include "loader.h"

/* Every tracepoint the programs attach to (its BTF type is btf_trace_NAME). */
static const char *const TRACEPOINTS[] = {
    "sched_process_fork", "sched_switch", "sched_wakeup", "cpu_idle",
};

const char TOOL_NAME[] = "wb-whoran";
const char TOOL_USAGE[] =
    "usage: wb-whoran --cpu CPU (--generator-pid PID ... | --pid PID ...) [--late-us US]\n"
    "                 [--own-pid PID ...] [--duration SECONDS]\n"
    "       wb-whoran --probe\n"
    "  --cpu            the CPU traced: who ran there, and whom the measured tree waited behind\n"
    "  --generator-pid  a process whose tree is measured, as the generator, at most 64\n"
    "  --pid            a process whose tree is measured, as the server (not with the above)\n"
    "  --late-us        each wait behind others also counted past this\n"
    "  --own-pid        a process of the run's own (a link emulator): its time on the CPU is\n"
    "                   told apart, and waits behind it are not waits behind others, at most 64\n"
    "  --duration       count for this long (or until SIGINT/SIGTERM), then print\n"
    "                   the document; without it: ready / start [NS] / stop [NS] on stdin\n"
    "  --probe          whether this machine allows it (one JSON line), then exit\n"
    "exit: 0 ok, 1 failed, 2 usage, 3 no CAP_BPF/CAP_SYS_ADMIN, 4 no BTF, "
    "5 a tracepoint missing\n";

/* What a window holds: the skeleton and its programs' links. */
#define WINDOW_PROGRAMS 3
struct who_window {
    struct whoran_bpf *skel;
    struct bpf_link *links[WINDOW_PROGRAMS];
};

/* Attaches the programs, then switches counting on at the instant at (0: at once). */
static uint64_t window_opens(void *held, uint64_t at)
{
    struct who_window *window = held;
    struct whoran_bpf *skel = window->skel;
    struct bpf_program *const programs[WINDOW_PROGRAMS] = {
        skel->progs.kt_who_wakeup, skel->progs.kt_who_switch, skel->progs.kt_who_idle,
    };
    attach_programs(programs, WINDOW_PROGRAMS, window->links);
    sleep_until(at);
    uint64_t start = now_ns();
    skel->bss->counting = 1;
    return start;
}

/* Switches counting off at the instant at (0: at once), then detaches. */
static uint64_t window_closes(void *held, uint64_t at)
{
    struct who_window *window = held;
    sleep_until(at);
    window->skel->bss->counting = 0;
    uint64_t end = now_ns();
    destroy_links(window->links, WINDOW_PROGRAMS);
    return end;
}

/* An entry of the tasks map, with its key. */
struct who_task {
    __u32 pid;
    struct kt_who_task task;
};

static int by_time_spent(const void *a, const void *b)
{
    const struct who_task *x = a, *y = b;
    return (y->task.ran_ns > x->task.ran_ns) - (y->task.ran_ns < x->task.ran_ns);
}

/* The CPU's time by who ran there, the measured tree's waits, and each other task that ran
 * there (most time first). */
static void print_document(struct whoran_bpf *skel, struct window window, int cpu, int role,
                           double late_us)
{
    int cpus = possible_cpus();
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
           "\"measured_ns\": %llu, \"ksoftirqd_ns\": %llu, \"own_ns\": %llu, \"other_ns\": %llu, "
           "\"waited_ns\": %llu, \"waited_others_ns\": %llu, \"late_us\": %g, "
           "\"waited_others_late_ns\": %llu, \"waits\": %llu, \"untraced_switches\": %llu, "
           "\"tasks\": [",
           cpu, ROLES[role], who.ran_ns[KT_WHO_IDLE], who.ran_ns[KT_WHO_MEASURED],
           who.ran_ns[KT_WHO_KSOFTIRQD], who.ran_ns[KT_WHO_OWN], who.ran_ns[KT_WHO_OTHER],
           who.waited_ns,
           who.waited_others_ns, late_us, who.waited_others_late_ns, who.waits,
           who.untraced_switches);
    for (size_t i = 0; i < count; i++) {
        printf("%s{\"pid\": %u, \"comm\": ", i ? ", " : "", tasks[i].pid);
        print_json_string(tasks[i].task.comm);
        printf(", \"ran_ns\": %llu}", tasks[i].task.ran_ns);
    }
    printf("]}");
    print_events(bpf_map__fd(skel->maps.kt_events), cpus);
}

int main(int argc, char **argv)
{
    struct common_options options = COMMON_OPTIONS_INIT;
    long cpu = -1;
    double late_us = 0;
    __u32 own[KT_MAX_OWN_TGIDS];
    size_t owns = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        bool has_value = i + 1 < argc;
        char *end;
        if (common_option(argc, argv, &i, &options)) {
            continue;
        } else if (strcmp(arg, "--cpu") == 0 && has_value) {
            errno = 0;
            cpu = strtol(argv[++i], &end, 10);
            if (errno || *end || cpu < 0 || cpu >= libbpf_num_possible_cpus())
                usage_error("--cpu %s: not a CPU of this machine", argv[i]);
        } else if (strcmp(arg, "--own-pid") == 0 && has_value) {
            errno = 0;
            long pid = strtol(argv[++i], &end, 10);
            if (errno || *end || pid <= 0 || pid > (long)UINT32_MAX)
                usage_error("--own-pid %s: not a process id", argv[i]);
            if (owns == KT_MAX_OWN_TGIDS)
                usage_error("--own-pid: at most %d", KT_MAX_OWN_TGIDS);
            own[owns++] = (__u32)pid;
        } else if (strcmp(arg, "--late-us") == 0 && has_value) {
            late_us = strtod(argv[++i], &end);
            if (*end || !(late_us >= 0 && late_us <= 1e9))
                usage_error("--late-us %s: not a number of microseconds in [0, 1e9]", argv[i]);
        } else {
            usage_error("%s: unknown option or missing value", arg);
        }
    }
    bool generator = options.root_count[KT_GENERATOR] > 0;
    if (!options.probe && (cpu < 0 || generator == (options.root_count[KT_SERVER] > 0)))
        usage_error("give the CPU with --cpu CPU and one measured tree (--generator-pid PID "
                    "or --pid PID, not both)");
    int role = generator ? KT_GENERATOR : KT_SERVER;
    keep_libbpf_warnings();
    check_machine(TRACEPOINTS, sizeof TRACEPOINTS / sizeof *TRACEPOINTS);

    struct whoran_bpf *skel = whoran_bpf__open();
    if (!skel)
        die(EXIT_FAILED, "opening the BPF object: %s", strerror(errno));
    skel->rodata->who_cpu = (__s32)cpu;
    skel->rodata->late_ns = (__u64)(late_us * 1e3);
    skel->rodata->own_given = owns > 0;
    if (whoran_bpf__load(skel) != 0)
        die_unloaded();
    __u8 one = 1;
    for (size_t i = 0; i < owns; i++)
        if (bpf_map_update_elem(bpf_map__fd(skel->maps.kt_who_own), &own[i], &one, BPF_ANY) != 0)
            die(EXIT_FAILED, "adding own process %u: %s", own[i], strerror(errno));
    struct who_window held = {.skel = skel};
    if (options.probe) {
        /* the window's programs attach and detach once: what a point would do */
        window_opens(&held, 0);
        window_closes(&held, 0);
        whoran_bpf__destroy(skel);
        printf("{\"tracepoints\": true}\n");
        return EXIT_OK;
    }
    struct bpf_link *follow = follow_trees(skel->progs.kt_follow_fork,
                                           bpf_map__fd(skel->maps.kt_tgids), &options);
    struct window window;
    if (!run_window(options.duration, window_opens, window_closes, &held, &window))
        return EXIT_OK;
    print_document(skel, window, (int)cpu, role, late_us);
    bpf_link__destroy(follow);
    whoran_bpf__destroy(skel);
    return EXIT_OK;
}
