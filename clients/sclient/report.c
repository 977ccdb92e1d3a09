/* Merging shard results and writing the result document (clients/SCHEMA.md). */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "os.h"
#include "pacing.h"
#include "sclient.h"

/* The results format's version, given by the build from clients/schema.py (clients/build.mk):
 * one definition for the Python that reads the documents and the C that writes them. */
#ifndef SCHEMA_VERSION
#error "build wb-sclient with make (clients/build.mk passes -DSCHEMA_VERSION)"
#endif

void result_merge(struct result *into, const struct result *from) {
#define SUM(f) into->f += from->f
    SUM(cpu_window_user_s); SUM(cpu_window_sys_s); SUM(cpu_user_s); SUM(cpu_sys_s); SUM(run_delay_window_s);
    SUM(spin_idle_s); SUM(lead_sum_ns); SUM(lead_sleeps); SUM(contended_s);
    SUM(sent); SUM(queued); SUM(dropped); SUM(replies); SUM(scheduled); SUM(late);
    SUM(no_socket); SUM(waiting_start); SUM(in_flight_start); SUM(waiting_end); SUM(in_flight_end);
    SUM(err_connect_timeout); SUM(err_refused); SUM(err_reset); SUM(err_response_timeout);
    SUM(err_no_local_port); SUM(err_no_descriptor);
    SUM(err_other); SUM(cold_requested); SUM(cold_established); SUM(cold_held);
    SUM(cold_reconnected); SUM(cold_failed); SUM(cold_requests); SUM(cold_replies);
    SUM(stream_bytes); SUM(rss_before_kb); SUM(rss_ready_kb); SUM(rss_end_kb);
#undef SUM
    for (int i = 0; i < 600; i++) into->by_status[i] += from->by_status[i];
    for (int i = 0; i < into->timeline_len && i < from->timeline_len; i++) {
        into->timeline[i].sent += from->timeline[i].sent;
        into->timeline[i].replies += from->timeline[i].replies;
        into->timeline[i].errors += from->timeline[i].errors;
        into->timeline[i].late += from->timeline[i].late;
    }
    hist_merge(&into->corrected, &from->corrected);
    hist_merge(&into->uncorrected, &from->uncorrected);
    hist_merge(&into->tcp_srtt, &from->tcp_srtt);
    hist_merge(&into->wake_late, &from->wake_late);
    if (from->lead_max_ns > into->lead_max_ns) into->lead_max_ns = from->lead_max_ns;
    if (from->max_slip_ns > into->max_slip_ns) into->max_slip_ns = from->max_slip_ns;
    if (from->window_s > into->window_s) into->window_s = from->window_s;
    /* the merged edges: the interval every shard counted (the latest start, earliest end) */
    if (from->window_start_ns > into->window_start_ns) into->window_start_ns = from->window_start_ns;
    if (!into->window_end_ns || from->window_end_ns < into->window_end_ns)
        into->window_end_ns = from->window_end_ns;
    if (from->established_s > into->established_s) into->established_s = from->established_s;
    if (from->first_send_unix_s && (!into->first_send_unix_s ||
                                    from->first_send_unix_s < into->first_send_unix_s))
        into->first_send_unix_s = from->first_send_unix_s;
}

/* The threshold late sends were counted against, or null when none was given (then none
 * were counted: the threshold is the validity rule's, clients/validity.py). */
static void write_late_threshold(FILE *f, const struct opts *o) {
    if (o->late_us > 0) fprintf(f, "%.6g", o->late_us); else fprintf(f, "null");
}

static void write_config(FILE *f, const struct opts *o, int nshards) {
    fprintf(f, "{\"targets\": [");
    for (int i = 0; i < o->ntargets; i++) {
        char host[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &o->targets[i].sin_addr, host, sizeof host);
        fprintf(f, "%s\"%s:%d\"", i ? ", " : "", host, ntohs(o->targets[i].sin_port));
    }
    fprintf(f, "], \"source_addrs\": %s%s%s, \"source_addr_count\": %d", o->sources_spec ? "\"" : "",
            o->sources_spec ? o->sources_spec : "null", o->sources_spec ? "\"" : "", o->nsources);
    fprintf(f, ", \"hot_conns\": %d, \"rate_rps\": ", o->hot_conns);
    if (o->rate > 0) fprintf(f, "%.6g", o->rate); else fprintf(f, "null");
    fprintf(f, ", \"arrivals\": \"%s\", \"requests_per_conn\": ", o->poisson ? "poisson" : "fixed");
    if (o->requests_per_conn) fprintf(f, "%d", o->requests_per_conn); else fprintf(f, "null");
    fprintf(f, ", \"pick\": \"%s\", \"overload\": \"%s\"", o->pick_random ? "random" : "last",
            o->sclient_overload ? "sclient" : "queue");
    fprintf(f, ", \"path\": \"%s\", \"connect_timeout_s\": %.6g, \"response_timeout_s\": %.6g"
               ", \"max_outstanding\": %d, \"late_threshold_us\": ",
            o->path, o->connect_timeout_s, o->response_timeout_s, o->max_outstanding);
    write_late_threshold(f, o);
    fprintf(f, ", \"spin_us\": %d, \"coalesce_us\": %d, \"slice_us\": %d", o->spin_us,
            o->coalesce_us, o->slice_us);
    fprintf(f, ", \"cold_conns\": %d, \"cold_ramp_rps\": ", o->cold_conns);
    if (o->cold_ramp > 0) fprintf(f, "%.6g", o->cold_ramp); else fprintf(f, "null");
    fprintf(f, ", \"cold_interval_s\": ");
    if (o->cold_interval_s > 0) fprintf(f, "%.6g", o->cold_interval_s); else fprintf(f, "null");
    fprintf(f, ", \"max_connecting\": %d, \"stream_conns\": %d, \"stream_mbps\": ", o->max_connecting,
            o->stream_conns);
    if (o->stream_mbps > 0) fprintf(f, "%.6g", o->stream_mbps); else fprintf(f, "null");
    fprintf(f, ", \"duration_s\": %.6g, \"warmup_s\": %.6g, \"seed\": %llu, \"cpu\": ", o->duration_s,
            o->warmup_s, (unsigned long long)o->seed);
    if (o->cpu >= 0) fprintf(f, "%d", o->cpu); else fprintf(f, "null");
    fprintf(f, ", \"shards\": %d, \"nofile_limit\": %d}", nshards, o->nofile_limit);
}

static double per_s(uint64_t n, double s) { return s > 0 ? (double)n / s : 0; }

/* How sends were timed: the lead polled before each (chosen, or --spin-us), what it cost,
 * and the wake-up lateness it answered. */
static void write_schedule(FILE *f, const struct opts *o, const struct result *r, double cpu_wall) {
    fprintf(f, ", \"schedule\": {\"mode\": \"%s\", \"lead_us\": ", o->spin_fixed ? "fixed" : "adaptive");
    if (o->spin_fixed)
        fprintf(f, "%d, \"lead_us_max\": %d", o->spin_us, o->spin_us);
    else if (r->lead_sleeps)
        fprintf(f, "%.1f, \"lead_us_max\": %.1f", r->lead_sum_ns / (double)r->lead_sleeps / 1e3,
                r->lead_max_ns / 1e3);
    else /* no sleep ended early for a send: none was far enough ahead, or the CPU was busy */
        fprintf(f, "null, \"lead_us_max\": null");
    int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    if (o->spin_fixed) fprintf(f, ", \"lead_quantile\": null, \"lead_limit_us\": null");
    else fprintf(f, ", \"lead_quantile\": %g, \"lead_limit_us\": %g", LEAD_QUANTILE, LEAD_MAX_NS / 1e3);
    fprintf(f, ", \"spin_s\": %.3f, \"spin_pct\": %.1f, \"contended_s\": %.3f, \"timer_slack_ns\": ",
            r->spin_idle_s, cpu_wall > 0 ? 100 * r->spin_idle_s / cpu_wall : 0, r->contended_s);
    if (slack >= 0) fprintf(f, "%d", slack); else fprintf(f, "null");
    fprintf(f, ", \"slice_us\": ");
    if (o->slice_us_set) fprintf(f, "%d", o->slice_us_set); else fprintf(f, "null");
    const struct hist *w = &r->wake_late;
    fprintf(f, ", \"wake_late\": {\"count\": %llu", (unsigned long long)w->count);
    if (w->count)
        fprintf(f, ", \"p50_us\": %.3f, \"p99_us\": %.3f, \"p999_us\": %.3f, \"max_us\": %.3f}}",
                hist_quantile_ns(w, 0.5) / 1e3, hist_quantile_ns(w, 0.99) / 1e3,
                hist_quantile_ns(w, 0.999) / 1e3, w->max_ns / 1e3);
    else
        fprintf(f, ", \"p50_us\": null, \"p99_us\": null, \"p999_us\": null, \"max_us\": null}}");
}

static void write_document(FILE *f, const struct opts *o, const struct result *r, int nshards,
                           double wall_s, int unfinished) {
    /* Facts only, a shard that did not finish among them: clients/validity.py judges them
     * (the one definition, used by `wanbench load` and `wanbench run`). */
    double cpu_s = r->window_s > 0 ? r->cpu_window_user_s + r->cpu_window_sys_s : r->cpu_user_s + r->cpu_sys_s;
    double cpu_wall = r->window_s > 0 ? r->window_s : wall_s;
    double cpu_pct = cpu_wall > 0 ? 100 * cpu_s / cpu_wall : 0;
    fprintf(f, "{\"schema_version\": %d, \"generator\": \"sclient\", \"generator_version\": \"%s\""
               ", \"valid\": true, \"invalid_reasons\": [], \"config\": ", SCHEMA_VERSION, SCLIENT_VERSION);
    write_config(f, o, nshards);
    fprintf(f, ", \"duration_s\": %.6f, \"warmup_s\": %.6g, \"offered_rate_rps\": ", r->window_s, o->warmup_s);
    if (o->hot_conns && o->rate > 0) fprintf(f, "%.6g", o->rate); else fprintf(f, "null");
    fprintf(f, ", \"request_rate_rps\": %.3f, \"reply_rate_rps\": %.3f", per_s(r->sent, r->window_s),
            per_s(r->replies, r->window_s));
    fprintf(f, ", \"requests\": {\"scheduled\": %llu, \"sent\": %llu, \"queued\": %llu, \"dropped\": %llu"
               ", \"no_socket\": %llu, \"waiting_start\": %llu, \"in_flight_start\": %llu"
               ", \"waiting_end\": %llu, \"in_flight_end\": %llu}",
            (unsigned long long)r->scheduled, (unsigned long long)r->sent,
            (unsigned long long)r->queued, (unsigned long long)r->dropped,
            (unsigned long long)r->no_socket, (unsigned long long)r->waiting_start,
            (unsigned long long)r->in_flight_start, (unsigned long long)r->waiting_end,
            (unsigned long long)r->in_flight_end);
    fprintf(f, ", \"replies\": {\"total\": %llu, \"by_status\": {", (unsigned long long)r->replies);
    for (int i = 0, first = 1; i < 600; i++)
        if (r->by_status[i]) {
            fprintf(f, "%s\"%d\": %llu", first ? "" : ", ", i, (unsigned long long)r->by_status[i]);
            first = 0;
        }
    fprintf(f, "}}, \"errors\": {\"connect_timeout\": %llu, \"refused\": %llu, \"reset\": %llu, "
               "\"response_timeout\": %llu, \"no_local_port\": %llu, \"no_descriptor\": %llu, "
               "\"other\": %llu}",
            (unsigned long long)r->err_connect_timeout, (unsigned long long)r->err_refused,
            (unsigned long long)r->err_reset, (unsigned long long)r->err_response_timeout,
            (unsigned long long)r->err_no_local_port, (unsigned long long)r->err_no_descriptor,
            (unsigned long long)r->err_other);
    fprintf(f, ", \"window\": {\"start_ns\": %lld, \"end_ns\": %lld}", (long long)r->window_start_ns,
            (long long)r->window_end_ns);
    fprintf(f, ", \"first_send_unix_s\": ");
    if (r->first_send_unix_s) fprintf(f, "%.6f", r->first_send_unix_s); else fprintf(f, "null");
    fprintf(f, ", \"late_sends\": ");
    if (o->late_us > 0) fprintf(f, "%llu", (unsigned long long)r->late); else fprintf(f, "null");
    fprintf(f, ", \"late_threshold_us\": ");
    write_late_threshold(f, o);
    fprintf(f, ", \"max_schedule_slip_us\": %.3f", r->max_slip_ns / 1e3);
    fprintf(f, ", \"latency\": {\"corrected\": ");
    hist_write_json(f, &r->corrected);
    fprintf(f, ", \"uncorrected\": ");
    hist_write_json(f, &r->uncorrected);
    fprintf(f, ", \"tcp_srtt\": ");
    hist_write_json(f, &r->tcp_srtt);
    fprintf(f, "}, \"timeline\": [");
    int last = 0; /* trailing empty seconds (an unbounded hold) are left out */
    for (int i = 0; i < r->timeline_len; i++)
        if (r->timeline[i].sent || r->timeline[i].replies || r->timeline[i].errors) last = i + 1;
    int span = (int)(o->warmup_s + r->window_s + 0.999);
    if (span > last) last = span < r->timeline_len ? span : r->timeline_len;
    for (int i = 0; i < last; i++) {
        fprintf(f, "%s{\"t_s\": %d, \"sent\": %llu, \"replies\": %llu, \"errors\": %llu",
                i ? ", " : "", i, (unsigned long long)r->timeline[i].sent,
                (unsigned long long)r->timeline[i].replies, (unsigned long long)r->timeline[i].errors);
        if (o->late_us > 0) fprintf(f, ", \"late\": %llu", (unsigned long long)r->timeline[i].late);
        fputc('}', f);
    }
    fprintf(f, "], \"cold\": {\"requested\": %llu, \"established\": %llu, \"held\": %llu, "
               "\"reconnected\": %llu, \"failed\": %llu, \"requests\": %llu, \"replies\": %llu, "
               "\"established_s\": ",
            (unsigned long long)r->cold_requested, (unsigned long long)r->cold_established,
            (unsigned long long)r->cold_held, (unsigned long long)r->cold_reconnected,
            (unsigned long long)r->cold_failed, (unsigned long long)r->cold_requests,
            (unsigned long long)r->cold_replies);
    if (o->cold_conns && r->established_s > 0) fprintf(f, "%.3f}", r->established_s); else fprintf(f, "null}");
    if (o->stream_conns) {
        fprintf(f, ", \"stream\": {\"conns\": %d, \"sender\": \"%s\", \"write_bytes\": %d, "
                   "\"target_mbps\": ", o->stream_conns, o->stream_read ? "server" : "generator", STREAM_CHUNK);
        if (o->stream_mbps > 0) fprintf(f, "%.6g", o->stream_mbps); else fprintf(f, "null");
        fprintf(f, ", \"achieved_mbps\": %.3f, \"bytes\": %llu}",
                r->window_s > 0 ? (double)r->stream_bytes * 8 / r->window_s / 1e6 : 0,
                (unsigned long long)r->stream_bytes);
    } else {
        fprintf(f, ", \"stream\": null");
    }
    fprintf(f, ", \"generator_cpu\": {\"user_s\": %.3f, \"sys_s\": %.3f, \"pct\": %.1f, "
               "\"run_delay_s\": %.3f, \"spin_idle_s\": %.3f, \"total_user_s\": %.3f, "
               "\"total_sys_s\": %.3f}",
            r->window_s > 0 ? r->cpu_window_user_s : r->cpu_user_s,
            r->window_s > 0 ? r->cpu_window_sys_s : r->cpu_sys_s, cpu_pct, r->run_delay_window_s,
            r->spin_idle_s, r->cpu_user_s, r->cpu_sys_s);
    write_schedule(f, o, r, cpu_wall);
    fprintf(f, ", \"generator_memory\": {\"rss_kb\": %llu, \"bytes_per_cold_conn\": ",
            (unsigned long long)r->rss_end_kb);
    if (o->cold_conns && r->cold_established && r->rss_ready_kb)
        fprintf(f, "%.1f}", (double)(r->rss_ready_kb - r->rss_before_kb) * 1024 / (double)r->cold_established);
    else
        fprintf(f, "null}");
    fprintf(f, ", \"shards\": %d, \"unfinished_shards\": %d}\n", nshards, unfinished);
}

int report_write(const struct opts *o, const struct result *r, int nshards, double wall_s,
                 int unfinished) {
    if (!o->json_path) {
        write_document(stdout, o, r, nshards, wall_s, unfinished);
        fflush(stdout);
        return 0;
    }
    char *tmp;
    if (asprintf(&tmp, "%s.tmp.%d", o->json_path, (int)getpid()) < 0) return -1;
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "wb-sclient: cannot write %s: %m\n", tmp);
        free(tmp);
        return -1;
    }
    write_document(f, o, r, nshards, wall_s, unfinished);
    int bad = fclose(f) != 0 || rename(tmp, o->json_path) != 0;
    if (bad) fprintf(stderr, "wb-sclient: cannot write %s: %m\n", o->json_path);
    free(tmp);
    return bad ? -1 : 0;
}
