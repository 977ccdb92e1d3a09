/* What both tools' loaders (ktrace.c, whoran.c) share: exit statuses, the checks any use starts
 * with, the command line's common options, the trees, the window and its stdin protocol, and
 * the document's common parts. Each loader defines TOOL_NAME and TOOL_USAGE. */
#ifndef WB_LOADER_H
#define WB_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bpf/libbpf.h>

#include "common.h"

/* Why a tool cannot run: one line on stderr, and its own exit status. */
enum kt_exit {
    EXIT_OK = 0,
    EXIT_FAILED = 1,      /* anything else (the message says what) */
    EXIT_USAGE = 2,
    EXIT_NO_CAPABILITY = 3,
    EXIT_NO_BTF = 4,
    EXIT_NO_TRACEPOINT = 5,
};

extern const char TOOL_NAME[];  /* as its messages begin: "wb-ktrace" */
extern const char TOOL_USAGE[]; /* what --help and a bad command line print */

extern const char *const ROLES[KT_ROLES]; /* enum kt_role's names in the documents */

extern char libbpf_said[512]; /* libbpf's last warning: the detail of a failed load */

/* libbpf's warnings kept in libbpf_said, not printed. */
void keep_libbpf_warnings(void);

__attribute__((noreturn, format(printf, 2, 3)))
void die(enum kt_exit status, const char *format, ...);
/* The line, then the usage, exit 2. */
__attribute__((noreturn, format(printf, 1, 2)))
void usage_error(const char *format, ...);

/* The checks any use starts with: capability, BTF, each of the tool's tracepoints. */
void check_machine(const char *const *tracepoints, size_t count);
/* A skeleton's load failed (errno): why, as a capability or the verifier's detail. */
__attribute__((noreturn)) void die_unloaded(void);

#define MAX_ROOTS 64

/* The command line both tools take: --pid and --generator-pid (the measured trees), --duration,
 * --probe, --help. */
struct common_options {
    long roots[KT_ROLES][MAX_ROOTS];
    int root_count[KT_ROLES];
    double duration; /* -1: driven on stdin */
    bool probe;
};

#define COMMON_OPTIONS_INIT {.root_count = {0, 0}, .duration = -1, .probe = false}

/* argv[*i], and its value (*i then points at it), if it is a common option; false if not. */
bool common_option(int argc, char **argv, int *i, struct common_options *options);

/* Attaches follow_fork, then puts each root and its descendants into the tgids map as its
 * role's: forks are followed before the trees are walked, so that none slips between. */
struct bpf_link *follow_trees(struct bpf_program *follow_fork, int tgids_fd,
                              const struct common_options *options);

/* Each program attached into links (one that will not is fatal); each link destroyed. */
void attach_programs(struct bpf_program *const *programs, size_t count, struct bpf_link **links);
void destroy_links(struct bpf_link **links, size_t count);

uint64_t now_ns(void);
/* Until CLOCK_MONOTONIC reads at (at once if it has, or at is 0). */
void sleep_until(uint64_t at);

/* The window counted over: its edges on CLOCK_MONOTONIC (bpf_ktime_get_ns's clock), ns. */
struct window {
    uint64_t start_ns, end_ns;
};

/* A tool's window edge at CLOCK_MONOTONIC at (0: at once): the instant counting went on (its
 * programs attached first) or had gone off (detached after). */
typedef uint64_t window_edge(void *tool, uint64_t at);

/* The window: with duration > 0, from now for that long (or until SIGINT/SIGTERM); else driven
 * on stdin (ready / start [NS] / started / stop [NS]). False at end of input: no document. */
bool run_window(double duration, window_edge *open, window_edge *close, void *tool,
                struct window *window);

void print_window(struct window window);
/* s as a JSON string (the reasons quote libbpf and strerror) */
void print_json_string(const char *s);
/* The events map's CPUs summed, and the document's end. */
void print_events(int events_fd, int cpus);

int possible_cpus(void);
/* The CPUs' values of a per-CPU map entry added up: its structs hold __u64 fields only. */
void sum_cpus(void *total, const void *per_cpu, size_t size, int cpus);

#endif
