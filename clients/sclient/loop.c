/* One shard's event loop: the connection state machine of hot, cold and stream connections. */
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "http.h"
#include "lead.h"
#include "os.h"
#include "pacing.h"
#include "ramp.h"
#include "rng.h"
#include "schedule.h"
#include "sclient.h"
#include "timers.h"

#define READ_BUF 65536
#define MAX_PARTIAL 8192
#define TICK_BATCH 256          /* scheduled sends handled per loop turn, so I/O is not starved */
#define BACKLOG_MAX 65536       /* intended sends waiting for a free connection */
#define RETRY_NS 10000000LL     /* pause before reconnecting after a failed connect */

struct loop {
    const struct opts *opts;   /* the whole generator's: rates and counts are totals */
    const struct shard *shard; /* this process's part of them */
    struct result *result;     /* what this shard measures */
    int epoll_fd;
    struct conn *conns;
    int nconns;
    char **requests; /* per target */
    size_t *request_len;
    int64_t start, window_start, window_end, end, now;
    struct rusage ru_window;
    uint64_t run_delay_window;
    int64_t spin_idle_ns; /* polls that found nothing to do: spinning, not work */
    int64_t spun_until;   /* the end of the last such poll, if the loop has spun since (else 0) */
    struct lead lead;
    uint32_t hot_awaiting; /* hot requests sent and not yet answered */
    int64_t last_hot_send;
    int window_open;
    struct timers timers; /* at most one live entry per connection (see conn_deadline) */
    /* hot */
    struct conn **ready; /* open connections that can send (S-Client: free sockets) */
    int nready;
    struct schedule schedule; /* open loop only */
    uint64_t rng;
    int64_t *backlog;
    size_t backlog_head, backlog_len;
    /* cold */
    struct ramp ramp;
    int cold_open, cold_ready_sent;
    /* stream: opened in turn, at most --max-connecting at once (all at once, their SYNs
     * overflow the listen queue and the retries back off for seconds), then paced */
    struct conn **streams;
    int nstreams, streams_opened, streams_connecting;
    struct pacing pacing;
    char buf[READ_BUF];
};

static volatile sig_atomic_t stop_requested;
static void on_stop_signal(int sig) { (void)sig; stop_requested = 1; }
int stop_was_requested(void) { return stop_requested; }

static int in_window(const struct loop *loop, int64_t t) {
    return t >= loop->window_start && t < loop->window_end;
}

/* The result to count in now, or NULL: the window has not opened yet or has ended. */
static struct result *window_result(const struct loop *loop) {
    return loop->window_open && loop->now < loop->window_end ? loop->result : NULL;
}

static struct timeline_entry *timeline_at(const struct loop *loop, int64_t t) {
    int64_t i = (t - loop->start) / 1000000000LL;
    if (i < 0) i = 0;
    if (i >= loop->result->timeline_len) i = loop->result->timeline_len - 1;
    return &loop->result->timeline[i];
}

/* Hot connections send on a schedule (open loop), not each as soon as it may (closed loop). */
static int open_loop(const struct loop *loop) {
    return loop->shard->hot && loop->shard->rate_share > 0;
}

/* Deadlines only move later in the common case, so the heap keeps one entry per connection
 * (armed_at) and re-arms it lazily when it fires early; an earlier deadline adds an entry. */
static void conn_deadline(struct loop *loop, struct conn *conn, int64_t at) {
    conn->deadline = at;
    if (at && (!conn->armed_at || at < conn->armed_at)) {
        timers_push(&loop->timers, at, (uint32_t)(conn - loop->conns));
        conn->armed_at = at;
    }
}

/* ---- connections ---- */

static void ready_add(struct loop *loop, struct conn *conn) {
    if (conn->ready_pos >= 0) return;
    conn->ready_pos = loop->nready;
    loop->ready[loop->nready++] = conn;
}

static void ready_del(struct loop *loop, struct conn *conn) {
    if (conn->ready_pos < 0) return;
    struct conn *last = loop->ready[--loop->nready];
    loop->ready[conn->ready_pos] = last;
    last->ready_pos = conn->ready_pos;
    conn->ready_pos = -1;
}

static int hot_can_send(const struct loop *loop, const struct conn *conn) {
    const struct opts *opts = loop->opts;
    return conn->state == OPEN && conn->outstanding < (uint32_t)opts->max_outstanding &&
           (!opts->requests_per_conn || conn->sent_on_conn < (uint32_t)opts->requests_per_conn);
}

static void count_error(struct loop *loop, enum err err, uint64_t n) {
    if (!n) return;
    timeline_at(loop, loop->now)->errors += n;
    if (!in_window(loop, loop->now)) return;
    struct result *result = loop->result;
    switch (err) {
    case E_CONNECT_TIMEOUT: result->err_connect_timeout += n; break;
    case E_REFUSED: result->err_refused += n; break;
    case E_RESET: case E_EOF: result->err_reset += n; break;
    case E_RESPONSE_TIMEOUT: result->err_response_timeout += n; break;
    case E_NO_LOCAL_PORT: result->err_no_local_port += n; break;
    case E_NO_DESCRIPTOR: result->err_no_descriptor += n; break;
    case E_OTHER: result->err_other += n; break;
    }
}

static void cold_enqueue(struct loop *loop, struct conn *conn) {
    ramp_enqueue(&loop->ramp, (uint32_t)(conn - loop->conns));
}

/* Closes a connection after an error or end of stream and arranges its replacement. */
static void conn_fail(struct loop *loop, struct conn *conn, enum err err) {
    int was = conn->state;
    if (conn->kind == HOT) {
        loop->hot_awaiting -= conn->outstanding;
        if (was == CONNECTING) count_error(loop, err, 1);
        else if (err != E_EOF || conn->outstanding)
            count_error(loop, err, conn->outstanding ? conn->outstanding : 1);
        ready_del(loop, conn);
        if (loop->opts->sclient_overload && err == E_RESPONSE_TIMEOUT) {
            /* aborted, as the S-Client does: a reset frees both ends at once (no TIME_WAIT
             * here, no reply written to a socket nobody reads there) */
            struct linger abort_now = {.l_onoff = 1, .l_linger = 0};
            setsockopt(conn->fd, SOL_SOCKET, SO_LINGER, &abort_now, sizeof abort_now);
        }
    } else if (conn->kind == COLD) {
        if (was == CONNECTING) loop->result->cold_failed++, loop->ramp.connecting--;
        else loop->cold_open--, conn->reopened = 1;
    } else {
        if (was == CONNECTING) loop->streams_connecting--;
        count_error(loop, err, 1);
    }
    close(conn->fd);
    conn->fd = -1;
    conn->state = CLOSED;
    conn->outstanding = conn->body_left = conn->partial_len = 0;
    free(conn->partial);
    conn->partial = NULL;
    conn->blocked = 0;
    if (conn->kind == COLD && was != CONNECTING) {
        conn_deadline(loop, conn, 0);
        cold_enqueue(loop, conn);
    } else if (conn->kind == HOT && loop->opts->sclient_overload) {
        conn_deadline(loop, conn, 0); /* S-Client: the socket is free for the next scheduled send */
        ready_add(loop, conn);
    } else {
        /* the pool: a lost connection is replaced at once, a failed connect after a pause */
        conn_deadline(loop, conn, loop->now + (was == CONNECTING ? RETRY_NS : 1));
    }
}

static void conn_connect(struct loop *loop, struct conn *conn) {
    const struct opts *opts = loop->opts;
    struct sockaddr_in dst = opts->targets[conn->gidx % (uint32_t)opts->ntargets];
    int one = 1;
    conn->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    conn->state = CONNECTING;
    conn->sent_on_conn = conn->pend_head = 0;
    if (conn->kind == COLD) loop->ramp.connecting++;
    if (conn->kind == STREAM) loop->streams_connecting++;
    if (conn->fd < 0) {
        conn_fail(loop, conn, errno == EMFILE || errno == ENFILE ? E_NO_DESCRIPTOR : E_OTHER);
        return;
    }
    if (conn->kind == HOT) setsockopt(conn->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (opts->nsources) {
        struct sockaddr_in src = {.sin_family = AF_INET,
                                  .sin_addr = opts->sources[conn->gidx % (uint32_t)opts->nsources]};
        /* the port is chosen at connect() from the full 4-tuple, not reserved at bind() */
        setsockopt(conn->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
        if (bind(conn->fd, (struct sockaddr *)&src, sizeof src) < 0) {
            conn_fail(loop, conn, E_OTHER);
            return;
        }
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                             .data.u32 = (uint32_t)(conn - loop->conns)};
    if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, conn->fd, &ev) < 0) {
        conn_fail(loop, conn, E_OTHER);
        return;
    }
    if (connect(conn->fd, (struct sockaddr *)&dst, sizeof dst) < 0 && errno != EINPROGRESS) {
        conn_fail(loop, conn, errno == ECONNREFUSED    ? E_REFUSED
                              : errno == EADDRNOTAVAIL ? E_NO_LOCAL_PORT /* every port in use */
                                                       : E_OTHER);
        return;
    }
    conn_deadline(loop, conn, loop->now + (int64_t)(opts->connect_timeout_s * 1e9));
}

static int conn_write(struct conn *conn, const char *p, size_t n) {
    ssize_t written = send(conn->fd, p, n, MSG_NOSIGNAL);
    return written == (ssize_t)n ? 0 : -1;
}

/* A request went out: on an open connection, or (S-Client) as its connection attempt. */
static void count_sent(struct loop *loop, int64_t intended) {
    loop->last_hot_send = loop->now;
    if (!loop->result->first_send_unix_s) {
        struct timespec wall;
        clock_gettime(CLOCK_REALTIME, &wall);
        loop->result->first_send_unix_s = (double)wall.tv_sec + (double)wall.tv_nsec / 1e9;
    }
    timeline_at(loop, loop->now)->sent++;
    /* by intended time, as scheduled, late and latency are: a backlog from before the window
     * (hot connections still connecting through the warm-up) sent inside it is not the
     * window's rate */
    if (in_window(loop, intended)) loop->result->sent++;
}

static void hot_send(struct loop *loop, struct conn *conn, int64_t intended) {
    const struct opts *opts = loop->opts;
    uint32_t target = conn->gidx % (uint32_t)opts->ntargets;
    if (conn_write(conn, loop->requests[target], loop->request_len[target]) < 0) {
        conn_fail(loop, conn, errno == ECONNRESET || errno == EPIPE ? E_RESET : E_OTHER);
        return;
    }
    uint32_t slot = (conn->pend_head + conn->outstanding) % (uint32_t)opts->max_outstanding;
    conn->pending[2 * slot] = (uint64_t)intended;
    /* the S-Client's request left with its connection attempt (counted then) */
    conn->pending[2 * slot + 1] = (uint64_t)(opts->sclient_overload ? conn->attempted : loop->now);
    loop->hot_awaiting++;
    if (conn->outstanding++ == 0)
        conn_deadline(loop, conn, loop->now + (int64_t)(opts->response_timeout_s * 1e9));
    conn->sent_on_conn++;
    if (!opts->sclient_overload) count_sent(loop, intended);
    if (!hot_can_send(loop, conn)) ready_del(loop, conn);
}

/* S-Client: a scheduled send opens its own socket now, whatever the server is doing; with
 * every socket still in flight (hot_conns of them) it cannot, and the generator says so. */
static void sclient_offer(struct loop *loop, int64_t intended) {
    if (!loop->nready) {
        if (in_window(loop, intended)) loop->result->no_socket++;
        return;
    }
    struct conn *conn = loop->ready[loop->nready - 1];
    ready_del(loop, conn);
    conn->intended = intended;
    conn->attempted = loop->now;
    conn_connect(loop, conn); /* a failure frees the socket again (conn_fail) */
    if (conn->state == CONNECTING) count_sent(loop, intended);
}

/* A hot connection can take work: serve the backlog first, then (closed loop) send at once. */
static void hot_available(struct loop *loop, struct conn *conn) {
    if (loop->opts->sclient_overload) { /* its one request, due since its attempt began */
        hot_send(loop, conn, conn->intended);
        return;
    }
    int64_t expiry = (int64_t)(loop->opts->response_timeout_s * 1e9);
    while (loop->backlog_len && hot_can_send(loop, conn) && conn->state == OPEN) {
        int64_t intended = loop->backlog[loop->backlog_head];
        loop->backlog_head = (loop->backlog_head + 1) % BACKLOG_MAX;
        loop->backlog_len--;
        if (loop->now - intended > expiry) {
            if (in_window(loop, intended)) loop->result->dropped++;
            continue;
        }
        if (in_window(loop, intended)) loop->result->queued++;
        hot_send(loop, conn, intended);
    }
    if (loop->shard->rate_share == 0) /* closed loop */
        while (conn->state == OPEN && hot_can_send(loop, conn)) hot_send(loop, conn, loop->now);
    if (conn->state == OPEN && hot_can_send(loop, conn)) ready_add(loop, conn);
}

static void cold_announce(struct loop *loop) {
    const struct opts *opts = loop->opts;
    const struct shard *shard = loop->shard;
    if (loop->cold_ready_sent || loop->cold_open < shard->cold) return;
    loop->cold_ready_sent = 1;
    loop->result->established_s = (double)(loop->now - loop->start) / 1e9;
    loop->result->rss_ready_kb = rss_kb();
    if (pins_at_ready(opts) && pin_cpu(opts->cpu) < 0) perror("wb-sclient: --cpu at cold_ready");
    if (shard->notify_fd >= 0) {
        int32_t established = loop->cold_open;
        if (write(shard->notify_fd, &established, sizeof established) != sizeof established)
            perror("wb-sclient: notify");
    } else if (cold_only(opts)) {
        printf("{\"event\": \"cold_ready\", \"established\": %d}\n", loop->cold_open);
        fflush(stdout);
    }
}

static void conn_established(struct loop *loop, struct conn *conn) {
    conn->state = OPEN;
    conn_deadline(loop, conn, 0);
    if (conn->kind == HOT) {
        hot_available(loop, conn);
    } else if (conn->kind == COLD) {
        struct result *result = loop->result;
        loop->ramp.connecting--;
        loop->cold_open++;
        if ((uint64_t)loop->cold_open > result->cold_established) result->cold_established = loop->cold_open;
        if (conn->reopened) result->cold_reconnected++, conn->reopened = 0;
        double interval_s = loop->opts->cold_interval_s;
        if (interval_s > 0) /* random phase: the active set rotates */
            conn_deadline(loop, conn, loop->now + (int64_t)(rng_uniform(&loop->rng) * interval_s * 1e9));
        cold_announce(loop);
    } else if (conn->kind == STREAM) {
        loop->streams_connecting--;
    }
}

static void on_reply(struct loop *loop, struct conn *conn, int status) {
    const struct opts *opts = loop->opts;
    struct result *result = loop->result;
    if (conn->kind == COLD) {
        result->cold_replies++;
        conn->outstanding = 0;
        conn_deadline(loop, conn, loop->now + (int64_t)(opts->cold_interval_s * 1e9));
        return;
    }
    if (conn->kind != HOT || !conn->outstanding) return;
    uint64_t intended = conn->pending[2 * conn->pend_head], sent = conn->pending[2 * conn->pend_head + 1];
    conn->pend_head = (conn->pend_head + 1) % (uint32_t)opts->max_outstanding;
    conn->outstanding--;
    loop->hot_awaiting--;
    timeline_at(loop, loop->now)->replies++;
    if (in_window(loop, loop->now)) {
        result->replies++;
        result->by_status[status]++;
    }
    if (in_window(loop, (int64_t)intended)) {
        hist_record(&result->corrected, (uint64_t)loop->now - intended);
        hist_record(&result->uncorrected, (uint64_t)loop->now - sent);
    }
    if (conn->outstanding) {
        uint64_t next_sent = conn->pending[2 * conn->pend_head + 1];
        conn_deadline(loop, conn, (int64_t)next_sent + (int64_t)(opts->response_timeout_s * 1e9));
    } else {
        conn_deadline(loop, conn, 0);
    }
    if (opts->requests_per_conn && !conn->outstanding &&
        conn->sent_on_conn >= (uint32_t)opts->requests_per_conn) {
        conn_fail(loop, conn, E_EOF); /* done with this connection: not an error, open the next */
        return;
    }
    hot_available(loop, conn);
}

/* Frames responses in [p, p+n); a header split across reads waits in conn->partial. */
static int parse_input(struct loop *loop, struct conn *conn, const char *p, size_t n) {
    if (conn->partial_len) {
        if (conn->partial_len + n > MAX_PARTIAL) return -1;
        memcpy(conn->partial + conn->partial_len, p, n);
        n += conn->partial_len;
        p = conn->partial;
    }
    size_t off = 0;
    while (off < n && conn->state == OPEN) {
        if (conn->body_left) {
            size_t take = n - off < conn->body_left ? n - off : conn->body_left;
            conn->body_left -= (uint32_t)take;
            off += take;
            if (!conn->body_left) on_reply(loop, conn, conn->status);
            continue;
        }
        const char *end = memmem(p + off, n - off, "\r\n\r\n", 4);
        if (!end) break;
        int status;
        size_t body;
        if (http_parse_head(p + off, (size_t)(end + 4 - (p + off)), &status, &body) < 0) return -1;
        off = (size_t)(end + 4 - p);
        conn->status = (uint16_t)status;
        conn->body_left = (uint32_t)body;
        if (!body) on_reply(loop, conn, status);
    }
    if (conn->state != OPEN) return 0;
    size_t rest = n - off;
    if (rest > MAX_PARTIAL) return -1;
    if (rest) {
        if (!conn->partial && !(conn->partial = malloc(MAX_PARTIAL))) return -1;
        memmove(conn->partial, p + off, rest);
    }
    conn->partial_len = (uint16_t)rest;
    return 0;
}

static void conn_read(struct loop *loop, struct conn *conn, uint32_t events) {
    while (conn->state == OPEN) {
        ssize_t n = read(conn->fd, loop->buf, sizeof loop->buf);
        if (n > 0) {
            if (conn->kind == STREAM) {
                if (in_window(loop, loop->now)) loop->result->stream_bytes += (uint64_t)n;
            } else if (parse_input(loop, conn, loop->buf, (size_t)n) < 0) {
                conn_fail(loop, conn, E_OTHER);
                return;
            }
            /* a short read drained the socket: the next data brings a new edge, so the
             * EAGAIN read that would confirm it is skipped (unless the peer is closing) */
            if ((size_t)n < sizeof loop->buf && !(events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))) return;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        conn_fail(loop, conn, n == 0 ? E_EOF : errno == ECONNRESET ? E_RESET : E_OTHER);
        return;
    }
}

static void on_event(struct loop *loop, struct conn *conn, uint32_t events) {
    if (conn->state == CONNECTING) {
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(conn->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
        if (err) {
            conn_fail(loop, conn, err == ECONNREFUSED ? E_REFUSED
                                  : err == ETIMEDOUT  ? E_CONNECT_TIMEOUT
                                                      : E_OTHER);
            return;
        }
        if (!(events & (EPOLLOUT | EPOLLIN))) return;
        conn_established(loop, conn);
    }
    if (conn->state == OPEN && (events & EPOLLOUT)) conn->blocked = 0;
    if (conn->state == OPEN && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
        conn_read(loop, conn, events);
}

static void on_deadline(struct loop *loop, struct conn *conn) {
    switch (conn->state) {
    case CLOSED:
        conn_deadline(loop, conn, 0);
        if (conn->kind == COLD) cold_enqueue(loop, conn); /* back in line behind the ramp */
        else conn_connect(loop, conn);
        break;
    case CONNECTING:
        conn_fail(loop, conn, E_CONNECT_TIMEOUT);
        break;
    case OPEN:
        if (conn->outstanding) {
            if (conn->kind == COLD) loop->result->cold_failed++;
            conn_fail(loop, conn, E_RESPONSE_TIMEOUT);
        } else if (conn->kind == COLD) { /* its turn in the active set */
            uint32_t target = conn->gidx % (uint32_t)loop->opts->ntargets;
            if (conn_write(conn, loop->requests[target], loop->request_len[target]) < 0) {
                conn_fail(loop, conn, E_RESET);
                return;
            }
            loop->result->cold_requests++;
            conn->outstanding = 1;
            conn_deadline(loop, conn, loop->now + (int64_t)(loop->opts->response_timeout_s * 1e9));
        }
        break;
    }
}

static void send_due(struct loop *loop);

static void run_timers(struct loop *loop) {
    while (timers_next(&loop->timers) <= loop->now) {
        send_due(loop); /* a burst of reconnects takes milliseconds (see send_due) */
        struct timer timer = timers_pop(&loop->timers);
        struct conn *conn = &loop->conns[timer.conn];
        if (timer.at != conn->armed_at) continue; /* superseded by an earlier entry */
        conn->armed_at = 0;
        if (!conn->deadline) continue;
        if (conn->deadline > loop->now) {
            conn_deadline(loop, conn, conn->deadline);
            continue;
        }
        on_deadline(loop, conn);
    }
}

/* ---- the hot schedule (open loop) ---- */

static void run_hot_schedule(struct loop *loop) {
    const struct opts *opts = loop->opts;
    struct result *result = loop->result;
    struct schedule *schedule = &loop->schedule;
    for (int i = 0; i < TICK_BATCH && schedule->next <= loop->now && schedule->next < loop->end; i++) {
        int64_t intended = schedule->next;
        schedule_advance(schedule, &loop->rng);
        uint64_t slip = (uint64_t)(loop->now - intended);
        if (in_window(loop, intended)) {
            result->scheduled++;
            if (opts->late_us > 0 && slip > (uint64_t)(opts->late_us * 1e3)) {
                result->late++;
                timeline_at(loop, loop->now)->late++;
            }
            if (slip > result->max_slip_ns) result->max_slip_ns = slip;
        }
        if (opts->sclient_overload) {
            sclient_offer(loop, intended);
        } else if (!loop->backlog_len && loop->nready) {
            /* random: every connection sends now and then, so the set of idle ones keeps
             * changing (CM01's periodic connections); last: few connections do all the work */
            int pick = opts->pick_random ? (int)(rng_uniform(&loop->rng) * loop->nready) % loop->nready
                                         : loop->nready - 1;
            hot_send(loop, loop->ready[pick], intended);
        } else if (loop->backlog_len < BACKLOG_MAX) {
            loop->backlog[(loop->backlog_head + loop->backlog_len++) % BACKLOG_MAX] = intended;
        } else if (in_window(loop, intended)) {
            result->dropped++;
        }
    }
}

/* What is outstanding at an edge of the window: scheduled sends waiting for a connection
 * and requests in flight (S-Client: each socket in use), none past its timeout. Timeouts are
 * acted on lazily (a backlog's oldest when a connection frees, a deadline when the loop next
 * runs): a loop held up at the edge would otherwise count what it has not yet aborted.
 * clients/validity.py (backlog_grew) compares the waiting sends of the two edges. */
static void hot_edge(struct loop *loop, uint64_t *waiting, uint64_t *in_flight) {
    int64_t expiry = (int64_t)(loop->opts->response_timeout_s * 1e9);
    size_t expired = 0;
    while (expired < loop->backlog_len &&
           loop->now - loop->backlog[(loop->backlog_head + expired) % BACKLOG_MAX] > expiry)
        expired++;
    *waiting = loop->backlog_len - expired;
    *in_flight = 0;
    for (int i = 0; i < loop->shard->hot; i++) {
        const struct conn *conn = &loop->conns[i];
        if (conn->deadline && conn->deadline <= loop->now) continue; /* timed out */
        if (loop->opts->sclient_overload) *in_flight += conn->state != CLOSED;
        else *in_flight += conn->outstanding;
    }
}

/* Sends that fell due go out now. A throttled server releases its replies in bursts of
 * hundreds, and each answered connection is replaced (socket, connect: the handshake's softirq
 * runs inside connect() on a veth) at tens of microseconds apiece: a burst handled before the
 * schedule is looked at again holds sends back past the late threshold. So it is looked at
 * after every event and every timer; a look costs one vDSO clock read. */
static void send_due(struct loop *loop) {
    if (!open_loop(loop)) return;
    loop->now = (int64_t)now_ns();
    if (loop->schedule.next <= loop->now) run_hot_schedule(loop);
}

/* ---- cold ramp, streams ---- */

static void run_cold_ramp(struct loop *loop) {
    uint32_t index;
    while (ramp_take(&loop->ramp, loop->now, &index)) conn_connect(loop, &loop->conns[index]);
}

/* pacing_write for the stream connections: one chunk, counted inside the window. */
static size_t stream_write(void *owner, int index) {
    struct loop *loop = owner;
    struct conn *conn = loop->streams[index];
    if (conn->state != OPEN || conn->blocked) return 0;
    ssize_t written = send(conn->fd, loop->pacing.chunk, STREAM_CHUNK, MSG_NOSIGNAL);
    if (written < 0) {
        if (errno == EAGAIN) conn->blocked = 1;
        else conn_fail(loop, conn, errno == ECONNRESET || errno == EPIPE ? E_RESET : E_OTHER);
        return 0;
    }
    if (in_window(loop, loop->now)) loop->result->stream_bytes += (uint64_t)written;
    return (size_t)written;
}

static void run_streams(struct loop *loop) {
    while (loop->streams_opened < loop->nstreams &&
           loop->streams_connecting < loop->opts->max_connecting)
        conn_connect(loop, loop->streams[loop->streams_opened++]);
    if (!loop->opts->stream_read)
        pacing_run(&loop->pacing, loop->now, loop->nstreams, stream_write, loop);
}

/* ---- setup and the loop ---- */

static void build_requests(struct loop *loop) {
    const struct opts *opts = loop->opts;
    loop->requests = calloc((size_t)opts->ntargets, sizeof *loop->requests);
    loop->request_len = calloc((size_t)opts->ntargets, sizeof *loop->request_len);
    for (int i = 0; i < opts->ntargets; i++) {
        char host[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &opts->targets[i].sin_addr, host, sizeof host);
        int n = asprintf(&loop->requests[i],
                         "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: wb-sclient\r\n\r\n",
                         opts->path, host, ntohs(opts->targets[i].sin_port));
        if (n < 0) { perror("wb-sclient"); exit(1); }
        loop->request_len[i] = (size_t)n;
    }
}

static void setup_conns(struct loop *loop) {
    const struct opts *opts = loop->opts;
    const struct shard *shard = loop->shard;
    loop->nconns = shard->hot + shard->cold + shard->stream;
    loop->conns = calloc((size_t)loop->nconns + 1, sizeof *loop->conns);
    loop->ready = calloc((size_t)shard->hot + 1, sizeof *loop->ready);
    loop->backlog = malloc(BACKLOG_MAX * sizeof *loop->backlog);
    int ramp_failed = ramp_init(&loop->ramp, (size_t)shard->cold, opts->cold_ramp / shard->nshards,
                                opts->max_connecting, loop->start);
    loop->streams = calloc((size_t)shard->stream + 1, sizeof *loop->streams);
    pacing_init(&loop->pacing, opts->stream_mbps / shard->nshards, loop->start);
    if (!loop->conns || !loop->ready || !loop->backlog || ramp_failed || !loop->streams) {
        perror("wb-sclient: allocating connections");
        exit(1);
    }
    for (int i = 0; i < loop->nconns; i++) {
        struct conn *conn = &loop->conns[i];
        conn->fd = -1;
        conn->ready_pos = -1;
        if (i < shard->hot) {
            conn->kind = HOT;
            conn->gidx = (uint32_t)(shard->hot_first + i);
            conn->pending = calloc(2 * (size_t)opts->max_outstanding, sizeof *conn->pending);
            if (opts->sclient_overload) ready_add(loop, conn); /* a free socket until its send */
            else conn_deadline(loop, conn, loop->start + 1);
        } else if (i < shard->hot + shard->cold) {
            conn->kind = COLD;
            /* cold connections continue the global index after all hot ones */
            conn->gidx = (uint32_t)(opts->hot_conns + shard->cold_first + (i - shard->hot));
            cold_enqueue(loop, conn);
        } else {
            conn->kind = STREAM;
            conn->gidx = (uint32_t)(opts->hot_conns + opts->cold_conns + shard->stream_first +
                                    (i - shard->hot - shard->cold));
            loop->streams[loop->nstreams++] = conn;
        }
    }
}

static int64_t next_wakeup(const struct loop *loop) {
    int64_t t = loop->end;
    if (open_loop(loop) && loop->schedule.next < t) t = loop->schedule.next;
    if (timers_next(&loop->timers) < t) t = timers_next(&loop->timers);
    int64_t ramp = ramp_next(&loop->ramp, loop->now);
    if (ramp < t) t = ramp;
    int64_t pacing = loop->opts->stream_read ? INT64_MAX : pacing_next(&loop->pacing, loop->nstreams);
    if (pacing < t) t = pacing;
    if (!loop->window_open && loop->window_start < t) t = loop->window_start;
    return t;
}

/* The next scheduled send this sleep may end early for, or INT64_MAX. */
static int64_t next_send(const struct loop *loop) {
    return open_loop(loop) && loop->schedule.next < loop->end ? loop->schedule.next : INT64_MAX;
}

/* The kernel's own RTT estimate of every open hot connection: what the latencies compare with. */
static void record_tcp_srtt(struct loop *loop) {
    for (int i = 0; i < loop->shard->hot; i++) {
        struct tcp_info info;
        socklen_t len = sizeof info;
        const struct conn *conn = &loop->conns[i];
        if (conn->state == OPEN && !getsockopt(conn->fd, IPPROTO_TCP, TCP_INFO, &info, &len) &&
            info.tcpi_rtt)
            hist_record(&loop->result->tcp_srtt, (uint64_t)info.tcpi_rtt * 1000);
    }
}

static double tv_s(struct timeval tv) { return (double)tv.tv_sec + (double)tv.tv_usec / 1e6; }

int run_shard(const struct opts *opts, const struct shard *shard, struct result *result) {
    static struct loop shard_loop;
    struct loop *loop = &shard_loop;
    loop->opts = opts;
    loop->shard = shard;
    loop->result = result;
    loop->rng = opts->seed * 0x9E3779B97F4A7C15ull + (uint64_t)shard->index + 1;
    result->rss_before_kb = rss_kb();

    sigset_t block, waitmask;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &waitmask);
    sigdelset(&waitmask, SIGTERM);
    sigdelset(&waitmask, SIGINT);
    struct sigaction sa = {.sa_handler = on_stop_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    loop->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (loop->epoll_fd < 0) { perror("wb-sclient: epoll_create1"); return 1; }
    build_requests(loop);
    loop->start = loop->now = (int64_t)now_ns();
    if (opts->window_end_ns) { /* the caller's instants; a start already past counts from now */
        loop->window_start = opts->window_start_ns > loop->start ? opts->window_start_ns : loop->start;
        loop->window_end = opts->window_end_ns;
    } else {
        loop->window_start = loop->start + (int64_t)(opts->warmup_s * 1e9);
        int hold_forever = opts->duration_s <= 0;
        loop->window_end =
            hold_forever ? INT64_MAX / 2 : loop->window_start + (int64_t)(opts->duration_s * 1e9);
    }
    loop->end = loop->window_end;
    lead_init(&loop->lead, opts, loop->start);
    setup_conns(loop);
    if (!shard->cold) cold_announce(loop); /* a shard without cold connections is ready at once */
    if (open_loop(loop))
        schedule_init(&loop->schedule, shard->rate_share, opts->rate, shard->index, opts->poisson,
                      loop->start);

    struct epoll_event events[1024];
    while (!stop_requested) {
        loop->now = (int64_t)now_ns();
        if (loop->now >= loop->end) break;
        if (!loop->window_open && loop->now >= loop->window_start) {
            loop->window_open = 1;
            getrusage(RUSAGE_SELF, &loop->ru_window);
            loop->run_delay_window = run_delay_ns();
            hot_edge(loop, &result->waiting_start, &result->in_flight_start);
        }
        run_timers(loop);
        if (open_loop(loop)) run_hot_schedule(loop);
        run_cold_ramp(loop);
        run_streams(loop);
        /* sleep until the lead before the next deadline, then poll without sleeping: a
           vCPU's slow wake-up stays out of the send time. --spin-us also polls for up to
           spin_us after a send while its reply is due, so it stays out of the latency too. */
        lead_decay(&loop->lead, loop->now);
        lead_contention_check(&loop->lead, loop->now, window_result(loop));
        int64_t t = (int64_t)now_ns(), due = next_wakeup(loop);
        int64_t wake = lead_wake_time(&loop->lead, loop->now, due, next_send(loop));
        int64_t spin_ns = (int64_t)opts->spin_us * 1000;
        int64_t wait = wake - t;
        if (wait < 0 ||
            (opts->spin_fixed && loop->hot_awaiting && loop->now - loop->last_hot_send < spin_ns))
            wait = 0;
        else if (wait < (int64_t)opts->coalesce_us * 1000) wait = (int64_t)opts->coalesce_us * 1000;
        if (wait && wake < due) /* this sleep ends early for a send */
            lead_count_sleep(&loop->lead, window_result(loop));
        struct timespec ts = {wait / 1000000000LL, wait % 1000000000LL};
        int64_t polled = (int64_t)now_ns();
        int n = epoll_pwait2(loop->epoll_fd, events, 1024, &ts, &waitmask);
        if (n < 0 && errno != EINTR) { perror("wb-sclient: epoll_pwait2"); return 1; }
        loop->now = (int64_t)now_ns();
        /* an empty poll ahead of the deadline is idle time, up to the deadline only; and so is
           the loop's own pass since the last empty poll: before the deadline it did no work */
        if (!wait && !n && polled < due && loop->window_open) {
            int64_t from = loop->spun_until ? loop->spun_until : polled;
            loop->spin_idle_ns += (loop->now < due ? loop->now : due) - from;
            loop->spun_until = loop->now;
        } else {
            loop->spun_until = 0;
        }
        if (wait && !n)
            lead_wake_observed(&loop->lead, loop->now, loop->now - (polled + wait), window_result(loop));
        if (!wait) lead_poll_returned(&loop->lead, loop->now, polled, window_result(loop));
        for (int i = 0; i < n; i++) {
            on_event(loop, &loop->conns[events[i].data.u32], events[i].events);
            send_due(loop);
        }
    }

    loop->now = (int64_t)now_ns();
    hot_edge(loop, &result->waiting_end, &result->in_flight_end);
    record_tcp_srtt(loop);
    int64_t wend = loop->now < loop->window_end ? loop->now : loop->window_end;
    if (wend < loop->window_start) wend = loop->window_start; /* a window that ended before it ran */
    result->window_s = (double)(wend - loop->window_start) / 1e9;
    result->window_start_ns = loop->window_start;
    result->window_end_ns = wend;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    result->cpu_user_s = tv_s(ru.ru_utime);
    result->cpu_sys_s = tv_s(ru.ru_stime);
    if (loop->window_open) {
        result->cpu_window_user_s = result->cpu_user_s - tv_s(loop->ru_window.ru_utime);
        result->cpu_window_sys_s = result->cpu_sys_s - tv_s(loop->ru_window.ru_stime);
        result->run_delay_window_s = (double)(run_delay_ns() - loop->run_delay_window) / 1e9;
        result->spin_idle_s = (double)loop->spin_idle_ns / 1e9;
    }
    result->cold_requested = (uint64_t)shard->cold;
    result->cold_held = (uint64_t)loop->cold_open;
    result->rss_end_kb = rss_kb();
    result->finished = 1;
    return 0;
}
