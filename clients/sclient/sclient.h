/* wb-sclient: options, the per-shard result block, and the module interfaces. */
#ifndef WB_SCLIENT_H
#define WB_SCLIENT_H

#include <netinet/in.h>
#include <stdint.h>

#include "hist.h"

#define SCLIENT_VERSION "1.0"
#define MAX_TARGETS 64
#define PER_SOURCE_CONNS 5000 /* sources.CONNS_PER_SOURCE: keeps the kernel's port search short */
#define LEAD_QUANTILE 0.99  /* adaptive lead: covers this share of recent wake-ups (lead.c) */
#define LEAD_MAX_NS 2000000LL /* at most 2 ms of polling before a send */

struct opts {
    struct sockaddr_in targets[MAX_TARGETS];
    int ntargets;
    struct in_addr *sources; /* NULL: let the kernel choose */
    int nsources;
    const char *sources_spec; /* as given, or "auto" */
    double duration_s, warmup_s;
    /* The caller's window on CLOCK_MONOTONIC, measured instead of --warmup/--duration's
     * (0: none given); the process then waits for stdin's end before it exits (main.c). */
    int64_t window_start_ns, window_end_ns;
    uint64_t seed;
    int cpu; /* -1: not pinned */
    /* hot */
    int hot_conns;
    double rate; /* requests per second offered by all shards together; 0: closed loop */
    int poisson;
    int requests_per_conn; /* 0: persistent */
    /* S-Client (Banga & Druschel, USITS 1997): each scheduled send opens its own socket at
     * its time, aborted at its connect or response timeout, so the offered rate never waits
     * for the server; hot_conns is then the most sockets in flight at once. Otherwise sends
     * wait in a backlog for a free connection of the fixed pool. */
    int sclient_overload;
    int pick_random; /* open loop: send on a random ready connection, not the one that finished last */
    const char *path;
    double connect_timeout_s, response_timeout_s;
    int max_outstanding;
    double late_us; /* a send whose scheduler slip exceeds this is late; 0: not counted (the
                     * threshold is the validity rule's, clients/validity.py: it is told) */
    int spin_us;    /* busy-poll this close to a scheduled send, and this long after one */
    int spin_fixed; /* --spin-us given; otherwise the lead before a send adapts (lead.c) */
    int coalesce_us; /* never sleep for less: fewer wake-ups, up to this much send slip */
    int slice_us;     /* EEVDF slice to ask for (0: leave the kernel's) */
    int slice_us_set; /* what the kernel reports after asking (0: not reported) */
    /* cold */
    int cold_conns;
    double cold_ramp; /* connection attempts per second; 0: as fast as allowed */
    double cold_interval_s; /* 0: silent */
    int max_connecting;
    /* stream */
    int stream_conns;
    double stream_mbps; /* 0: unpaced */
    int stream_read; /* the server sends (wb-server --source): the streams read, never write */
    /* output, sharding */
    const char *json_path;
    int workers; /* 0: automatic from RLIMIT_NOFILE */
    int nofile_limit;
};

/* One shard's slice of the work: global connection indices [first, first + n). */
struct shard {
    int index, nshards;
    int hot, cold, stream;
    int hot_first, cold_first, stream_first;
    double rate_share; /* this shard's part of opts.rate: its hot connections' share */
    int notify_fd; /* sharded cold runs: write the established count here; -1 otherwise */
};

struct timeline_entry {
    uint64_t sent, replies, errors, late; /* late: scheduled sends that left late (--late-us) */
};

/* Everything a shard measures; lives in shared memory so the parent can merge. */
struct result {
    double window_s, established_s, cpu_window_user_s, cpu_window_sys_s, cpu_user_s, cpu_sys_s;
    double run_delay_window_s; /* runnable but not running, in the window */
    double spin_idle_s;        /* polls ahead of a deadline that found nothing, in the window */
    double lead_sum_ns;        /* lead of each sleep that ended before a scheduled send */
    uint64_t lead_sleeps, lead_max_ns;
    double contended_s; /* window time without a lead: another task wanted the CPU */
    double first_send_unix_s; /* wall clock at the first hot request sent (0: none): a cluster's start lag */
    int64_t window_start_ns, window_end_ns; /* CLOCK_MONOTONIC edges this shard counted between */
    uint64_t sent, queued, dropped, replies, scheduled, late, max_slip_ns;
    uint64_t no_socket; /* S-Client: scheduled sends that found every socket in flight */
    /* at the window's start and end: scheduled sends waiting for a connection, and requests
     * sent and neither answered nor timed out (S-Client: sockets whose attempt is under way) */
    uint64_t waiting_start, in_flight_start, waiting_end, in_flight_end;
    uint64_t by_status[600];
    uint64_t err_connect_timeout, err_refused, err_reset, err_response_timeout, err_no_local_port,
        err_no_descriptor, err_other;
    uint64_t cold_requested, cold_established, cold_held, cold_reconnected, cold_failed;
    uint64_t cold_requests, cold_replies;
    uint64_t stream_bytes;
    uint64_t rss_before_kb, rss_ready_kb, rss_end_kb;
    int finished;
    struct hist corrected, uncorrected;
    struct hist tcp_srtt; /* per hot connection: the kernel's smoothed RTT at the window's end */
    struct hist wake_late; /* how much later than asked each timed-out sleep returned */
    int timeline_len;
    struct timeline_entry timeline[];
};

/* Cold-only runs announce {"event": "cold_ready"} once every cold connection is open. */
static inline int cold_only(const struct opts *opts) {
    return opts->cold_conns && !opts->hot_conns && !opts->stream_conns;
}

/* Every handshake on loopback runs both ends' TCP on the connecting CPU (the receiver's in the
 * sender's softirq), so a ramp kept to --cpu leaves the server's CPU partly idle
 * (docs/bench-clients.md, "Where a million connections' time goes"). A cold-only run opens
 * its connections on every CPU it may use and keeps to --cpu from cold_ready on
 * (cold_announce): nothing is measured before then. Any other run keeps to --cpu from the
 * start (main). */
static inline int pins_at_ready(const struct opts *opts) {
    return opts->cpu >= 0 && cold_only(opts);
}

int run_shard(const struct opts *opts, const struct shard *shard, struct result *result);
/* Whether a stop signal (SIGTERM, SIGINT) ended run_shard early: the signal is spent, so
 * nothing may then wait for another one. */
int stop_was_requested(void);
void result_merge(struct result *into, const struct result *from);
int report_write(const struct opts *opts, const struct result *result, int nshards, double wall_s,
                 int unfinished);


#endif
