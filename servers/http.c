/* http.c: incremental HTTP/1.1 request parser (a state machine fed any split of the
 * input, keeping no bytes) and the fixed replies. */
#include "http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum state {
    S_NEXT,      /* between requests: reset, then S_START */
    S_START,     /* skipping empty lines before a request line */
    S_METHOD, S_TARGET_START, S_TARGET, S_VERSION, S_VERSION_END, S_REQUEST_LF,
    S_HEADER_START, S_NAME, S_VALUE, S_HEADER_LF, S_END_LF,
    S_BODY,      /* skipping p->length body bytes */
};

enum header { H_OTHER, H_CONNECTION, H_CONTENT_LENGTH, H_TRANSFER_ENCODING };

/* Words matched as they arrive, with their lengths (no strlen per input byte). */
struct word {
    const char *s;
    uint8_t len;
};
#define WORD(text) {text, sizeof(text) - 1}
static const struct word header_names[] = {WORD("connection"), WORD("content-length"),
                                           WORD("transfer-encoding")};
static const struct word methods[] = {WORD("GET"), WORD("HEAD")};
static const struct word conn_tokens[] = {WORD("close"), WORD("keep-alive")};
static const char version_prefix[] = "HTTP/1.";

#define ALL_OF(n) ((uint8_t)((1u << (n)) - 1u))
#define MAX_CONTENT_LENGTH 1000000000000000ULL

void http_parser_init(struct http_parser *p) { memset(p, 0, sizeof *p); }

/* RFC 9110 token characters. */
static int is_tchar(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return 1;
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
        return 1;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static unsigned char lower(unsigned char c) { return c >= 'A' && c <= 'Z' ? c | 0x20 : c; }

/* Narrows `cand` (bit i: words[i] still matches) by character c at position pos. */
static uint8_t match_step(uint8_t cand, const struct word *w, int n, size_t pos,
                          unsigned char c)
{
    for (int i = 0; i < n; i++)
        if ((cand >> i & 1) && (w[i].len <= pos || (unsigned char)w[i].s[pos] != c))
            cand &= (uint8_t)~(1u << i);
    return cand;
}

/* The first word still matching whose length is exactly pos, or -1. */
static int match_done(uint8_t cand, const struct word *w, int n, size_t pos)
{
    for (int i = 0; i < n; i++)
        if ((cand >> i & 1) && w[i].len == pos)
            return i;
    return -1;
}

static void connection_token_end(struct http_parser *p)
{
    int t = p->pos ? match_done(p->token_cand, conn_tokens, 2, p->pos) : -1;
    if (t == 0)
        p->conn_close = 1;
    else if (t == 1)
        p->conn_keep_alive = 1;
    p->pos = 0;
    p->token_cand = ALL_OF(2);
}

/* One byte of a header value; 0 when it makes the request malformed. */
static int value_byte(struct http_parser *p, unsigned char c)
{
    int ows = c == ' ' || c == '\t';
    switch (p->header) {
    case H_CONNECTION:
        if (ows || c == ',') {
            connection_token_end(p);
        } else {
            p->token_cand = match_step(p->token_cand, conn_tokens, 2, p->pos, lower(c));
            p->pos++;
        }
        return 1;
    case H_CONTENT_LENGTH: /* pos: 0 before the digits, 1 in them, 2 after */
        if (ows) {
            if (p->pos == 1)
                p->pos = 2;
            return 1;
        }
        if (c < '0' || c > '9' || p->pos == 2)
            return 0;
        p->pos = 1;
        p->length = p->length * 10 + (c - '0');
        return p->length <= MAX_CONTENT_LENGTH;
    case H_TRANSFER_ENCODING:
        p->transfer_coding = 1; /* bodies are only supported with Content-Length */
        return 1;
    default:
        return 1;
    }
}

/* End of a header line; 0 when the value was malformed. */
static int header_end(struct http_parser *p)
{
    if (p->header == H_CONNECTION)
        connection_token_end(p);
    if (p->header == H_CONTENT_LENGTH) {
        if (p->pos == 0 || p->has_length) /* empty, or a second one: refuse, never guess */
            return 0;
        p->has_length = 1;
    }
    return 1;
}

/* The head is complete: decide whether a body follows. */
static enum http_result head_end(struct http_parser *p)
{
    if (p->transfer_coding) /* RFC 9112 6.1: a transfer coding we do not implement */
        return HTTP_UNSUPPORTED;
    p->state = p->length ? S_BODY : S_NEXT;
    return HTTP_REQUEST;
}

static enum http_result head_byte(struct http_parser *p, unsigned char c)
{
    if (++p->head_bytes > HTTP_MAX_HEAD)
        return HTTP_TOO_LARGE;
    switch (p->state) {
    case S_START:
        if (c == '\r' || c == '\n')
            return HTTP_NEED_MORE;
        p->state = S_METHOD;
        p->method_cand = ALL_OF(2);
        /* fall through */
    case S_METHOD:
        if (c == ' ') {
            int m = match_done(p->method_cand, methods, 2, p->pos);
            p->head_only = m == 1;
            p->state = S_TARGET_START;
            return HTTP_NEED_MORE;
        }
        if (!is_tchar(c))
            return HTTP_BAD;
        p->method_cand = match_step(p->method_cand, methods, 2, p->pos++, c);
        return HTTP_NEED_MORE;
    case S_TARGET_START:
    case S_TARGET:
        if (c == ' ' && p->state == S_TARGET) {
            p->state = S_VERSION;
            p->pos = 0;
            return HTTP_NEED_MORE;
        }
        if (c <= ' ' || c == 0x7f)
            return HTTP_BAD;
        p->state = S_TARGET;
        return HTTP_NEED_MORE;
    case S_VERSION:
        if (p->pos < sizeof version_prefix - 1) {
            if (c != (unsigned char)version_prefix[p->pos++])
                return HTTP_BAD;
            return HTTP_NEED_MORE;
        }
        if (c < '0' || c > '9')
            return HTTP_BAD;
        p->minor = (uint8_t)(c - '0');
        p->state = S_VERSION_END;
        return HTTP_NEED_MORE;
    case S_VERSION_END:
    case S_HEADER_LF:
        if (c == '\r' && p->state == S_VERSION_END) {
            p->state = S_REQUEST_LF;
            return HTTP_NEED_MORE;
        }
        /* a bare LF ends the line too */
        /* fall through */
    case S_REQUEST_LF:
        if (c != '\n')
            return HTTP_BAD;
        p->state = S_HEADER_START;
        return HTTP_NEED_MORE;
    case S_HEADER_START:
        if (c == '\r') {
            p->state = S_END_LF;
            return HTTP_NEED_MORE;
        }
        if (c == '\n')
            return head_end(p);
        if (!is_tchar(c)) /* includes obsolete line folding */
            return HTTP_BAD;
        p->state = S_NAME;
        p->header = ALL_OF(3);
        p->pos = 0;
        /* fall through */
    case S_NAME:
        if (c == ':') {
            int h = match_done(p->header, header_names, 3, p->pos);
            p->header = (uint8_t)(h + 1); /* -1 (other) becomes H_OTHER */
            p->pos = 0;
            p->token_cand = ALL_OF(2);
            p->state = S_VALUE;
            return HTTP_NEED_MORE;
        }
        if (!is_tchar(c))
            return HTTP_BAD;
        p->header = match_step(p->header, header_names, 3, p->pos++, lower(c));
        return HTTP_NEED_MORE;
    case S_VALUE:
        if (c == '\r' || c == '\n') {
            if (!header_end(p))
                return HTTP_BAD;
            p->state = c == '\r' ? S_HEADER_LF : S_HEADER_START;
            return HTTP_NEED_MORE;
        }
        if ((c < ' ' && c != '\t') || c == 0x7f || !value_byte(p, c))
            return HTTP_BAD;
        return HTTP_NEED_MORE;
    case S_END_LF:
        return c == '\n' ? head_end(p) : HTTP_BAD;
    default:
        return HTTP_BAD;
    }
}

/* How many bytes from buf leave the state as it is: the request target, and the names
 * and values of headers we ignore, skipped in a tight loop rather than one call per byte. */
static size_t plain_run(const struct http_parser *p, const unsigned char *buf, size_t len)
{
    size_t room = HTTP_MAX_HEAD - p->head_bytes, n = 0;
    if (len > room)
        len = room;
    if (p->state == S_TARGET)
        while (n < len && buf[n] > ' ' && buf[n] != 0x7f)
            n++;
    else if (p->state == S_NAME && p->header == 0) /* a header name we do not track */
        while (n < len && is_tchar(buf[n]))
            n++;
    else if (p->state == S_VALUE && p->header == H_OTHER)
        while (n < len && (buf[n] >= ' ' || buf[n] == '\t') && buf[n] != 0x7f)
            n++;
    return n;
}

enum http_result http_parse(struct http_parser *p, const char *buf, size_t len, size_t *used)
{
    size_t i = 0;
    enum http_result r = HTTP_NEED_MORE;
    while (i < len && r == HTTP_NEED_MORE) {
        if (p->state == S_NEXT) {
            http_parser_init(p);
            p->state = S_START;
        }
        size_t run = plain_run(p, (const unsigned char *)buf + i, len - i);
        p->head_bytes += (uint32_t)run;
        i += run;
        if (i == len)
            break;
        if (p->state == S_BODY) {
            size_t skip = len - i < p->length ? len - i : (size_t)p->length;
            i += skip;
            p->length -= skip;
            if (p->length == 0)
                p->state = S_NEXT;
            continue;
        }
        r = head_byte(p, (unsigned char)buf[i++]);
    }
    *used = i;
    return r;
}

int http_keep_alive(const struct http_parser *p)
{
    if (p->conn_close)
        return 0;
    return p->minor >= 1 || p->conn_keep_alive;
}

enum reply_kind reply_for(const struct http_parser *p)
{
    enum reply_kind base = p->head_only ? REPLY_HEAD : REPLY_OK;
    if (!http_keep_alive(p))
        return base + 1;
    return p->minor == 0 ? base + 2 : base;
}

int reply_closes(enum reply_kind kind)
{
    return kind == REPLY_OK_CLOSE || kind == REPLY_HEAD_CLOSE || kind == REPLY_400 ||
           kind == REPLY_431 || kind == REPLY_501;
}

static int reply_make(struct reply *r, const char *status, size_t length,
                      const char *connection, size_t body_bytes)
{
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %s\r\nServer: wb-server\r\nContent-Type: text/plain\r\n"
                     "Content-Length: %zu\r\n%s\r\n",
                     status, length, connection);
    r->len = (size_t)n + body_bytes;
    r->data = malloc(r->len ? r->len : 1);
    if (!r->data)
        return -1;
    memcpy(r->data, head, (size_t)n);
    for (size_t i = 0; i < body_bytes; i++)
        r->data[n + i] = (char)('a' + i % 26);
    return 0;
}

int replies_build(struct reply replies[REPLY_KINDS], size_t body_bytes)
{
    static const char *const connection[] = {"", "Connection: close\r\n",
                                             "Connection: keep-alive\r\n"};
    int err = 0;
    for (int c = 0; c < 3; c++) {
        err |= reply_make(&replies[REPLY_OK + c], "200 OK", body_bytes, connection[c], body_bytes);
        err |= reply_make(&replies[REPLY_HEAD + c], "200 OK", body_bytes, connection[c], 0);
    }
    err |= reply_make(&replies[REPLY_400], "400 Bad Request", 0, connection[1], 0);
    err |= reply_make(&replies[REPLY_431], "431 Request Header Fields Too Large", 0,
                      connection[1], 0);
    err |= reply_make(&replies[REPLY_501], "501 Not Implemented", 0, connection[1], 0);
    return err ? -1 : 0;
}
