/* One shard's event loop: hot (open or closed loop), cold and stream connections on epoll. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
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

#include "http.h"
#include "sclient.h"

#define READ_BUF 65536
#define MAX_PARTIAL 8192
#define STREAM_CHUNK 1460
#define TICK_BATCH 256          /* scheduled sends handled per loop turn, so I/O is not starved */
#define BACKLOG_MAX 65536       /* intended sends waiting for a free connection */
#define RETRY_NS 10000000LL     /* pause before reconnecting after a failed connect */
#define STREAM_TICK_NS 200000LL
#define STREAM_BURST_NS 50000000LL
/* Adaptive lead (no --spin-us): sleep until the next scheduled send minus the lead, then poll.
 * The lead covers the recent 99th percentile of how late sleeps return (slow vCPU wake-ups),
 * plus the loop's own work before the send. */
#define LEAD_INIT_NS 100000LL   /* until enough wake-ups are measured */
#define LEAD_MARGIN_NS 10000LL
#define WAKE_BUCKET_NS 4096     /* wake-up lateness kept in 4 us buckets up to LEAD_MAX_NS */
#define WAKE_BUCKETS ((int)(LEAD_MAX_NS / WAKE_BUCKET_NS) + 1)
#define WAKE_MIN_SAMPLES 32
#define WAKE_DECAY_NS 1000000000LL /* counts halve every second: recent wake-ups decide */
/* Polling only pays while this CPU is otherwise idle: with another task runnable here it takes
 * that task's time, the scheduler then treats the generator as CPU-bound and preempts it, and
 * its sends go out later than after a plain sleep. So no lead for a while after the generator
 * waited for its CPU more than CONTENDED_SHARE of a CONTENTION_CHECK_NS period, or a poll was
 * held up PREEMPTED_NS by another task (not by the hypervisor: that is no run-queue wait). */
#define CONTENTION_CHECK_NS 100000000LL
#define CONTENDED_SHARE 0.05
#define CONTENDED_BACKOFF_NS 1000000000LL
#define PREEMPTED_NS 200000LL
/* A sleep this much late is checked against the run-queue wait: if another task held the CPU,
 * polling longer would not have helped, so it does not raise the lead. */
#define WAKE_CHECK_NS 100000LL

enum kind { HOT, COLD, STREAM };
enum state { CLOSED, CONNECTING, OPEN };
enum err { E_CONNECT_TIMEOUT, E_REFUSED, E_RESET, E_RESPONSE_TIMEOUT, E_NO_LOCAL_PORT,
           E_NO_DESCRIPTOR, E_OTHER, E_EOF };

struct conn {
    int fd;
    uint8_t kind, state, blocked, reopened;
    uint16_t status, partial_len;
    uint32_t outstanding, sent_on_conn, body_left, gidx;
    int32_t ready_pos; /* index in the hot ready stack, -1 when absent */
    int64_t deadline, armed_at; /* ns; 0 = none */
    char *partial;
    uint64_t *pending; /* hot: ring of (intended, sent) pairs, oldest at pend_head */
    uint32_t pend_head;
    int64_t intended, attempted; /* S-Client: this socket's scheduled send, its attempt's start */
};

struct timer {
    int64_t at;
    uint32_t conn;
};

struct loop {
    const struct opts *o;
    const struct shard *s;
    struct result *r;
    int ep;
    struct conn *conns;
    int nconns;
    char **requests; /* per target */
    size_t *request_len;
    int64_t start, window_start, window_end, end, now;
    struct rusage ru_window;
    uint64_t run_delay_window;
    int64_t spin_idle_ns; /* polls that found nothing to do: spinning, not work */
    /* adaptive lead: recent wake-up lateness, decaying (see wake_observed) */
    int64_t lead_ns, wake_decay_at;
    int64_t check_at, calm_at; /* next run-queue look; no lead before calm_at */
    uint64_t wait_at_check, wait_seen;
    int sched_fd; /* /proc/self/schedstat, read often (see sched_wait) */
    uint32_t wake_total, wake_counts[WAKE_BUCKETS];
    uint32_t hot_awaiting; /* hot requests sent and not yet answered */
    int64_t last_hot_send;
    int window_open;
    /* timers: binary min-heap, at most one live entry per connection (see conn_deadline) */
    struct timer *heap;
    size_t heap_len, heap_cap;
    /* hot */
    struct conn **ready; /* open connections that can send (S-Client: free sockets) */
    int nready;
    int64_t next_tick;
    double tick_seq;
    uint64_t rng;
    int64_t *backlog;
    size_t backlog_head, backlog_len;
    /* cold */
    uint32_t *cold_queue;
    size_t cq_head, cq_len;
    uint64_t cold_attempts;
    int cold_connecting, cold_open, cold_ready_sent;
    /* stream */
    struct conn **streams;
    int nstreams, stream_rr;
    /* streams open in turn, at most --max-connecting at once: a burst of 100,000 SYNs
     * overflows the listen queue, and its retries back off for seconds */
    int streams_opened, stream_connecting;
    double stream_budget;
    int64_t stream_last;
    char chunk[STREAM_CHUNK];
    char buf[READ_BUF];
};

static volatile sig_atomic_t stop_requested;
static void on_stop_signal(int sig) { (void)sig; stop_requested = 1; }

uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t rss_kb(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%llu %llu", &size, &resident) != 2) resident = 0;
        fclose(f);
    }
    return resident * (uint64_t)sysconf(_SC_PAGESIZE) / 1024;
}

static double rng_uniform(uint64_t *s) { /* xorshift64*, (0, 1] */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return ((double)((*s * 2685821657736338717ull) >> 11) + 1.0) / 9007199254740992.0;
}

/* Time this task spent runnable but waiting for a CPU (ns): CPU contention shows here. */
static uint64_t run_delay_ns(void) {
    FILE *f = fopen("/proc/self/schedstat", "r");
    unsigned long long run = 0, wait = 0;
    if (f) {
        if (fscanf(f, "%llu %llu", &run, &wait) != 2) wait = 0;
        fclose(f);
    }
    return wait;
}

/* The same as run_delay_ns, cheaply enough for the loop: one pread on a descriptor kept open
 * (opened by each shard itself, so a forked shard reads its own). */
static uint64_t sched_wait(struct loop *L) {
    char buf[128];
    unsigned long long run = 0, wait = 0;
    ssize_t n = L->sched_fd >= 0 ? pread(L->sched_fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0) return run_delay_ns();
    buf[n] = 0;
    if (sscanf(buf, "%llu %llu", &run, &wait) != 2) return 0;
    return wait;
}

static int in_window(struct loop *L, int64_t t) { return t >= L->window_start && t < L->window_end; }

static struct timeline_entry *timeline_at(struct loop *L, int64_t t) {
    int64_t i = (t - L->start) / 1000000000LL;
    if (i < 0) i = 0;
    if (i >= L->r->timeline_len) i = L->r->timeline_len - 1;
    return &L->r->timeline[i];
}

/* ---- timers ---- */

static void heap_push(struct loop *L, int64_t at, uint32_t conn) {
    if (L->heap_len == L->heap_cap) {
        L->heap_cap = L->heap_cap ? L->heap_cap * 2 : 1024;
        L->heap = realloc(L->heap, L->heap_cap * sizeof *L->heap);
        if (!L->heap) { perror("wb-sclient: timer heap"); exit(1); }
    }
    size_t i = L->heap_len++;
    while (i && L->heap[(i - 1) / 2].at > at) {
        L->heap[i] = L->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    L->heap[i] = (struct timer){at, conn};
}

static struct timer heap_pop(struct loop *L) {
    struct timer top = L->heap[0], last = L->heap[--L->heap_len];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= L->heap_len) break;
        if (c + 1 < L->heap_len && L->heap[c + 1].at < L->heap[c].at) c++;
        if (L->heap[c].at >= last.at) break;
        L->heap[i] = L->heap[c];
        i = c;
    }
    if (L->heap_len) L->heap[i] = last;
    return top;
}

/* Deadlines only move later in the common case, so the heap keeps one entry per connection
 * (armed_at) and re-arms it lazily when it fires early; an earlier deadline adds an entry. */
static void conn_deadline(struct loop *L, struct conn *c, int64_t at) {
    c->deadline = at;
    if (at && (!c->armed_at || at < c->armed_at)) {
        heap_push(L, at, (uint32_t)(c - L->conns));
        c->armed_at = at;
    }
}

/* ---- connections ---- */

static void ready_add(struct loop *L, struct conn *c) {
    if (c->ready_pos >= 0) return;
    c->ready_pos = L->nready;
    L->ready[L->nready++] = c;
}

static void ready_del(struct loop *L, struct conn *c) {
    if (c->ready_pos < 0) return;
    struct conn *last = L->ready[--L->nready];
    L->ready[c->ready_pos] = last;
    last->ready_pos = c->ready_pos;
    c->ready_pos = -1;
}

static int hot_can_send(struct loop *L, struct conn *c) {
    return c->state == OPEN && c->outstanding < (uint32_t)L->o->max_outstanding &&
           (!L->o->requests_per_conn || c->sent_on_conn < (uint32_t)L->o->requests_per_conn);
}

static void count_error(struct loop *L, enum err e, uint64_t n) {
    if (!n) return;
    timeline_at(L, L->now)->errors += n;
    if (!in_window(L, L->now)) return;
    struct result *r = L->r;
    switch (e) {
    case E_CONNECT_TIMEOUT: r->err_connect_timeout += n; break;
    case E_REFUSED: r->err_refused += n; break;
    case E_RESET: case E_EOF: r->err_reset += n; break;
    case E_RESPONSE_TIMEOUT: r->err_response_timeout += n; break;
    case E_NO_LOCAL_PORT: r->err_no_local_port += n; break;
    case E_NO_DESCRIPTOR: r->err_no_descriptor += n; break;
    case E_OTHER: r->err_other += n; break;
    }
}

static void cold_enqueue(struct loop *L, struct conn *c) {
    size_t cap = (size_t)L->s->cold;
    L->cold_queue[(L->cq_head + L->cq_len++) % cap] = (uint32_t)(c - L->conns);
}

static void conn_connect(struct loop *L, struct conn *c);

/* Closes a connection after an error or end of stream and arranges its replacement. */
static void conn_fail(struct loop *L, struct conn *c, enum err e) {
    int was = c->state;
    if (c->kind == HOT) {
        L->hot_awaiting -= c->outstanding;
        if (was == CONNECTING) count_error(L, e, 1);
        else if (e != E_EOF || c->outstanding) count_error(L, e, c->outstanding ? c->outstanding : 1);
        ready_del(L, c);
        if (L->o->sclient_overload && e == E_RESPONSE_TIMEOUT) {
            /* aborted, as the S-Client does: a reset frees both ends at once (no TIME_WAIT
             * here, no reply written to a socket nobody reads there) */
            struct linger abort_now = {.l_onoff = 1, .l_linger = 0};
            setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &abort_now, sizeof abort_now);
        }
    } else if (c->kind == COLD) {
        if (was == CONNECTING) L->r->cold_failed++, L->cold_connecting--;
        else L->cold_open--, c->reopened = 1;
    } else {
        if (was == CONNECTING) L->stream_connecting--;
        count_error(L, e, 1);
    }
    close(c->fd);
    c->fd = -1;
    c->state = CLOSED;
    c->outstanding = c->body_left = c->partial_len = 0;
    free(c->partial);
    c->partial = NULL;
    c->blocked = 0;
    if (c->kind == COLD && was != CONNECTING) {
        conn_deadline(L, c, 0);
        cold_enqueue(L, c);
    } else if (c->kind == HOT && L->o->sclient_overload) {
        conn_deadline(L, c, 0); /* S-Client: the socket is free for the next scheduled send */
        ready_add(L, c);
    } else {
        /* the pool: a lost connection is replaced at once, a failed connect after a pause */
        conn_deadline(L, c, L->now + (was == CONNECTING ? RETRY_NS : 1));
    }
}

static void conn_connect(struct loop *L, struct conn *c) {
    const struct opts *o = L->o;
    struct sockaddr_in dst = o->targets[c->gidx % (uint32_t)o->ntargets];
    int one = 1;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    c->state = CONNECTING;
    c->sent_on_conn = c->pend_head = 0;
    if (c->kind == COLD) L->cold_connecting++;
    if (c->kind == STREAM) L->stream_connecting++;
    if (c->fd < 0) {
        conn_fail(L, c, errno == EMFILE || errno == ENFILE ? E_NO_DESCRIPTOR : E_OTHER);
        return;
    }
    if (c->kind == HOT) setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (o->nsources) {
        struct sockaddr_in src = {.sin_family = AF_INET,
                                  .sin_addr = o->sources[c->gidx % (uint32_t)o->nsources]};
        /* the port is chosen at connect() from the full 4-tuple, not reserved at bind() */
        setsockopt(c->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
        if (bind(c->fd, (struct sockaddr *)&src, sizeof src) < 0) {
            conn_fail(L, c, E_OTHER);
            return;
        }
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                             .data.u32 = (uint32_t)(c - L->conns)};
    if (epoll_ctl(L->ep, EPOLL_CTL_ADD, c->fd, &ev) < 0) {
        conn_fail(L, c, E_OTHER);
        return;
    }
    if (connect(c->fd, (struct sockaddr *)&dst, sizeof dst) < 0 && errno != EINPROGRESS) {
        conn_fail(L, c, errno == ECONNREFUSED    ? E_REFUSED
                        : errno == EADDRNOTAVAIL ? E_NO_LOCAL_PORT /* every port in use */
                                                 : E_OTHER);
        return;
    }
    conn_deadline(L, c, L->now + (int64_t)(o->connect_timeout_s * 1e9));
}

static int conn_write(struct conn *c, const char *p, size_t n) {
    ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
    return w == (ssize_t)n ? 0 : -1;
}

/* A request went out: on an open connection, or (S-Client) as its connection attempt. */
static void count_sent(struct loop *L, int64_t intended) {
    L->last_hot_send = L->now;
    if (!L->r->first_send_unix_s) {
        struct timespec wall;
        clock_gettime(CLOCK_REALTIME, &wall);
        L->r->first_send_unix_s = (double)wall.tv_sec + (double)wall.tv_nsec / 1e9;
    }
    timeline_at(L, L->now)->sent++;
    /* by intended time, as scheduled, late and latency are: a backlog from before the window
     * (hot connections still connecting through the warm-up) sent inside it is not the
     * window's rate */
    if (in_window(L, intended)) L->r->sent++;
}

static void hot_send(struct loop *L, struct conn *c, int64_t intended) {
    uint32_t t = c->gidx % (uint32_t)L->o->ntargets;
    if (conn_write(c, L->requests[t], L->request_len[t]) < 0) {
        conn_fail(L, c, errno == ECONNRESET || errno == EPIPE ? E_RESET : E_OTHER);
        return;
    }
    uint32_t slot = (c->pend_head + c->outstanding) % (uint32_t)L->o->max_outstanding;
    c->pending[2 * slot] = (uint64_t)intended;
    /* the S-Client's request left with its connection attempt (counted then) */
    c->pending[2 * slot + 1] = (uint64_t)(L->o->sclient_overload ? c->attempted : L->now);
    L->hot_awaiting++;
    if (c->outstanding++ == 0)
        conn_deadline(L, c, L->now + (int64_t)(L->o->response_timeout_s * 1e9));
    c->sent_on_conn++;
    if (!L->o->sclient_overload) count_sent(L, intended);
    if (!hot_can_send(L, c)) ready_del(L, c);
}

/* S-Client: a scheduled send opens its own socket now, whatever the server is doing; with
 * every socket still in flight (hot_conns of them) it cannot, and the generator says so. */
static void sclient_offer(struct loop *L, int64_t intended) {
    if (!L->nready) {
        if (in_window(L, intended)) L->r->no_socket++;
        return;
    }
    struct conn *c = L->ready[L->nready - 1];
    ready_del(L, c);
    c->intended = intended;
    c->attempted = L->now;
    conn_connect(L, c); /* a failure frees the socket again (conn_fail) */
    if (c->state == CONNECTING) count_sent(L, intended);
}

/* A hot connection can take work: serve the backlog first, then (closed loop) send at once. */
static void hot_available(struct loop *L, struct conn *c) {
    if (L->o->sclient_overload) { /* its one request, due since its attempt began */
        hot_send(L, c, c->intended);
        return;
    }
    int64_t expiry = (int64_t)(L->o->response_timeout_s * 1e9);
    while (L->backlog_len && hot_can_send(L, c) && c->state == OPEN) {
        int64_t intended = L->backlog[L->backlog_head];
        L->backlog_head = (L->backlog_head + 1) % BACKLOG_MAX;
        L->backlog_len--;
        if (L->now - intended > expiry) {
            if (in_window(L, intended)) L->r->dropped++;
            continue;
        }
        if (in_window(L, intended)) L->r->queued++;
        hot_send(L, c, intended);
    }
    if (L->s->rate == 0)
        while (c->state == OPEN && hot_can_send(L, c)) hot_send(L, c, L->now);
    if (c->state == OPEN && hot_can_send(L, c)) ready_add(L, c);
}


static void cold_announce(struct loop *L) {
    if (L->cold_ready_sent || L->cold_open < L->s->cold) return;
    L->cold_ready_sent = 1;
    L->r->established_s = (double)(L->now - L->start) / 1e9;
    L->r->rss_ready_kb = rss_kb();
    if (pins_at_ready(L->o) && pin_cpu(L->o->cpu) < 0) perror("wb-sclient: --cpu at cold_ready");
    if (L->s->notify_fd >= 0) {
        int32_t n = L->cold_open;
        if (write(L->s->notify_fd, &n, sizeof n) != sizeof n) perror("wb-sclient: notify");
    } else if (cold_only(L->o)) {
        printf("{\"event\": \"cold_ready\", \"established\": %d}\n", L->cold_open);
        fflush(stdout);
    }
}

static void conn_established(struct loop *L, struct conn *c) {
    c->state = OPEN;
    conn_deadline(L, c, 0);
    if (c->kind == HOT) {
        hot_available(L, c);
    } else if (c->kind == COLD) {
        L->cold_connecting--;
        L->cold_open++;
        if ((uint64_t)L->cold_open > L->r->cold_established) L->r->cold_established = L->cold_open;
        if (c->reopened) L->r->cold_reconnected++, c->reopened = 0;
        if (L->o->cold_interval_s > 0) /* random phase: the active set rotates */
            conn_deadline(L, c, L->now + (int64_t)(rng_uniform(&L->rng) * L->o->cold_interval_s * 1e9));
        cold_announce(L);
    } else if (c->kind == STREAM) {
        L->stream_connecting--;
    }
}

static void on_reply(struct loop *L, struct conn *c, int status) {
    if (c->kind == COLD) {
        L->r->cold_replies++;
        c->outstanding = 0;
        conn_deadline(L, c, L->now + (int64_t)(L->o->cold_interval_s * 1e9));
        return;
    }
    if (c->kind != HOT || !c->outstanding) return;
    uint64_t intended = c->pending[2 * c->pend_head], sent = c->pending[2 * c->pend_head + 1];
    c->pend_head = (c->pend_head + 1) % (uint32_t)L->o->max_outstanding;
    c->outstanding--;
    L->hot_awaiting--;
    timeline_at(L, L->now)->replies++;
    if (in_window(L, L->now)) {
        L->r->replies++;
        L->r->by_status[status]++;
    }
    if (in_window(L, (int64_t)intended)) {
        hist_record(&L->r->corrected, (uint64_t)L->now - intended);
        hist_record(&L->r->uncorrected, (uint64_t)L->now - sent);
    }
    if (c->outstanding) {
        uint64_t next_sent = c->pending[2 * c->pend_head + 1];
        conn_deadline(L, c, (int64_t)next_sent + (int64_t)(L->o->response_timeout_s * 1e9));
    } else {
        conn_deadline(L, c, 0);
    }
    if (L->o->requests_per_conn && !c->outstanding &&
        c->sent_on_conn >= (uint32_t)L->o->requests_per_conn) {
        conn_fail(L, c, E_EOF); /* done with this connection: not an error, open the next */
        return;
    }
    hot_available(L, c);
}

/* Frames responses in [p, p+n); a header split across reads waits in c->partial. */
static int parse_input(struct loop *L, struct conn *c, const char *p, size_t n) {
    if (c->partial_len) {
        if (c->partial_len + n > MAX_PARTIAL) return -1;
        memcpy(c->partial + c->partial_len, p, n);
        n += c->partial_len;
        p = c->partial;
    }
    size_t off = 0;
    while (off < n && c->state == OPEN) {
        if (c->body_left) {
            size_t take = n - off < c->body_left ? n - off : c->body_left;
            c->body_left -= (uint32_t)take;
            off += take;
            if (!c->body_left) on_reply(L, c, c->status);
            continue;
        }
        const char *end = memmem(p + off, n - off, "\r\n\r\n", 4);
        if (!end) break;
        int status;
        size_t body;
        if (http_parse_head(p + off, (size_t)(end + 4 - (p + off)), &status, &body) < 0) return -1;
        off = (size_t)(end + 4 - p);
        c->status = (uint16_t)status;
        c->body_left = (uint32_t)body;
        if (!body) on_reply(L, c, status);
    }
    if (c->state != OPEN) return 0;
    size_t rest = n - off;
    if (rest > MAX_PARTIAL) return -1;
    if (rest) {
        if (!c->partial && !(c->partial = malloc(MAX_PARTIAL))) return -1;
        memmove(c->partial, p + off, rest);
    }
    c->partial_len = (uint16_t)rest;
    return 0;
}

static void conn_read(struct loop *L, struct conn *c, uint32_t events) {
    while (c->state == OPEN) {
        ssize_t n = read(c->fd, L->buf, sizeof L->buf);
        if (n > 0) {
            if (c->kind != STREAM && parse_input(L, c, L->buf, (size_t)n) < 0) {
                conn_fail(L, c, E_OTHER);
                return;
            }
            /* a short read drained the socket: the next data brings a new edge, so the
             * EAGAIN read that would confirm it is skipped (unless the peer is closing) */
            if ((size_t)n < sizeof L->buf && !(events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))) return;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        conn_fail(L, c, n == 0 ? E_EOF : errno == ECONNRESET ? E_RESET : E_OTHER);
        return;
    }
}

static void on_event(struct loop *L, struct conn *c, uint32_t events) {
    if (c->state == CONNECTING) {
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
        if (err) {
            conn_fail(L, c, err == ECONNREFUSED ? E_REFUSED : err == ETIMEDOUT ? E_CONNECT_TIMEOUT : E_OTHER);
            return;
        }
        if (!(events & (EPOLLOUT | EPOLLIN))) return;
        conn_established(L, c);
    }
    if (c->state == OPEN && (events & EPOLLOUT)) c->blocked = 0;
    if (c->state == OPEN && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) conn_read(L, c, events);
}

static void on_deadline(struct loop *L, struct conn *c) {
    switch (c->state) {
    case CLOSED:
        conn_deadline(L, c, 0);
        if (c->kind == COLD) cold_enqueue(L, c); /* back in line behind the ramp */
        else conn_connect(L, c);
        break;
    case CONNECTING:
        conn_fail(L, c, E_CONNECT_TIMEOUT);
        break;
    case OPEN:
        if (c->outstanding) {
            if (c->kind == COLD) L->r->cold_failed++;
            conn_fail(L, c, E_RESPONSE_TIMEOUT);
        } else if (c->kind == COLD) { /* its turn in the active set */
            uint32_t t = c->gidx % (uint32_t)L->o->ntargets;
            if (conn_write(c, L->requests[t], L->request_len[t]) < 0) {
                conn_fail(L, c, E_RESET);
                return;
            }
            L->r->cold_requests++;
            c->outstanding = 1;
            conn_deadline(L, c, L->now + (int64_t)(L->o->response_timeout_s * 1e9));
        }
        break;
    }
}

static void send_due(struct loop *L);

static void run_timers(struct loop *L) {
    while (L->heap_len && L->heap[0].at <= L->now) {
        send_due(L); /* a burst of reconnects takes milliseconds (see send_due) */
        struct timer t = heap_pop(L);
        struct conn *c = &L->conns[t.conn];
        if (t.at != c->armed_at) continue; /* superseded by an earlier entry */
        c->armed_at = 0;
        if (!c->deadline) continue;
        if (c->deadline > L->now) {
            conn_deadline(L, c, c->deadline);
            continue;
        }
        on_deadline(L, c);
    }
}

/* ---- schedules: open-loop sends, cold ramp, stream pacing ---- */

static void advance_tick(struct loop *L) {
    double gap = L->o->poisson ? -log(rng_uniform(&L->rng)) / L->s->rate : 1.0 / L->s->rate;
    L->tick_seq += gap;
    L->next_tick = L->start + (int64_t)(L->tick_seq * 1e9);
}

static void run_hot_schedule(struct loop *L) {
    for (int i = 0; i < TICK_BATCH && L->next_tick <= L->now && L->next_tick < L->end; i++) {
        int64_t intended = L->next_tick;
        advance_tick(L);
        uint64_t slip = (uint64_t)(L->now - intended);
        if (in_window(L, intended)) {
            L->r->scheduled++;
            if (L->o->late_us > 0 && slip > (uint64_t)(L->o->late_us * 1e3)) {
                L->r->late++;
                timeline_at(L, L->now)->late++;
            }
            if (slip > L->r->max_slip_ns) L->r->max_slip_ns = slip;
        }
        if (L->o->sclient_overload) {
            sclient_offer(L, intended);
        } else if (!L->backlog_len && L->nready) {
            /* random: every connection sends now and then, so the set of idle ones keeps
             * changing (CM01's periodic connections); last: few connections do all the work */
            int pick = L->o->pick_random ? (int)(rng_uniform(&L->rng) * L->nready) % L->nready
                                         : L->nready - 1;
            hot_send(L, L->ready[pick], intended);
        } else if (L->backlog_len < BACKLOG_MAX) {
            L->backlog[(L->backlog_head + L->backlog_len++) % BACKLOG_MAX] = intended;
        } else if (in_window(L, intended)) {
            L->r->dropped++;
        }
    }
}

/* What is outstanding at an edge of the window: scheduled sends waiting for a connection
 * and requests in flight (S-Client: each socket in use), none past its timeout. Timeouts are
 * acted on lazily (a backlog's oldest when a connection frees, a deadline when the loop next
 * runs): a loop held up at the edge would otherwise count what it has not yet aborted.
 * clients/validity.py (backlog_grew) compares the waiting sends of the two edges. */
static void hot_edge(struct loop *L, uint64_t *waiting, uint64_t *in_flight) {
    int64_t expiry = (int64_t)(L->o->response_timeout_s * 1e9);
    size_t expired = 0;
    while (expired < L->backlog_len &&
           L->now - L->backlog[(L->backlog_head + expired) % BACKLOG_MAX] > expiry)
        expired++;
    *waiting = L->backlog_len - expired;
    *in_flight = 0;
    for (int i = 0; i < L->s->hot; i++) {
        const struct conn *c = &L->conns[i];
        if (c->deadline && c->deadline <= L->now) continue; /* timed out */
        if (L->o->sclient_overload) *in_flight += c->state != CLOSED;
        else *in_flight += c->outstanding;
    }
}

/* Sends that fell due go out now. A throttled server releases its replies in bursts of
 * hundreds, each answered connection is replaced (socket, connect: the handshake's softirq
 * runs inside connect() on a veth) and each takes tens of microseconds: looking at the
 * schedule after every event and every timer keeps sends within the late threshold, where
 * once per 32 events and once per loop turn let 10 % of them leave 1-9 ms late at 10,000
 * req/s (CM01 Figs 6-9). A look costs one vDSO clock read. */
static void send_due(struct loop *L) {
    if (!L->s->hot || L->s->rate <= 0) return;
    L->now = (int64_t)now_ns();
    if (L->next_tick <= L->now) run_hot_schedule(L);
}

static void run_cold_ramp(struct loop *L) {
    const struct opts *o = L->o;
    while (L->cq_len && L->cold_connecting < o->max_connecting) {
        if (o->cold_ramp > 0 &&
            (double)L->cold_attempts >= o->cold_ramp / L->s->count * (double)(L->now - L->start) / 1e9)
            break;
        struct conn *c = &L->conns[L->cold_queue[L->cq_head]];
        L->cq_head = (L->cq_head + 1) % (size_t)L->s->cold;
        L->cq_len--;
        L->cold_attempts++;
        conn_connect(L, c);
    }
}

static int64_t cold_ramp_next(struct loop *L) {
    if (!L->cq_len || L->cold_connecting >= L->o->max_connecting) return INT64_MAX;
    if (L->o->cold_ramp <= 0) return L->now;
    return L->start + (int64_t)((double)(L->cold_attempts + 1) / (L->o->cold_ramp / L->s->count) * 1e9);
}

static void open_streams(struct loop *L) {
    while (L->streams_opened < L->nstreams && L->stream_connecting < L->o->max_connecting)
        conn_connect(L, L->streams[L->streams_opened++]);
}

static void run_streams(struct loop *L) {
    if (!L->nstreams) return;
    double mbps = L->o->stream_mbps / L->s->count;
    L->stream_budget += mbps * 1e6 / 8 * (double)(L->now - L->stream_last) / 1e9;
    L->stream_last = L->now;
    /* bucket depth: a stall of up to STREAM_BURST_NS is made up for afterwards */
    double cap = (double)STREAM_CHUNK * 4 * L->nstreams + mbps * 1e6 / 8 * STREAM_BURST_NS / 1e9;
    if (mbps <= 0 || L->stream_budget > cap) L->stream_budget = mbps <= 0 ? 1e18 : cap;
    /* one chunk per connection per round, so the bandwidth is shared evenly */
    for (int progress = 1, rounds = 0; progress && rounds < 64 && L->stream_budget >= STREAM_CHUNK;
         rounds++) {
        progress = 0;
        for (int i = 0; i < L->nstreams && L->stream_budget >= STREAM_CHUNK; i++) {
            struct conn *c = L->streams[(L->stream_rr + i) % L->nstreams];
            if (c->state != OPEN || c->blocked) continue;
            ssize_t w = send(c->fd, L->chunk, STREAM_CHUNK, MSG_NOSIGNAL);
            if (w < 0) {
                if (errno == EAGAIN) c->blocked = 1;
                else conn_fail(L, c, errno == ECONNRESET || errno == EPIPE ? E_RESET : E_OTHER);
                continue;
            }
            if (in_window(L, L->now)) L->r->stream_bytes += (uint64_t)w;
            L->stream_budget -= (double)w;
            progress = 1;
        }
        L->stream_rr = (L->stream_rr + 1) % L->nstreams;
    }
}

/* ---- adaptive lead ---- */

static int contended(struct loop *L) { return L->now < L->calm_at; }

/* The lead is the smallest bucket bound with at most 1 % of the recent wake-ups above it. */
static void lead_update(struct loop *L) {
    if (L->wake_total < WAKE_MIN_SAMPLES) return;
    uint32_t seen = 0, keep = L->wake_total - (uint32_t)((double)L->wake_total * (1 - LEAD_QUANTILE));
    int b = 0;
    while (b < WAKE_BUCKETS - 1 && (seen += L->wake_counts[b]) < keep) b++;
    int64_t lead = (int64_t)(b + 1) * WAKE_BUCKET_NS + LEAD_MARGIN_NS;
    L->lead_ns = lead < LEAD_MAX_NS ? lead : LEAD_MAX_NS;
}

/* A sleep returned late_ns after the time it asked for: what waking this CPU costs now. */
static void wake_observed(struct loop *L, int64_t late_ns) {
    if (late_ns < 0) late_ns = 0;
    if (L->window_open && L->now < L->window_end) hist_record(&L->r->wake_late, (uint64_t)late_ns);
    if (L->o->spin_fixed || contended(L)) return; /* then it is mostly run-queue wait */
    if (late_ns > WAKE_CHECK_NS) {
        uint64_t wait = sched_wait(L);
        int queued = (double)(wait - L->wait_seen) >= (double)late_ns / 2;
        L->wait_seen = wait;
        if (queued) return;
    }
    int64_t b = late_ns / WAKE_BUCKET_NS;
    L->wake_counts[b < WAKE_BUCKETS ? b : WAKE_BUCKETS - 1]++;
    L->wake_total++;
    lead_update(L);
}

/* Old wake-ups fade; a loop that no longer sleeps (its lead covers every gap) forgets them
 * and falls back to LEAD_INIT_NS, so it measures again instead of polling for ever. */
static void wake_decay(struct loop *L) {
    if (L->now < L->wake_decay_at) return;
    L->wake_decay_at = L->now + WAKE_DECAY_NS;
    L->wake_total = 0;
    for (int b = 0; b < WAKE_BUCKETS; b++) L->wake_total += L->wake_counts[b] /= 2;
    if (L->wake_total < WAKE_MIN_SAMPLES && L->lead_ns > LEAD_INIT_NS) L->lead_ns = LEAD_INIT_NS;
    else lead_update(L);
}

/* Another task wanted this CPU lately (see CONTENDED_SHARE): sleep instead of polling.
 * held_ns: a poll just took this long, so look now. */
static void contention_check(struct loop *L, int64_t held_ns) {
    if (L->o->spin_fixed || (!held_ns && L->now < L->check_at)) return;
    uint64_t wait = sched_wait(L);
    int64_t span = L->now - L->check_at + CONTENTION_CHECK_NS;
    double waited = (double)(wait - L->wait_at_check);
    if (contended(L) && L->window_open && L->now < L->window_end)
        L->r->contended_s += (double)span / 1e9;
    if (waited > CONTENDED_SHARE * (double)span || (held_ns && waited >= (double)held_ns / 2))
        L->calm_at = L->now + CONTENDED_BACKOFF_NS;
    L->wait_at_check = L->wait_seen = wait;
    L->check_at = L->now + CONTENTION_CHECK_NS;
}

/* When to stop sleeping: fixed --spin-us before any deadline, or the adaptive lead before the
 * next scheduled send (other deadlines, timeouts and the like, need no polling). */
static int64_t wake_time(struct loop *L, int64_t due) {
    if (L->o->spin_fixed) return due - (int64_t)L->o->spin_us * 1000;
    if (L->s->hot && L->s->rate > 0 && L->next_tick < L->end && !contended(L) &&
        L->next_tick - L->lead_ns < due)
        return L->next_tick - L->lead_ns;
    return due;
}

/* ---- setup and the loop ---- */

static void build_requests(struct loop *L) {
    const struct opts *o = L->o;
    L->requests = calloc((size_t)o->ntargets, sizeof *L->requests);
    L->request_len = calloc((size_t)o->ntargets, sizeof *L->request_len);
    for (int i = 0; i < o->ntargets; i++) {
        char host[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &o->targets[i].sin_addr, host, sizeof host);
        int n = asprintf(&L->requests[i], "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: wb-sclient\r\n\r\n",
                         o->path, host, ntohs(o->targets[i].sin_port));
        if (n < 0) { perror("wb-sclient"); exit(1); }
        L->request_len[i] = (size_t)n;
    }
}

static void setup_conns(struct loop *L) {
    const struct shard *s = L->s;
    L->nconns = s->hot + s->cold + s->stream;
    L->conns = calloc((size_t)L->nconns + 1, sizeof *L->conns);
    L->ready = calloc((size_t)s->hot + 1, sizeof *L->ready);
    L->backlog = malloc(BACKLOG_MAX * sizeof *L->backlog);
    L->cold_queue = calloc((size_t)s->cold + 1, sizeof *L->cold_queue);
    L->streams = calloc((size_t)s->stream + 1, sizeof *L->streams);
    if (!L->conns || !L->ready || !L->backlog || !L->cold_queue || !L->streams) {
        perror("wb-sclient: allocating connections");
        exit(1);
    }
    for (int i = 0; i < L->nconns; i++) {
        struct conn *c = &L->conns[i];
        c->fd = -1;
        c->ready_pos = -1;
        if (i < s->hot) {
            c->kind = HOT;
            c->gidx = (uint32_t)(s->hot_first + i);
            c->pending = calloc(2 * (size_t)L->o->max_outstanding, sizeof *c->pending);
            if (L->o->sclient_overload) ready_add(L, c); /* a free socket until its send */
            else conn_deadline(L, c, L->start + 1);
        } else if (i < s->hot + s->cold) {
            c->kind = COLD;
            /* cold connections continue the global index after all hot ones */
            c->gidx = (uint32_t)(L->o->hot_conns + s->cold_first + (i - s->hot));
            cold_enqueue(L, c);
        } else {
            c->kind = STREAM;
            c->gidx = (uint32_t)(L->o->hot_conns + L->o->cold_conns + s->stream_first + (i - s->hot - s->cold));
            L->streams[L->nstreams++] = c;
        }
    }
}

static int64_t next_wakeup(struct loop *L) {
    int64_t t = L->end;
    if (L->s->hot && L->s->rate > 0 && L->next_tick < t) t = L->next_tick;
    if (L->heap_len && L->heap[0].at < t) t = L->heap[0].at;
    int64_t cr = cold_ramp_next(L);
    if (cr < t) t = cr;
    if (L->nstreams && L->stream_last + STREAM_TICK_NS < t) t = L->stream_last + STREAM_TICK_NS;
    if (!L->window_open && L->window_start < t) t = L->window_start;
    return t;
}

/* The kernel's own RTT estimate of every open hot connection: what the latencies compare with. */
static void record_tcp_srtt(struct loop *L) {
    for (int i = 0; i < L->s->hot; i++) {
        struct tcp_info ti;
        socklen_t len = sizeof ti;
        const struct conn *c = &L->conns[i];
        if (c->state == OPEN && !getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) && ti.tcpi_rtt)
            hist_record(&L->r->tcp_srtt, (uint64_t)ti.tcpi_rtt * 1000);
    }
}

static double tv_s(struct timeval tv) { return (double)tv.tv_sec + (double)tv.tv_usec / 1e6; }

int run_shard(const struct opts *o, const struct shard *s, struct result *r) {
    static struct loop loop;
    struct loop *L = &loop;
    L->o = o;
    L->s = s;
    L->r = r;
    L->rng = o->seed * 0x9E3779B97F4A7C15ull + (uint64_t)s->index + 1;
    memset(L->chunk, 'x', sizeof L->chunk);
    r->rss_before_kb = rss_kb();

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

    L->ep = epoll_create1(EPOLL_CLOEXEC);
    if (L->ep < 0) { perror("wb-sclient: epoll_create1"); return 1; }
    build_requests(L);
    L->start = L->now = (int64_t)now_ns();
    if (o->window_end_ns) { /* the caller's instants; a start already past counts from now */
        L->window_start = o->window_start_ns > L->start ? o->window_start_ns : L->start;
        L->window_end = o->window_end_ns;
    } else {
        L->window_start = L->start + (int64_t)(o->warmup_s * 1e9);
        int hold_forever = o->duration_s <= 0;
        L->window_end = hold_forever ? INT64_MAX / 2 : L->window_start + (int64_t)(o->duration_s * 1e9);
    }
    L->end = L->window_end;
    L->stream_last = L->start;
    L->lead_ns = o->spin_fixed ? (int64_t)o->spin_us * 1000 : LEAD_INIT_NS;
    L->wake_decay_at = L->start + WAKE_DECAY_NS;
    L->check_at = L->start + CONTENTION_CHECK_NS;
    L->sched_fd = open("/proc/self/schedstat", O_RDONLY | O_CLOEXEC);
    L->wait_at_check = L->wait_seen = sched_wait(L);
    setup_conns(L);
    if (!s->cold) cold_announce(L); /* a shard without cold connections is ready at once */
    if (s->hot && s->rate > 0) {
        /* shards interleave a fixed schedule instead of sending in lockstep */
        L->tick_seq = o->poisson ? 0 : (double)s->index / o->rate;
        L->next_tick = L->start + (int64_t)(L->tick_seq * 1e9);
    }

    struct epoll_event events[1024];
    while (!stop_requested) {
        L->now = (int64_t)now_ns();
        if (L->now >= L->end) break;
        if (!L->window_open && L->now >= L->window_start) {
            L->window_open = 1;
            getrusage(RUSAGE_SELF, &L->ru_window);
            L->run_delay_window = run_delay_ns();
            hot_edge(L, &r->waiting_start, &r->in_flight_start);
        }
        run_timers(L);
        if (s->hot && s->rate > 0) run_hot_schedule(L);
        run_cold_ramp(L);
        open_streams(L);
        run_streams(L);
        /* sleep until the lead before the next deadline, then poll without sleeping: a
           vCPU's slow wake-up stays out of the send time. --spin-us also polls for up to
           spin_us after a send while its reply is due, so it stays out of the latency too. */
        wake_decay(L);
        contention_check(L, 0);
        int64_t t = (int64_t)now_ns(), due = next_wakeup(L), wake = wake_time(L, due);
        int64_t spin_ns = (int64_t)o->spin_us * 1000;
        int64_t wait = wake - t;
        if (wait < 0 ||
            (o->spin_fixed && L->hot_awaiting && L->now - L->last_hot_send < spin_ns))
            wait = 0;
        else if (wait < (int64_t)o->coalesce_us * 1000) wait = (int64_t)o->coalesce_us * 1000;
        if (wait && wake < due && L->window_open && L->now < L->window_end) {
            int64_t lead = L->lead_ns; /* this sleep ends early for a send */
            L->r->lead_sum_ns += (double)lead;
            L->r->lead_sleeps++;
            if ((uint64_t)lead > L->r->lead_max_ns) L->r->lead_max_ns = (uint64_t)lead;
        }
        struct timespec ts = {wait / 1000000000LL, wait % 1000000000LL};
        int64_t polled = (int64_t)now_ns();
        int n = epoll_pwait2(L->ep, events, 1024, &ts, &waitmask);
        if (n < 0 && errno != EINTR) { perror("wb-sclient: epoll_pwait2"); return 1; }
        L->now = (int64_t)now_ns();
        /* an empty poll ahead of the deadline is idle time, up to the deadline only */
        if (!wait && !n && polled < due && L->window_open)
            L->spin_idle_ns += (L->now < due ? L->now : due) - polled;
        if (wait && !n) wake_observed(L, L->now - (polled + wait));
        if (!wait && L->now - polled > PREEMPTED_NS) contention_check(L, L->now - polled);
        for (int i = 0; i < n; i++) {
            on_event(L, &L->conns[events[i].data.u32], events[i].events);
            send_due(L);
        }
    }

    L->now = (int64_t)now_ns();
    hot_edge(L, &r->waiting_end, &r->in_flight_end);
    record_tcp_srtt(L);
    int64_t wend = L->now < L->window_end ? L->now : L->window_end;
    if (wend < L->window_start) wend = L->window_start; /* a window that ended before it ran */
    r->window_s = (double)(wend - L->window_start) / 1e9;
    r->window_start_ns = L->window_start;
    r->window_end_ns = wend;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    r->cpu_user_s = tv_s(ru.ru_utime);
    r->cpu_sys_s = tv_s(ru.ru_stime);
    if (L->window_open) {
        r->cpu_window_user_s = r->cpu_user_s - tv_s(L->ru_window.ru_utime);
        r->cpu_window_sys_s = r->cpu_sys_s - tv_s(L->ru_window.ru_stime);
        r->run_delay_window_s = (double)(run_delay_ns() - L->run_delay_window) / 1e9;
        r->spin_idle_s = (double)L->spin_idle_ns / 1e9;
    }
    r->cold_requested = (uint64_t)s->cold;
    r->cold_held = (uint64_t)L->cold_open;
    r->rss_end_kb = rss_kb();
    r->finished = 1;
    return 0;
}
