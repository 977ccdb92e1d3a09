/* wb-sclient: options, source addresses, sharding over processes, merged report. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "os.h"
#include "sclient.h"

#define FD_RESERVE 64 /* descriptors kept for stdio, epoll, pipes */
#define HOLD_TIMELINE_S 86400
#define MAX_SHARDS 64 /* about 1.27 million connections at RLIMIT_NOFILE 20,000 */
/* Connections of each kind (hot, cold, stream). This file decides wb-sclient's limits and
 * defaults; --describe prints them for clients/spec.py, which keeps no copy. */
#define MAX_CONNS 1000000
#define MAX_OUTSTANDING 1024
#define MAX_CONNECTING 1000000

static const char usage[] =
    "usage: wb-sclient --target ADDR:PORT [--target ...] [options]\n"
    "  --duration S --warmup S --seed N --cpu N --json PATH --workers N (0: automatic)\n"
    "  --window-start-ns N --window-end-ns N   measure exactly [N, N) on CLOCK_MONOTONIC\n"
    "        instead of --warmup/--duration, then wait for stdin to end before exiting\n"
    "  --source LIST|CIDR|auto   source addresses (comma list or a.b.c.d/n)\n"
    "hot:    --hot-conns N --rate R (0: closed loop) --arrivals fixed|poisson\n"
    "        --requests-per-conn N (0: persistent) --pick last|random (open loop: the\n"
    "        connection that finished last, or any ready one) --overload queue|sclient\n"
    "        (open loop, one request per connection: sends wait for a free connection, or\n"
    "        each opens its own socket, at most --hot-conns in flight) --path P\n"
    "        --connect-timeout S --response-timeout S --max-outstanding N --spin-us US\n"
    "        --coalesce-us US --slice-us US (scheduler slice, 100; 0: the kernel's)\n"
    "        --late-us US (sends later count as late; unset: not counted, wanbench\n"
    "        passes its validity rule's)\n"
    "cold:   --cold N --cold-ramp R (per second, 0: unpaced) --cold-interval S (0: silent)\n"
    "        --max-connecting N (cold and stream connects in flight at once)\n"
    "stream: --stream N --stream-mbps B (0: unpaced) --stream-read (the server sends at B,\n"
    "        as wb-server --source does: the streams read and count what arrives)\n"
    "wb-sclient --describe   (limits and defaults as JSON)\n";

static void die(const char *fmt, const char *arg) {
    fprintf(stderr, "wb-sclient: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", usage);
    exit(2);
}

static double num(const char *name, const char *v, double lo, double hi) {
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || d < lo || d > hi || isnan(d)) {
        fprintf(stderr, "wb-sclient: --%s %s: expected a number from %g to %g\n", name, v, lo, hi);
        exit(2);
    }
    return d;
}

/* Every numeric flag's range, by flag name: the parser and --describe both read it. */
static const struct range {
    const char *flag;
    double lo, hi;
} ranges[] = {
    {"duration", 0, 1e7}, {"warmup", 0, 1e6}, {"seed", 0, 1e18}, {"cpu", 0, CPU_SETSIZE - 1},
    {"hot-conns", 0, MAX_CONNS}, {"rate", 0, 1e9}, {"requests-per-conn", 0, 1e9},
    {"connect-timeout", 0.001, 1e6}, {"response-timeout", 0.001, 1e6},
    {"max-outstanding", 1, MAX_OUTSTANDING}, {"late-us", 1, 1e9}, {"spin-us", 0, 1e6},
    {"slice-us", 0, 100000}, {"coalesce-us", 0, 1e6}, {"cold", 0, MAX_CONNS},
    {"cold-ramp", 0, 1e9}, {"cold-interval", 0, 1e6}, {"max-connecting", 1, MAX_CONNECTING},
    {"stream", 0, MAX_CONNS}, {"stream-mbps", 0, 1e6}, {"workers", 0, MAX_SHARDS},
    /* CLOCK_MONOTONIC instants in ns (int64_t) */
    {"window-start-ns", 1, 9e18}, {"window-end-ns", 1, 9e18},
};

static const struct range *range_of(const char *name) {
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
        if (!strcmp(ranges[i].flag, name)) return &ranges[i];
    fprintf(stderr, "wb-sclient: --%s has no range (a bug)\n", name);
    exit(2);
}

/* optarg of flag `name`, within its range. */
static double ranged(const char *name, const char *v) {
    const struct range *range = range_of(name);
    return num(name, v, range->lo, range->hi);
}

/* An instant in ns within its range: digits are read exactly (a double rounds past 2^53 ns of
 * uptime), other notations must still be whole. */
static int64_t instant(const char *name, const char *v) {
    double approx = ranged(name, v);
    char *end;
    errno = 0;
    long long exact = strtoll(v, &end, 10);
    if (!errno && end != v && !*end) return exact;
    if (approx != floor(approx)) {
        fprintf(stderr, "wb-sclient: --%s %s: expected whole ns of CLOCK_MONOTONIC\n", name, v);
        exit(2);
    }
    return (int64_t)approx;
}

/* The caller's window replaces --warmup/--duration: both derived from it, for the timeline
 * and the report's config. */
static void take_window(struct opts *opts) {
    if (!opts->window_start_ns != !opts->window_end_ns)
        die("%s", "--window-start-ns and --window-end-ns go together: give both or neither");
    if (!opts->window_end_ns) return;
    if (opts->window_end_ns <= opts->window_start_ns) {
        fprintf(stderr, "wb-sclient: --window-end-ns %lld is not after --window-start-ns %lld\n",
                (long long)opts->window_end_ns, (long long)opts->window_start_ns);
        exit(2);
    }
    int64_t now = (int64_t)now_ns();
    opts->warmup_s = opts->window_start_ns > now ? (double)(opts->window_start_ns - now) / 1e9 : 0;
    opts->duration_s = (double)(opts->window_end_ns - opts->window_start_ns) / 1e9;
}

/* With the caller's window, a process that has finished it stays, idle, until its stdin ends
 * (or a stop signal): whoever reads its CPU at the window's end edge still finds it, then
 * closes stdin. One stopped by a signal has nothing to be read for: the caller stopping it
 * sends no second signal, and may not close stdin. */
static void hold_until_released(const struct opts *opts) {
    if (!opts->window_end_ns || stop_was_requested()) return;
    sigset_t waiting;
    sigprocmask(SIG_BLOCK, NULL, &waiting);
    sigdelset(&waiting, SIGTERM);
    sigdelset(&waiting, SIGINT);
    struct pollfd in = {.fd = STDIN_FILENO, .events = POLLIN};
    char buf[256];
    while (ppoll(&in, 1, NULL, &waiting) > 0 && !(in.revents & (POLLHUP | POLLERR | POLLNVAL)) &&
           read(STDIN_FILENO, buf, sizeof buf) > 0) {}
}

static void add_target(struct opts *opts, const char *spec) {
    char host[64];
    const char *colon = strrchr(spec, ':');
    if (!colon || (size_t)(colon - spec) >= sizeof host) die("--target %s: expected ADDR:PORT (e.g. 127.0.0.1:8080)", spec);
    if (opts->ntargets == MAX_TARGETS) {
        fprintf(stderr, "wb-sclient: --target %s: at most %d targets\n", spec, MAX_TARGETS);
        exit(2);
    }
    memcpy(host, spec, (size_t)(colon - spec));
    host[colon - spec] = 0;
    struct sockaddr_in *target = &opts->targets[opts->ntargets++];
    target->sin_family = AF_INET;
    target->sin_port = htons((uint16_t)num("target port", colon + 1, 1, 65535));
    if (inet_pton(AF_INET, host, &target->sin_addr) != 1)
        die("--target %s: the address must be an IPv4 literal (resolve names before calling)", spec);
}

static void add_source(struct opts *opts, struct in_addr addr) {
    if (opts->nsources % 256 == 0) {
        opts->sources = realloc(opts->sources, (size_t)(opts->nsources + 256) * sizeof *opts->sources);
        if (!opts->sources) die("%s", "out of memory");
    }
    opts->sources[opts->nsources++] = addr;
}

/* A CIDR gives its host addresses (network and broadcast left out below /31). */
static void parse_sources(struct opts *opts, const char *spec) {
    char *copy = strdup(spec), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *slash = strchr(tok, '/');
        struct in_addr addr;
        if (slash) *slash = 0;
        if (inet_pton(AF_INET, tok, &addr) != 1) die("--source %s: expected IPv4 addresses or a CIDR", spec);
        if (!slash) {
            add_source(opts, addr);
            continue;
        }
        int bits = (int)num("source prefix", slash + 1, 8, 32);
        uint32_t base = ntohl(addr.s_addr) & (bits ? ~0u << (32 - bits) : 0), n = 1u << (32 - bits);
        uint32_t first = n > 2 ? 1 : 0, last = n > 2 ? n - 2 : n - 1;
        for (uint32_t i = first; i <= last; i++) add_source(opts, (struct in_addr){htonl(base + i)});
    }
    free(copy);
}

/* Loopback answers from all of 127.0.0.0/8: give each PER_SOURCE_CONNS connections their own.
 * The rule is clients/sources.py's (loopback_fallback); tests/clients/test_sources.py holds
 * this copy to it. */
static void auto_sources(struct opts *opts) {
    int total = opts->hot_conns + opts->cold_conns + opts->stream_conns;
    for (int i = 0; i < opts->ntargets; i++)
        if ((ntohl(opts->targets[i].sin_addr.s_addr) >> 24) != 127) {
            if (total > PER_SOURCE_CONNS)
                fprintf(stderr, "wb-sclient: %d connections to a non-loopback target without --source: "
                                "the kernel may run out of ports; pass --source CIDR\n", total);
            return;
        }
    if (total <= PER_SOURCE_CONNS) return;
    for (int i = 0; i < (total + PER_SOURCE_CONNS - 1) / PER_SOURCE_CONNS; i++)
        add_source(opts, (struct in_addr){htonl(0x7f640001u + (uint32_t)i)}); /* 127.100.0.1 on */
    opts->sources_spec = "auto";
}

static void set_defaults(struct opts *opts) {
    *opts = (struct opts){.duration_s = 10, .cpu = -1, .path = "/", .connect_timeout_s = 5,
                       .response_timeout_s = 5, .max_outstanding = 1,
                       .max_connecting = 512, .seed = 1, .slice_us = 100};
}

/* What a caller may ask of this binary, so that no caller keeps a copy of it. */
static void describe(void) {
    struct opts opts;
    set_defaults(&opts);
    printf("{\"program\": \"wb-sclient\", \"version\": \"%s\",\n \"limits\": {\"target\": [1, %d]",
           SCLIENT_VERSION, MAX_TARGETS);
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
        printf(", \"%s\": [%.17g, %.17g]", ranges[i].flag, ranges[i].lo, ranges[i].hi);
    printf("},\n \"defaults\": {\"duration_s\": %g, \"path\": \"%s\", \"connect_timeout_s\": %g,"
           " \"response_timeout_s\": %g, \"max_outstanding\": %d,"
           " \"max_connecting\": %d, \"seed\": %llu, \"slice_us\": %d}}\n",
           opts.duration_s, opts.path, opts.connect_timeout_s, opts.response_timeout_s, opts.max_outstanding,
           opts.max_connecting, (unsigned long long)opts.seed, opts.slice_us);
}

static void parse_args(struct opts *opts, int argc, char **argv) {
    static const struct option longopts[] = {
        {"target", 1, 0, 't'}, {"source", 1, 0, 'S'}, {"duration", 1, 0, 'd'},
        {"warmup", 1, 0, 'w'}, {"seed", 1, 0, 's'}, {"cpu", 1, 0, 'c'},
        {"hot-conns", 1, 0, 'H'}, {"rate", 1, 0, 'r'}, {"arrivals", 1, 0, 'a'},
        {"requests-per-conn", 1, 0, 'n'}, {"pick", 1, 0, 'P'}, {"overload", 1, 0, 'O'}, {"path", 1, 0, 'p'}, {"connect-timeout", 1, 0, 'C'},
        {"response-timeout", 1, 0, 'R'}, {"max-outstanding", 1, 0, 'm'}, {"late-us", 1, 0, 'l'},
        {"spin-us", 1, 0, 'x'}, {"slice-us", 1, 0, 'L'}, {"coalesce-us", 1, 0, 'z'},
        {"cold", 1, 0, 'k'}, {"cold-ramp", 1, 0, 'K'},
        {"cold-interval", 1, 0, 'I'}, {"max-connecting", 1, 0, 'M'}, {"stream", 1, 0, 'b'},
        {"stream-mbps", 1, 0, 'B'}, {"stream-read", 0, 0, 'G'}, {"json", 1, 0, 'j'}, {"workers", 1, 0, 'W'},
        {"window-start-ns", 1, 0, 'T'}, {"window-end-ns", 1, 0, 'E'},
        {"help", 0, 0, 'h'}, {"describe", 0, 0, 'D'}, {0, 0, 0, 0}};
    set_defaults(opts);
    const char *sources = NULL;
    int opt;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        const char *name = opt == '?' ? "" : longopts[0].name;
        for (const struct option *lo = longopts; lo->name; lo++)
            if (lo->val == opt) name = lo->name;
        switch (opt) {
        case 't': {
            char *copy = strdup(optarg), *save = NULL;
            for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
                add_target(opts, tok);
            free(copy);
            break;
        }
        case 'S': sources = optarg; break;
        case 'd': opts->duration_s = ranged(name, optarg); break;
        case 'w': opts->warmup_s = ranged(name, optarg); break;
        case 's': opts->seed = (uint64_t)ranged(name, optarg); break;
        case 'c': opts->cpu = (int)ranged(name, optarg); break;
        case 'H': opts->hot_conns = (int)ranged(name, optarg); break;
        case 'r': opts->rate = ranged(name, optarg); break;
        case 'a':
            if (strcmp(optarg, "fixed") && strcmp(optarg, "poisson")) die("--arrivals %s: expected fixed or poisson", optarg);
            opts->poisson = !strcmp(optarg, "poisson");
            break;
        case 'n': opts->requests_per_conn = (int)ranged(name, optarg); break;
        case 'P':
            if (strcmp(optarg, "last") && strcmp(optarg, "random")) die("--pick %s: expected last or random", optarg);
            opts->pick_random = !strcmp(optarg, "random");
            break;
        case 'O':
            if (strcmp(optarg, "queue") && strcmp(optarg, "sclient")) die("--overload %s: expected queue or sclient", optarg);
            opts->sclient_overload = !strcmp(optarg, "sclient");
            break;
        case 'p':
            if (optarg[0] != '/' || strpbrk(optarg, " \r\n\"\\")) die("--path %s: expected an absolute URL path without spaces or quotes", optarg);
            opts->path = optarg;
            break;
        case 'C': opts->connect_timeout_s = ranged(name, optarg); break;
        case 'R': opts->response_timeout_s = ranged(name, optarg); break;
        case 'm': opts->max_outstanding = (int)ranged(name, optarg); break;
        case 'l': opts->late_us = ranged(name, optarg); break;
        case 'x':
            opts->spin_us = (int)ranged(name, optarg);
            opts->spin_fixed = 1;
            break;
        case 'L': opts->slice_us = (int)ranged(name, optarg); break;
        case 'z': opts->coalesce_us = (int)ranged(name, optarg); break;
        case 'k': opts->cold_conns = (int)ranged(name, optarg); break;
        case 'K': opts->cold_ramp = ranged(name, optarg); break;
        case 'I': opts->cold_interval_s = ranged(name, optarg); break;
        case 'M': opts->max_connecting = (int)ranged(name, optarg); break;
        case 'b': opts->stream_conns = (int)ranged(name, optarg); break;
        case 'B': opts->stream_mbps = ranged(name, optarg); break;
        case 'G': opts->stream_read = 1; break;
        case 'j': opts->json_path = optarg; break;
        case 'W': opts->workers = (int)ranged(name, optarg); break;
        case 'T': opts->window_start_ns = instant(name, optarg); break;
        case 'E': opts->window_end_ns = instant(name, optarg); break;
        case 'h': fputs(usage, stdout); exit(0);
        case 'D': describe(); exit(0);
        default: die("%s", "unknown option");
        }
    }
    if (optind < argc) die("unexpected argument %s", argv[optind]);
    take_window(opts);
    if (!opts->ntargets) die("%s", "--target ADDR:PORT is required");
    if (!opts->hot_conns && !opts->cold_conns && !opts->stream_conns)
        die("%s", "nothing to do: give --hot-conns, --cold or --stream");
    if (opts->duration_s <= 0 && !cold_only(opts))
        die("%s", "--duration 0 (hold until signalled) is only for cold-only runs");
    if (opts->rate > 0 && !opts->hot_conns) die("%s", "--rate needs --hot-conns");
    if (opts->stream_read && !opts->stream_conns) die("%s", "--stream-read needs --stream N");
    if (opts->sclient_overload && (opts->rate <= 0 || opts->requests_per_conn != 1))
        die("%s", "--overload sclient opens a socket per scheduled send: give --rate R and "
                  "--requests-per-conn 1");
    if (sources && strcmp(sources, "auto")) {
        parse_sources(opts, sources);
        opts->sources_spec = sources;
    } else {
        auto_sources(opts);
    }
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl); /* raise the soft limit to the hard one */
    opts->nofile_limit = rl.rlim_max > 1u << 30 ? 1 << 30 : (int)rl.rlim_max;
}

/* Share i of n parts of total, and where it starts. */
static int part(int total, int i, int n, int *first) {
    *first = (int)((long)total * i / n);
    return (int)((long)total * (i + 1) / n) - *first;
}

/* sched_setattr(2)'s argument; glibc has no wrapper or declaration. */
struct sched_attr_v1 {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
};

/* The slice this thread asks of EEVDF, in us (Linux 6.12+ reports it; 0: unknown). */
static int current_slice(void) {
    struct sched_attr_v1 attr;
    if (syscall(SYS_sched_getattr, 0, &attr, sizeof attr, 0) < 0 || attr.policy != 0) return 0;
    return (int)(attr.runtime / 1000);
}

/* A short slice lets the generator, when woken for a send, preempt a CPU-bound neighbour at
 * once instead of after the neighbour's slice; its share of the CPU stays the same. Keeps the
 * policy and nice value it was started with; older kernels ignore it (reported as null). */
static int set_slice(int us) {
    struct sched_attr_v1 attr;
    if (syscall(SYS_sched_getattr, 0, &attr, sizeof attr, 0) < 0 || attr.policy != 0) return 0;
    attr.size = sizeof attr;
    attr.runtime = (uint64_t)us * 1000;
    if (syscall(SYS_sched_setattr, 0, &attr, 0) < 0) return 0;
    return current_slice();
}

static pid_t children[MAX_SHARDS];
static int nchildren;
static void forward_signal(int sig) {
    for (int i = 0; i < nchildren; i++) kill(children[i], sig);
}

int main(int argc, char **argv) {
    struct opts opts;
    parse_args(&opts, argc, argv);
    if (opts.cpu >= 0) {
        /* refused here, not at cold_ready: pinning once proves the CPU may be used (the
           process's affinity is no limit to sched_setaffinity, its cpuset is); a cold-only
           run then ramps on the CPUs it was started with */
        cpu_set_t started_with;
        int ramp_mask = pins_at_ready(&opts) &&
                        sched_getaffinity(0, sizeof started_with, &started_with) == 0;
        if (pin_cpu(opts.cpu) < 0) {
            fprintf(stderr, "wb-sclient: --cpu %d: %s; fix: pass a CPU this process may use "
                            "(its cpuset: cat /proc/self/status | grep Cpus_allowed_list)\n",
                    opts.cpu, strerror(errno));
            return 2;
        }
        if (ramp_mask) sched_setaffinity(0, sizeof started_with, &started_with);
    }
    prctl(PR_SET_TIMERSLACK, 1UL); /* wake for scheduled sends to the microsecond */
    opts.slice_us_set = opts.slice_us ? set_slice(opts.slice_us) : current_slice();

    long needed = (long)opts.hot_conns + opts.cold_conns + opts.stream_conns;
    long per_shard = opts.nofile_limit - FD_RESERVE;
    int nshards = opts.workers ? opts.workers : (int)((needed + per_shard - 1) / per_shard);
    if (nshards < 1) nshards = 1;
    if (nshards > MAX_SHARDS) {
        fprintf(stderr, "wb-sclient: %ld connections need %d worker processes, more than %d; "
                        "fix: ask for fewer connections per generator\n", needed, nshards, MAX_SHARDS);
        return 2;
    }
    if (needed / nshards > per_shard) {
        fprintf(stderr, "wb-sclient: %ld connections over %d worker(s) exceed RLIMIT_NOFILE %d; "
                        "fix: raise --workers or leave it 0 (automatic)\n",
                needed, nshards, opts.nofile_limit);
        return 2;
    }

    int tl_len = opts.duration_s > 0 ? (int)ceil(opts.warmup_s + opts.duration_s) + 2 : HOLD_TIMELINE_S;
    size_t slot = (sizeof(struct result) + (size_t)tl_len * sizeof(struct timeline_entry) + 4095) & ~4095ul;
    char *shm = mmap(NULL, slot * (size_t)(nshards + 1), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shm == MAP_FAILED) { perror("wb-sclient: mmap"); return 1; }
    struct shard shards[MAX_SHARDS];
    for (int i = 0; i <= nshards; i++) {
        struct result *result = (struct result *)(shm + slot * (size_t)i);
        result->timeline_len = tl_len;
        hist_init(&result->corrected);
        hist_init(&result->uncorrected);
        hist_init(&result->tcp_srtt);
        hist_init(&result->wake_late);
    }
    for (int i = 0; i < nshards; i++) {
        struct shard *shard = &shards[i];
        shard->index = i;
        shard->nshards = nshards;
        shard->hot = part(opts.hot_conns, i, nshards, &shard->hot_first);
        shard->cold = part(opts.cold_conns, i, nshards, &shard->cold_first);
        shard->stream = part(opts.stream_conns, i, nshards, &shard->stream_first);
        /* each connection offers the same share of the rate, whichever shard holds it */
        shard->rate_share = opts.hot_conns ? opts.rate * shard->hot / opts.hot_conns : 0;
        shard->notify_fd = -1;
    }

    uint64_t t0 = now_ns();
    struct result *total = (struct result *)(shm + slot * (size_t)nshards);
    int unfinished = 0;
    if (nshards == 1) {
        if (run_shard(&opts, &shards[0], (struct result *)shm)) return 1;
        hold_until_released(&opts);
        result_merge(total, (struct result *)shm);
    } else {
        int pipefd[2];
        if (pipe(pipefd) < 0) { perror("wb-sclient: pipe"); return 1; }
        sigset_t stop, old;
        sigemptyset(&stop);
        sigaddset(&stop, SIGTERM);
        sigaddset(&stop, SIGINT);
        sigprocmask(SIG_BLOCK, &stop, &old);
        fflush(stdout);
        for (int i = 0; i < nshards; i++) {
            shards[i].notify_fd = pipefd[1];
            pid_t pid = fork();
            if (pid < 0) { perror("wb-sclient: fork"); forward_signal(SIGKILL); return 1; }
            if (pid == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                close(pipefd[0]);
                int failed = run_shard(&opts, &shards[i], (struct result *)(shm + slot * (size_t)i));
                hold_until_released(&opts);
                _exit(failed);
            }
            children[nchildren++] = pid;
        }
        close(pipefd[1]);
        if (pins_at_ready(&opts)) pin_cpu(opts.cpu); /* the parent only waits: out of the ramp's way */
        struct sigaction sa = {.sa_handler = forward_signal};
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        sigprocmask(SIG_SETMASK, &old, NULL);
        long established = 0;
        int reported = 0;
        for (int32_t v;;) {
            ssize_t got = read(pipefd[0], &v, sizeof v);
            if (got < 0 && errno == EINTR) continue;
            if (got != sizeof v) break;
            established += v;
            if (++reported == nshards && cold_only(&opts)) {
                printf("{\"event\": \"cold_ready\", \"established\": %ld}\n", established);
                fflush(stdout);
            }
        }
        for (int i = 0; i < nshards; i++) {
            while (waitpid(children[i], NULL, 0) < 0 && errno == EINTR) {}
            struct result *result = (struct result *)(shm + slot * (size_t)i);
            if (!result->finished) unfinished++;
            result_merge(total, result);
        }
    }
    double wall_s = (double)(now_ns() - t0) / 1e9;
    return report_write(&opts, total, nshards, wall_s, unfinished) ? 1 : 0;
}
