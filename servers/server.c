/* server.c: the loop shared by every backend: accept strategies, the reserved-fd answer
 * to EMFILE, and per-connection HTTP (keep-alive, pipelining, lingering close). */
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "http.h"
#include "pacing.h"

#define READ_CHUNK 65536
#define READS_PER_TURN 16 /* then other connections get their turn */
#define RUNS 4            /* distinct reply kinds queued before parsing pauses */
#define IOV_BATCH 64

volatile sig_atomic_t server_stop, server_snapshot;

/* The self-pipe: a signal handler writes a byte, so a wait that began just after the loop
 * checked its flags still returns. The loop can then wait without a timeout: an idle
 * server is never woken, and a busy one arms no timer each time it sleeps. */
static volatile sig_atomic_t wake_write = -1;
static int wake_read = -1;

/* Queued replies, run-length encoded: pipelined requests usually share one kind. */
struct run {
    uint32_t count;
    uint8_t kind;
};

struct conn {
    struct http_parser parser;
    struct run runs[RUNS];
    uint8_t run_head, run_count;
    uint8_t open, closing, draining, peer_eof, queued;
    uint8_t blocked;         /* --source: its socket was full, until it is writable again */
    uint32_t stream_pos;     /* --source: its place in srv.streams */
    uint32_t offset;         /* bytes of the first queued reply already written */
    char *stash;             /* input read but not yet parsed (when the run queue is full) */
    uint32_t stash_len, stash_off;
};

static struct {
    const struct server_config *cfg;
    struct dispatch d;
    struct stats *st;
    struct conn *conns; /* by fd */
    struct reply replies[REPLY_KINDS];
    int listen_fd, reserve_fd;
    int *again, again_count; /* fds to service without waiting for an event (see DISPATCH_EDGE) */
    int *turn;
    int events_keep_coming; /* the last blocking wait returned within --min-wait-us */
    int *streams, nstreams; /* --source: the open connections, in the order pacing takes them */
    struct pacing pacing;
    char rbuf[READ_CHUNK];
} srv;

void server_wake(void)
{
    int saved = errno;
    if (wake_write >= 0)
        (void)!write(wake_write, "", 1); /* a full pipe already wakes the loop */
    errno = saved;
}

static void drain_wake(void)
{
    char buf[64];
    while (read(wake_read, buf, sizeof buf) > 0)
        continue;
}

static void queue_again(int fd)
{
    if (srv.conns[fd].queued)
        return;
    srv.conns[fd].queued = 1;
    srv.again[srv.again_count++] = fd;
}

static void want(int fd, int mask)
{
    if (srv.d.mask[fd] != mask && dispatch_set(&srv.d, fd, mask) < 0)
        perror("wb-server: registering interest");
}

static void conn_close(int fd)
{
    struct conn *c = &srv.conns[fd];
    if (srv.cfg->source_mbps > 0) { /* the last stream takes its place */
        int last = srv.streams[--srv.nstreams];
        srv.streams[c->stream_pos] = last;
        srv.conns[last].stream_pos = c->stream_pos;
    }
    want(fd, DISPATCH_NONE);
    close(fd);
    free(c->stash);
    c->stash = NULL;
    c->open = 0;
    srv.st->connections_closed++;
    srv.st->connections_current--;
}

static void conn_open(int fd)
{
    if (fd >= srv.d.setsize) {
        close(fd);
        return;
    }
    struct conn *c = &srv.conns[fd];
    uint8_t queued = c->queued;
    *c = (struct conn){.open = 1, .queued = queued};
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    srv.st->connections_accepted++;
    if (++srv.st->connections_current > srv.st->connections_max)
        srv.st->connections_max = srv.st->connections_current;
    if (srv.cfg->source_mbps > 0) {
        c->stream_pos = (uint32_t)srv.nstreams;
        srv.streams[srv.nstreams++] = fd;
    }
    if (dispatch_set(&srv.d, fd, DISPATCH_READABLE) < 0) {
        perror("wb-server: registering a connection");
        conn_close(fd);
        return;
    }
    if (srv.cfg->ops->flags & DISPATCH_NO_INITIAL)
        queue_again(fd); /* data may have arrived before the registration */
}

static void push_reply(struct conn *c, enum reply_kind kind)
{
    struct run *tail = c->run_count ? &c->runs[(c->run_head + c->run_count - 1) % RUNS] : NULL;
    if (tail && tail->kind == kind) {
        tail->count++;
        return;
    }
    c->runs[(c->run_head + c->run_count++) % RUNS] = (struct run){1, (uint8_t)kind};
}

/* Parses input, queueing replies; returns the bytes used (fewer when the queue is full). */
static size_t consume(struct conn *c, const char *buf, size_t len)
{
    size_t off = 0;
    while (off < len && !c->closing && c->run_count < RUNS) {
        size_t used;
        enum http_result r = http_parse(&c->parser, buf + off, len - off, &used);
        off += used;
        if (r == HTTP_NEED_MORE)
            continue;
        enum reply_kind kind;
        switch (r) {
        case HTTP_REQUEST: kind = reply_for(&c->parser); srv.st->requests++; break;
        case HTTP_BAD: kind = REPLY_400; srv.st->replies_400++; break;
        case HTTP_TOO_LARGE: kind = REPLY_431; srv.st->replies_431++; break;
        default: kind = REPLY_501; srv.st->replies_501++; break; /* HTTP_UNSUPPORTED */
        }
        push_reply(c, kind);
        if (reply_closes(kind))
            c->closing = 1;
    }
    return c->closing ? len : off;
}

/* Writes queued replies: 1 when all are written, 0 when the socket is full, -1 on error. */
static int flush(int fd, struct conn *c)
{
    while (c->run_count) {
        struct iovec iov[IOV_BATCH];
        int n = 0;
        size_t total = 0, skip = c->offset;
        for (int r = 0; r < c->run_count && n < IOV_BATCH; r++) {
            const struct run *run = &c->runs[(c->run_head + r) % RUNS];
            const struct reply *rep = &srv.replies[run->kind];
            for (uint32_t k = 0; k < run->count && n < IOV_BATCH; k++, skip = 0) {
                iov[n++] = (struct iovec){rep->data + skip, rep->len - skip};
                total += rep->len - skip;
            }
        }
        /* One reply (the usual case): send(2), which skips the VFS layer and iovec import. */
        ssize_t w = n == 1 ? send(fd, iov[0].iov_base, iov[0].iov_len, 0) : writev(fd, iov, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN ? 0 : -1;
        }
        srv.st->bytes_out += (uint64_t)w;
        for (size_t left = (size_t)w; left > 0;) {
            struct run *run = &c->runs[c->run_head];
            size_t rest = srv.replies[run->kind].len - c->offset;
            if (left < rest) {
                c->offset += (uint32_t)left;
                break;
            }
            left -= rest;
            c->offset = 0;
            srv.st->replies++;
            if (--run->count == 0) {
                c->run_head = (uint8_t)((c->run_head + 1) % RUNS);
                c->run_count--;
            }
        }
        if ((size_t)w < total)
            return 0;
    }
    return 1;
}

static void stash_rest(struct conn *c, const char *rest, size_t len)
{
    c->stash = malloc(len);
    if (!c->stash)
        return; /* out of memory: the rest of this input is lost, the peer will notice */
    memcpy(c->stash, rest, len);
    c->stash_len = (uint32_t)len;
    c->stash_off = 0;
}

/* A closing connection: reply written, our side shut; read until the peer closes, so
 * that unread input does not turn our FIN into a reset that destroys the reply. */
static void drain(int fd)
{
    for (;;) {
        ssize_t n = recv(fd, srv.rbuf, sizeof srv.rbuf, 0);
        if (n > 0) {
            srv.st->bytes_in += (uint64_t)n;
            continue;
        }
        if (n < 0 && errno == EAGAIN)
            return want(fd, DISPATCH_READABLE);
        if (n < 0 && errno == EINTR)
            continue;
        return conn_close(fd);
    }
}

/* Services one connection until it would block: flush, parse stashed input, read.
 * A short read emptied the socket, so unless the peer also closed (fired says so) the
 * read that would only return EAGAIN is skipped: new data brings a new event in every
 * backend, edge-triggered ones included. */
static void drive(int fd, int fired)
{
    struct conn *c = &srv.conns[fd];
    if (c->draining)
        return drain(fd);
    /* An edge-triggered backend reports writability alone (a new connection's first edge
     * comes before its request): with nothing to write, a read would only return EAGAIN,
     * and the request brings an edge of its own. */
    if (!(fired & (DISPATCH_READABLE | DISPATCH_HUP)) && !c->run_count && !c->stash &&
        !c->closing && (srv.cfg->ops->flags & DISPATCH_EDGE))
        return;
    for (int reads = 0, drained = 0;;) {
        if (c->run_count) {
            int r = flush(fd, c);
            if (r < 0)
                return conn_close(fd);
            if (r == 0)
                return want(fd, DISPATCH_WRITABLE);
        }
        if (c->closing) {
            c->draining = 1;
            shutdown(fd, SHUT_WR);
            return drain(fd);
        }
        if (c->stash) {
            c->stash_off += (uint32_t)consume(c, c->stash + c->stash_off,
                                              c->stash_len - c->stash_off);
            if (c->stash_off == c->stash_len) {
                free(c->stash);
                c->stash = NULL;
            }
            continue;
        }
        if (c->peer_eof)
            return conn_close(fd);
        if (drained)
            return want(fd, DISPATCH_READABLE);
        if (reads++ == READS_PER_TURN) {
            want(fd, DISPATCH_READABLE);
            if (srv.cfg->ops->flags & DISPATCH_EDGE)
                queue_again(fd);
            return;
        }
        ssize_t n = recv(fd, srv.rbuf, sizeof srv.rbuf, 0);
        if (n > 0) {
            srv.st->bytes_in += (uint64_t)n;
            drained = (size_t)n < sizeof srv.rbuf && !(fired & DISPATCH_HUP);
            if (srv.cfg->sink)
                continue;
            size_t used = consume(c, srv.rbuf, (size_t)n);
            if (used < (size_t)n)
                stash_rest(c, srv.rbuf + used, (size_t)n - used);
        } else if (n == 0) {
            c->peer_eof = 1; /* half-close: answer what was asked, then close */
        } else if (errno == EAGAIN) {
            return want(fd, DISPATCH_READABLE);
        } else if (errno != EINTR) {
            return conn_close(fd);
        }
    }
}

/* --source: a connection's events. Writable: its socket has room again for pacing's writes.
 * Readable: what the peer sends is read and discarded (a receiver sends nothing but ACKs,
 * so only its close or a reset is read). Only an event asks for a read: a writable edge
 * alone would otherwise cost a read that returns EAGAIN in the stream's system-call time. */
static void source_drive(int fd, int fired)
{
    struct conn *c = &srv.conns[fd];
    if (fired & DISPATCH_WRITABLE)
        c->blocked = 0;
    while (fired & (DISPATCH_READABLE | DISPATCH_HUP)) {
        ssize_t n = recv(fd, srv.rbuf, sizeof srv.rbuf, 0);
        if (n > 0) {
            srv.st->bytes_in += (uint64_t)n;
        } else if (n < 0 && errno == EAGAIN) {
            break;
        } else if (n == 0 || errno != EINTR) {
            return conn_close(fd);
        }
    }
    want(fd, DISPATCH_READABLE | (c->blocked ? DISPATCH_WRITABLE : 0));
}

/* pacing_write for --source: one segment's payload to the index-th open connection. */
static size_t source_write(void *owner, int index)
{
    (void)owner;
    int fd = srv.streams[index];
    struct conn *c = &srv.conns[fd];
    if (c->blocked)
        return 0;
    ssize_t n = send(fd, srv.pacing.chunk, sizeof srv.pacing.chunk, MSG_NOSIGNAL);
    if (n >= 0) {
        srv.st->bytes_out += (uint64_t)n;
        return (size_t)n;
    }
    c->blocked = 1;
    if (errno == EAGAIN)
        want(fd, DISPATCH_READABLE | DISPATCH_WRITABLE);
    else
        queue_again(fd); /* failed: its read finds why and closes it, outside pacing's round */
    return 0;
}

/* Out of descriptors: free the reserved one, accept and close the oldest pending
 * connection, reserve again. Without this a level-triggered listener spins. Returns 0
 * when nothing was pending (accept reports EMFILE before it looks at the queue). */
static int shed_one(void)
{
    srv.st->emfile_events++;
    close(srv.reserve_fd);
    int fd = accept4(srv.listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0)
        close(fd);
    srv.reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return fd >= 0 || errno != EAGAIN;
}

static void accept_ready(void)
{
    int limit = srv.cfg->accept_limit;
    for (int i = 0; limit == 0 || i < limit; i++) {
        srv.st->accept_calls++;
        int fd = srv.cfg->ops->accept
                     ? srv.cfg->ops->accept(&srv.d)
                     : accept4(srv.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            conn_open(fd);
        } else if (errno == EAGAIN) {
            srv.st->accept_eagain++;
            return;
        } else if (errno == EMFILE || errno == ENFILE) {
            if (!shed_one()) {
                srv.st->accept_eagain++;
                return;
            }
        } else if (errno != EINTR && errno != ECONNABORTED) {
            perror("wb-server: accept");
            return;
        }
    }
    if (srv.cfg->ops->flags & DISPATCH_EDGE)
        queue_again(srv.listen_fd); /* stopped before EAGAIN: no new edge will come */
}

static void handle(int fd, int fired)
{
    if (fd == wake_read)
        drain_wake();
    else if (fd == srv.listen_fd)
        accept_ready();
    else if (srv.conns[fd].open && srv.cfg->source_mbps > 0)
        source_drive(fd, fired);
    else if (srv.conns[fd].open)
        drive(fd, fired);
}

static int setup(const struct server_config *cfg, int listen_fd, struct stats *stats)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return -1;
    int setsize = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1u << 24) ? 1 << 24
                                                                          : (int)rl.rlim_cur;
    srv.cfg = cfg;
    srv.st = stats;
    srv.listen_fd = listen_fd;
    srv.conns = calloc((size_t)setsize, sizeof *srv.conns);
    srv.again = malloc((size_t)setsize * sizeof *srv.again);
    srv.turn = malloc((size_t)setsize * sizeof *srv.turn);
    srv.streams = malloc((size_t)setsize * sizeof *srv.streams);
    srv.reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int wake[2];
    if (!srv.conns || !srv.again || !srv.turn || !srv.streams || srv.reserve_fd < 0 ||
        pipe2(wake, O_NONBLOCK | O_CLOEXEC) < 0 ||
        replies_build(srv.replies, (size_t)cfg->reply_bytes) < 0 ||
        dispatch_open(&srv.d, cfg->ops, setsize, listen_fd, stats) < 0 ||
        dispatch_set(&srv.d, listen_fd, DISPATCH_READABLE) < 0 ||
        dispatch_set(&srv.d, wake[0], DISPATCH_READABLE) < 0)
        return -1;
    wake_read = wake[0];
    wake_write = wake[1];
    if (cfg->ops->flags & DISPATCH_NO_INITIAL)
        queue_again(listen_fd); /* clients may have connected since the ready line */
    return 0;
}

static int64_t monotonic_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* --min-wait-us: below saturation a server is woken once per request, and on a virtual
 * machine the wake-up (the idle CPU's exit, the switch in and out) costs more than the
 * request. While events keep coming (the last wait that blocked returned within the
 * hold-off) and none is ready yet, the loop sleeps the hold-off before it waits, so one
 * wake-up serves what arrived meanwhile: interrupt moderation for a server, paid for in
 * response time (up to the hold-off, plus the timer's slack) and capping a load of N
 * requests in flight at N per hold-off. A busy server finds events ready and never sleeps;
 * when a wait finds nothing for longer than the hold-off, the loop waits at once again,
 * so a light load is not delayed. */
static int wait_for_events(long min_wait_us, int timeout_ms)
{
    if (!timeout_ms || !min_wait_us)
        return srv.d.ops->wait(&srv.d, timeout_ms);
    if (srv.events_keep_coming) {
        int n = srv.d.ops->wait(&srv.d, 0);
        if (n != 0)
            return n; /* ready already, or a signal: no wake-up to save */
        struct timespec hold = {.tv_sec = min_wait_us / 1000000,
                                .tv_nsec = min_wait_us % 1000000 * 1000};
        nanosleep(&hold, NULL); /* a signal ends it early: the wait then sees the flags */
    }
    int64_t from = monotonic_ns();
    int n = srv.d.ops->wait(&srv.d, timeout_ms);
    srv.events_keep_coming = n > 0 && monotonic_ns() - from < min_wait_us * 1000;
    return n;
}

/* --source: this worker's share of the stream, in proportion to the connections it holds of
 * all the workers' (SO_REUSEPORT spreads them unevenly: 4 over 8 workers leave some none). */
static double source_share_mbps(void)
{
    uint64_t all = 0;
    for (int i = 0; i < srv.cfg->nworkers; i++)
        all += srv.cfg->workers[i].connections_current;
    return all ? srv.cfg->source_mbps * (double)srv.st->connections_current / (double)all : 0;
}

/* How long the loop may wait: not at all with connections to service, until pacing's next
 * tick with a stream to send (whole ms, the backends' unit: pacing makes up the rest), else
 * for as long as nothing happens. */
static int wait_timeout_ms(void)
{
    if (srv.again_count)
        return 0;
    if (srv.cfg->source_mbps <= 0 || !srv.nstreams)
        return -1;
    int64_t due = pacing_next(&srv.pacing, srv.nstreams) - monotonic_ns();
    return due <= 0 ? 0 : (int)((due + 999999) / 1000000);
}

int server_run(const struct server_config *cfg, int listen_fd, struct stats *stats,
               void (*on_snapshot)(void))
{
    if (setup(cfg, listen_fd, stats) < 0) {
        fprintf(stderr, "wb-server: cannot start the %s backend: %s\n", cfg->ops->name,
                strerror(errno));
        return -1;
    }
    pacing_init(&srv.pacing, cfg->source_mbps, monotonic_ns());
    while (!server_stop) {
        if (server_snapshot) {
            server_snapshot = 0;
            close(srv.reserve_fd); /* the snapshot gets a descriptor even at EMFILE */
            on_snapshot();
            srv.reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        }
        int n = wait_for_events(cfg->min_wait_us, wait_timeout_ms());
        if (n < 0 && errno != EINTR) {
            fprintf(stderr, "wb-server: %s wait: %s\n", cfg->ops->name, strerror(errno));
            return -1;
        }
        for (int i = 0; i < n; i++)
            handle(srv.d.fired[i].fd, srv.d.fired[i].mask);
        int turns = srv.again_count;
        memcpy(srv.turn, srv.again, (size_t)turns * sizeof *srv.turn);
        srv.again_count = 0;
        for (int i = 0; i < turns; i++) {
            srv.conns[srv.turn[i]].queued = 0;
            handle(srv.turn[i], DISPATCH_HUP); /* no event to go by: read to EAGAIN */
        }
        if (cfg->source_mbps > 0 && srv.nstreams) {
            srv.pacing.mbps = source_share_mbps();
            pacing_run(&srv.pacing, monotonic_ns(), srv.nstreams, source_write, NULL);
        }
    }
    srv.d.ops->destroy(&srv.d);
    close(srv.reserve_fd); /* for the final stats */
    return 0;
}
