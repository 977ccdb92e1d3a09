/* main.c: wb-server's command line, listening sockets, workers, signals and stats. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "server.h"

/* wb-server's limits, decided here; --describe prints them (and the backends, accept policies
 * and defaults) for harness/servers.py, which keeps no copy. */
#define MAX_WORKERS 64
#define MAX_REPLY_BYTES (64L << 20) /* every worker builds its replies in memory up front */
#define MAX_ACCEPT INT_MAX          /* --accept N is a C int */
#define MAX_BACKLOG INT_MAX
#define MAX_MIN_WAIT_US 1000000L /* a second: longer only delays replies */
#define MAX_SOURCE_MBPS 1e6        /* a terabit: past any link here */

/* The backends are listed from their table in dispatch.c. */
static void print_usage(FILE *f)
{
    char names[128];
    fprintf(f,
            "usage: wb-server --dispatch %s\n"
            "                 --accept single|multi|N --reply-bytes B --listen ADDR:PORT|[ADDR]:PORT\n"
            "                 [--backlog N] [--stats PATH] [--counters PATH] [--workers N]\n"
            "                 [--cpu N[,N...]] [--sink | --source MBPS] [--min-wait-us US]\n"
            "       wb-server --describe   (backends, limits and defaults as JSON)\n",
            dispatch_names(names, sizeof names));
}

struct options {
    struct server_config server;
    const char *accept_name;
    struct sockaddr_storage listen; /* IPv4 or IPv6 */
    int backlog, workers;
    const char *stats_path, *counters_path;
    int cpus[MAX_WORKERS], ncpus;
};

static struct options opt;
static struct stats *slots; /* one per worker, shared with the workers */
static struct stats_info info;
static volatile sig_atomic_t child_exited;

static _Noreturn __attribute__((format(printf, 1, 2))) void bad_usage(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    fputs("wb-server: ", stderr);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fputs("\n", stderr);
    print_usage(stderr);
    exit(2);
}

static long parse_count(const char *flag, const char *s, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        bad_usage("%s: '%s' is not a whole number from %ld to %ld", flag, s, min, max);
    return v;
}

static double parse_number(const char *flag, const char *s, double min, double max)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= min && v <= max))
        bad_usage("%s: '%s' is not a number from %g to %g", flag, s, min, max);
    return v;
}

/* IPv4 `ADDR:PORT` or IPv6 `[ADDR]:PORT`, numeric only. */
static void parse_listen(const char *s)
{
    char host[INET6_ADDRSTRLEN + 1];
    int v6 = s[0] == '[';
    const char *start = s + v6, *colon = strrchr(s, ':');
    const char *end = v6 ? strchr(s, ']') : colon;
    if (!colon || !end || end < start || (v6 && end + 1 != colon) ||
        (size_t)(end - start) >= sizeof host)
        bad_usage("--listen: '%s' is not ADDR:PORT or [ADDR]:PORT (e.g. 127.0.0.1:0, [::1]:0)",
                  s);
    memcpy(host, start, (size_t)(end - start));
    host[end - start] = '\0';
    uint16_t port = htons((uint16_t)parse_count("--listen port", colon + 1, 0, 65535));
    memset(&opt.listen, 0, sizeof opt.listen);
    if (v6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&opt.listen;
        a->sin6_family = AF_INET6;
        a->sin6_port = port;
        if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1)
            bad_usage("--listen: '%s' needs a numeric IPv6 address in brackets (e.g. [::1]:0)", s);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&opt.listen;
        a->sin_family = AF_INET;
        a->sin_port = port;
        if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
            bad_usage("--listen: '%s' needs a numeric IPv4 address or [IPv6] (e.g. 127.0.0.1:0)",
                      s);
    }
}

/* "127.0.0.1:8080" or "[::1]:8080": the form --listen takes. */
static const char *address_text(const struct sockaddr_storage *addr, char *buf, size_t size)
{
    char host[INET6_ADDRSTRLEN];
    if (addr->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)addr;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        snprintf(buf, size, "[%s]:%u", host, ntohs(a->sin6_port));
    } else {
        const struct sockaddr_in *a = (const struct sockaddr_in *)addr;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        snprintf(buf, size, "%s:%u", host, ntohs(a->sin_port));
    }
    return buf;
}

static void parse_cpus(const char *s)
{
    char copy[256];
    snprintf(copy, sizeof copy, "%s", s);
    for (char *save, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (opt.ncpus == MAX_WORKERS)
            bad_usage("--cpu: '%s' lists too many CPUs", s);
        opt.cpus[opt.ncpus++] = (int)parse_count("--cpu", tok, 0, CPU_SETSIZE - 1);
    }
    if (opt.ncpus == 0)
        bad_usage("--cpu: '%s' names no CPU", s);
}

static void set_defaults(void)
{
    opt = (struct options){.server = {.ops = &dispatch_epoll, .reply_bytes = 92},
                           .accept_name = "multi", .backlog = SOMAXCONN, .workers = 1};
    parse_listen("127.0.0.1:0");
}

/* What a caller may ask of this binary, so that no caller keeps a copy of it. */
static void describe(void)
{
    char listen[INET6_ADDRSTRLEN + 16];
    set_defaults();
    printf("{\"program\": \"wb-server\", \"dispatches\": [");
    for (size_t i = 0; dispatch_at(i); i++)
        printf("%s\"%s\"", i ? ", " : "", dispatch_at(i)->name);
    printf("],\n \"accept_policies\": [\"single\", \"multi\"],\n"
           " \"limits\": {\"accept\": [1, %d], \"reply_bytes\": [0, %ld], \"workers\": [1, %d],"
           " \"backlog\": [1, %d], \"cpus\": [0, %d], \"min_wait_us\": [0, %ld],"
           " \"source_mbps\": [0, %g]},\n",
           MAX_ACCEPT, MAX_REPLY_BYTES, MAX_WORKERS, MAX_BACKLOG, CPU_SETSIZE - 1,
           MAX_MIN_WAIT_US, MAX_SOURCE_MBPS);
    printf(" \"defaults\": {\"dispatch\": \"%s\", \"accept\": \"%s\", \"reply_bytes\": %ld,"
           " \"listen\": \"%s\", \"backlog\": %d, \"workers\": %d, \"min_wait_us\": %ld}}\n",
           opt.server.ops->name, opt.accept_name, opt.server.reply_bytes,
           address_text(&opt.listen, listen, sizeof listen), opt.backlog, opt.workers,
           opt.server.min_wait_us);
}

static void parse_args(int argc, char **argv)
{
    static const struct option flags[] = {
        {"dispatch", required_argument, NULL, 'd'}, {"accept", required_argument, NULL, 'a'},
        {"reply-bytes", required_argument, NULL, 'r'}, {"listen", required_argument, NULL, 'l'},
        {"backlog", required_argument, NULL, 'b'}, {"stats", required_argument, NULL, 's'},
        {"workers", required_argument, NULL, 'w'}, {"cpu", required_argument, NULL, 'c'},
        {"counters", required_argument, NULL, 'C'}, {"sink", no_argument, NULL, 'k'}, {"help", no_argument, NULL, 'h'},
        {"min-wait-us", required_argument, NULL, 'm'}, {"source", required_argument, NULL, 'S'},
        {"describe", no_argument, NULL, 'D'}, {0, 0, 0, 0},
    };
    set_defaults();
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, ":", flags, NULL)) != -1;) {
        switch (c) {
        case 'd':
            opt.server.ops = dispatch_find(optarg);
            if (!opt.server.ops) {
                char names[128];
                bad_usage("--dispatch: '%s' is not one of %s", optarg,
                          dispatch_names(names, sizeof names));
            }
            break;
        case 'a':
            opt.accept_name = optarg;
            if (strcmp(optarg, "single") == 0)
                opt.server.accept_limit = 1;
            else if (strcmp(optarg, "multi") == 0)
                opt.server.accept_limit = 0;
            else
                opt.server.accept_limit = (int)parse_count("--accept (single, multi or N)",
                                                           optarg, 1, MAX_ACCEPT);
            break;
        case 'r': opt.server.reply_bytes = parse_count("--reply-bytes", optarg, 0, MAX_REPLY_BYTES); break;
        case 'l': parse_listen(optarg); break;
        case 'b': opt.backlog = (int)parse_count("--backlog", optarg, 1, MAX_BACKLOG); break;
        case 's': opt.stats_path = optarg; break;
        case 'C': opt.counters_path = optarg; break;
        case 'w': opt.workers = (int)parse_count("--workers", optarg, 1, MAX_WORKERS); break;
        case 'c': parse_cpus(optarg); break;
        case 'k': opt.server.sink = 1; break;
        case 'S': opt.server.source_mbps = parse_number("--source", optarg, 0, MAX_SOURCE_MBPS); break;
        case 'm': opt.server.min_wait_us = parse_count("--min-wait-us", optarg, 0, MAX_MIN_WAIT_US); break;
        case 'h': print_usage(stdout); exit(0);
        case 'D': describe(); exit(0);
        case ':': bad_usage("flag %s needs a value", argv[optind - 1]);
        default: bad_usage("unknown flag %s", argv[optind - 1]);
        }
    }
    if (optind < argc)
        bad_usage("unexpected argument %s", argv[optind]);
    if (opt.server.sink && opt.server.source_mbps > 0)
        bad_usage("--sink and --source: a server either receives the stream or sends it");
}

static void on_signal(int sig)
{
    if (sig == SIGUSR1)
        server_snapshot = 1;
    else if (sig == SIGCHLD)
        child_exited = 1;
    else
        server_stop = 1;
    server_wake();
}

static void install_handlers(void)
{
    struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: waits return EINTR */
    sigemptyset(&sa.sa_mask);
    int sigs[] = {SIGTERM, SIGINT, SIGUSR1, SIGCHLD};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static void write_stats(void)
{
    if (opt.stats_path && stats_write(opt.stats_path, &info, slots, opt.workers) < 0)
        fprintf(stderr, "wb-server: cannot write stats to %s: %s\n", opt.stats_path,
                strerror(errno));
}

/* One listening socket per worker; with several they share the port (SO_REUSEPORT). */
static int open_listener(struct sockaddr_storage *addr)
{
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    socklen_t len = addr->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                : sizeof(struct sockaddr_in);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        (opt.workers > 1 && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0) ||
        bind(fd, (struct sockaddr *)addr, len) < 0 || listen(fd, opt.backlog) < 0) {
        char text[INET6_ADDRSTRLEN + 16];
        fprintf(stderr, "wb-server: cannot listen on %s: %s\n",
                address_text(addr, text, sizeof text), strerror(errno));
        exit(1);
    }
    len = sizeof *addr;
    getsockname(fd, (struct sockaddr *)addr, &len); /* port 0 becomes the chosen port */
    return fd;
}

static void pin(int worker)
{
    if (opt.ncpus == 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(opt.cpus[worker % opt.ncpus], &set);
    if (sched_setaffinity(0, sizeof set, &set) < 0) {
        fprintf(stderr, "wb-server: cannot pin to CPU %d: %s\n", opt.cpus[worker % opt.ncpus],
                strerror(errno));
        exit(1);
    }
}

static void announce(const struct sockaddr_storage *addr)
{
    char text[INET6_ADDRSTRLEN + 16];
    printf("ready %s\n", address_text(addr, text, sizeof text));
    fflush(stdout);
}

static void no_snapshot(void) {}

/* The parent of several workers serves nothing: it forwards stop, writes merged stats. */
static int supervise(pid_t *pids)
{
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGUSR1);
    sigaddset(&block, SIGCHLD);
    sigprocmask(SIG_BLOCK, &block, &old);
    int alive = opt.workers, status = 0;
    for (;;) { /* flags first: a signal may have come before the block */
        if (server_snapshot) {
            server_snapshot = 0;
            write_stats();
        }
        for (pid_t pid; child_exited && (pid = waitpid(-1, &status, WNOHANG)) > 0;) {
            fprintf(stderr, "wb-server: worker %ld exited unexpectedly\n", (long)pid);
            alive--;
        }
        child_exited = 0;
        if (server_stop || alive < opt.workers)
            break;
        sigsuspend(&old);
    }
    for (int i = 0; i < opt.workers; i++)
        kill(pids[i], SIGTERM);
    while (waitpid(-1, NULL, 0) > 0)
        ;
    write_stats();
    return alive == opt.workers ? 0 : 1;
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    info = (struct stats_info){.backend = opt.server.ops->name, .accept = opt.accept_name,
                               .reply_bytes = opt.server.reply_bytes,
                               .started = monotonic_seconds()};
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max; /* idle connections are the experiment: take them all */
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    slots = stats_map(opt.counters_path, opt.workers);
    if (!slots) {
        fprintf(stderr, "wb-server: cannot map the counters%s%s: %s\n",
                opt.counters_path ? " in " : "", opt.counters_path ? opt.counters_path : "",
                strerror(errno));
        return 1;
    }
    opt.server.workers = slots;
    opt.server.nworkers = opt.workers;
    install_handlers();

    int listeners[MAX_WORKERS];
    for (int i = 0; i < opt.workers; i++)
        listeners[i] = open_listener(&opt.listen); /* the first fixes the port for the rest */

    if (opt.workers == 1) {
        slots[0].pid = getpid();
        pin(0);
        announce(&opt.listen);
        int err = server_run(&opt.server, listeners[0], &slots[0], write_stats);
        write_stats();
        return err ? 1 : 0;
    }
    pid_t pids[MAX_WORKERS], parent = getpid();
    for (int i = 0; i < opt.workers; i++) {
        pids[i] = fork();
        if (pids[i] < 0) {
            perror("wb-server: fork");
            for (int k = 0; k < i; k++)
                kill(pids[k], SIGTERM);
            return 1;
        }
        if (pids[i] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGTERM); /* no worker outlives a killed parent */
            if (getppid() != parent)
                _exit(1); /* it died before the line above */
            for (int k = 0; k < opt.workers; k++)
                if (k != i)
                    close(listeners[k]);
            pin(i);
            _exit(server_run(&opt.server, listeners[i], &slots[i], no_snapshot) ? 1 : 0);
        }
        slots[i].pid = pids[i]; /* known here before the worker runs: snapshots name it */
    }
    for (int i = 0; i < opt.workers; i++)
        close(listeners[i]);
    announce(&opt.listen);
    return supervise(pids);
}
