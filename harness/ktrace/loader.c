/* The loader code both tools share (loader.h says what): each tool's main() is its options,
 * its programs and its document; the rest is here. */
#include <errno.h>
#include <dirent.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>

#include "loader.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

#define VMLINUX_BTF "/sys/kernel/btf/vmlinux"

const char *const ROLES[KT_ROLES] = {"server", "generator"};

char libbpf_said[512];

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

void keep_libbpf_warnings(void)
{
    libbpf_set_print(keep_warning);
}

/* One line on standard error, after the tool's name. */
static void say(const char *format, va_list args)
{
    fprintf(stderr, "%s: ", TOOL_NAME);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
}

void die(enum kt_exit status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    say(format, args);
    va_end(args);
    exit(status);
}

void usage_error(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    say(format, args);
    va_end(args);
    fputs(TOOL_USAGE, stderr);
    exit(EXIT_USAGE);
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

__attribute__((noreturn)) static void die_incapable(const char *detail)
{
    die(EXIT_NO_CAPABILITY, "loading BPF programs needs CAP_BPF and CAP_PERFMON, or "
        "CAP_SYS_ADMIN; fix: run as root (or setcap cap_bpf,cap_perfmon+ep build/bin/%s)%s",
        TOOL_NAME, detail);
}

void check_machine(const char *const *tracepoints, size_t count)
{
    if (!capable_of_bpf())
        die_incapable("");
    if (access(VMLINUX_BTF, R_OK) != 0)
        die(EXIT_NO_BTF, "%s: %s: this kernel has no BTF; fix: a kernel built with "
            "CONFIG_DEBUG_INFO_BTF=y (Debian's and most distributions' are)", VMLINUX_BTF,
            strerror(errno));
    struct btf *vmlinux = btf__load_vmlinux_btf();
    if (!vmlinux)
        die(EXIT_NO_BTF, "cannot read %s: %s; fix: a kernel built with CONFIG_DEBUG_INFO_BTF=y",
            VMLINUX_BTF, strerror(errno));
    for (size_t i = 0; i < count; i++) {
        char type[128];
        snprintf(type, sizeof type, "btf_trace_%s", tracepoints[i]);
        if (btf__find_by_name_kind(vmlinux, type, BTF_KIND_TYPEDEF) < 0) {
            btf__free(vmlinux);
            die(EXIT_NO_TRACEPOINT, "tracepoint %s is not in this kernel (no %s in its BTF); "
                "fix: a kernel with it (CONFIG_TRACEPOINTS; Linux 5.5 or later)",
                tracepoints[i], type);
        }
    }
    btf__free(vmlinux);
}

void die_unloaded(void)
{
    int saved = errno;
    if (saved == EPERM || saved == EACCES) {
        char detail[64];
        snprintf(detail, sizeof detail, " (load: %s)", strerror(saved));
        die_incapable(detail);
    }
    die(EXIT_FAILED, "loading the BPF programs: %s (%s)", strerror(saved), libbpf_said);
}

static long parse_pid(const char *flag, const char *value)
{
    char *end;
    errno = 0;
    long pid = strtol(value, &end, 10);
    if (errno || *end || pid <= 0 || pid > 4194304)
        usage_error("%s %s: not a process id", flag, value);
    return pid;
}

bool common_option(int argc, char **argv, int *i, struct common_options *options)
{
    const char *arg = argv[*i];
    bool has_value = *i + 1 < argc;
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
        fputs(TOOL_USAGE, stderr);
        exit(EXIT_OK);
    } else if (strcmp(arg, "--probe") == 0) {
        options->probe = true;
    } else if ((strcmp(arg, "--pid") == 0 || strcmp(arg, "--generator-pid") == 0) &&
               has_value) {
        int role = arg[2] == 'p' ? KT_SERVER : KT_GENERATOR;
        if (options->root_count[role] == MAX_ROOTS)
            die(EXIT_USAGE, "%s: at most %d", arg, MAX_ROOTS);
        options->roots[role][options->root_count[role]++] = parse_pid(arg, argv[++*i]);
    } else if (strcmp(arg, "--duration") == 0 && has_value) {
        char *end;
        options->duration = strtod(argv[++*i], &end);
        if (*end || !(options->duration > 0 && options->duration <= 86400))
            usage_error("--duration %s: not a number of seconds in (0, 86400]", argv[*i]);
    } else {
        return false;
    }
    return true;
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

struct bpf_link *follow_trees(struct bpf_program *follow_fork, int tgids_fd,
                              const struct common_options *options)
{
    struct bpf_link *follow = bpf_program__attach(follow_fork);
    if (!follow)
        die(EXIT_FAILED, "attaching follow_fork: %s (%s)", strerror(errno), libbpf_said);
    for (int role = 0; role < KT_ROLES; role++)
        for (int i = 0; i < options->root_count[role]; i++)
            if (add_tree(tgids_fd, (int)options->roots[role][i], (__u32)role) != 0)
                die(EXIT_USAGE, "%s %ld: no such process", role ? "--generator-pid" : "--pid",
                    options->roots[role][i]);
    return follow;
}

void attach_programs(struct bpf_program *const *programs, size_t count, struct bpf_link **links)
{
    for (size_t i = 0; i < count; i++) {
        links[i] = bpf_program__attach(programs[i]);
        if (!links[i])
            die(EXIT_FAILED, "attaching %s: %s (%s)", bpf_program__name(programs[i]),
                strerror(errno), libbpf_said);
    }
}

void destroy_links(struct bpf_link **links, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        bpf_link__destroy(links[i]); /* NULL-safe */
        links[i] = NULL;
    }
}

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void sleep_until(uint64_t at)
{
    struct timespec when = {(time_t)(at / 1000000000ull), (long)(at % 1000000000ull)};
    while (at > now_ns() && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &when, NULL) == EINTR)
        ;
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

/* Between its edges the loader only sleeps: it waits for each at the lowest real-time
 * priority, so that the other tasks on its CPU (it runs off the measured one) do not delay
 * the instant it switches counting on or off past the caller's. Loading the programs before
 * and reading the maps after are not done at it. Where real-time priority is refused (a
 * container, an RT group without runtime) the edges are waited for as before, and the
 * caller's check of the window's edges (clients.validity's window_disagrees) still holds. */
static void edges_first(bool first)
{
    struct sched_param priority = {.sched_priority = first ? 1 : 0};
    (void)sched_setscheduler(0, first ? SCHED_FIFO : SCHED_OTHER, &priority);
}

static bool count_window(double duration, window_edge *start, window_edge *end, void *tool,
                         struct window *window)
{
    uint64_t stop_at = 0;
    if (duration > 0) {
        window->start_ns = start(tool, 0);
        count_for(duration);
    } else {
        setvbuf(stdout, NULL, _IOLBF, 0);
        printf("ready\n");
        uint64_t start_at;
        if (!await_command("start", &start_at))
            return false;
        window->start_ns = start(tool, start_at);
        printf("started\n");
        if (!await_command("stop", &stop_at))
            return false;
    }
    window->end_ns = end(tool, stop_at);
    return true;
}

bool run_window(double duration, window_edge *start, window_edge *end, void *tool,
                struct window *window)
{
    edges_first(true);
    bool counted = count_window(duration, start, end, tool, window);
    edges_first(false);
    return counted;
}

void print_window(struct window window)
{
    printf("\"window_ns\": %llu, \"window\": {\"start_ns\": %llu, \"end_ns\": %llu}",
           (unsigned long long)(window.end_ns - window.start_ns),
           (unsigned long long)window.start_ns, (unsigned long long)window.end_ns);
}

void print_json_string(const char *s)
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

void print_events(int events_fd, int cpus)
{
    struct kt_events *per_cpu = calloc((size_t)cpus, sizeof *per_cpu);
    if (!per_cpu)
        die(EXIT_FAILED, "out of memory");
    __u32 zero = 0;
    if (bpf_map_lookup_elem(events_fd, &zero, per_cpu) != 0)
        die(EXIT_FAILED, "reading the events map: %s", strerror(errno));
    struct kt_events total;
    sum_cpus(&total, per_cpu, sizeof total, cpus);
    printf(", \"events\": {\"runs\": %llu, \"traced\": %llu, \"untimed\": %llu, "
           "\"followed\": %llu, \"untraced_switches\": %llu}}\n", total.runs, total.traced,
           total.untimed, total.followed, total.untraced_switches);
    fflush(stdout);
    free(per_cpu);
}

int possible_cpus(void)
{
    int cpus = libbpf_num_possible_cpus();
    if (cpus <= 0)
        die(EXIT_FAILED, "cannot count this machine's CPUs: %s", strerror(-cpus));
    return cpus;
}

void sum_cpus(void *total, const void *per_cpu, size_t size, int cpus)
{
    __u64 *sum = total;
    const __u64 *value = per_cpu;
    memset(total, 0, size);
    for (int c = 0; c < cpus; c++)
        for (size_t i = 0; i < size / sizeof *sum; i++)
            sum[i] += value[c * (size / sizeof *sum) + i];
}
