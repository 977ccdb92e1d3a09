/* http.h: the HTTP/1.1 request parser (incremental, byte at a time, no buffering) and
 * the fixed replies. */
#ifndef WB_HTTP_H
#define WB_HTTP_H

#include <stddef.h>
#include <stdint.h>

#define HTTP_MAX_HEAD 8192 /* request line + headers; more gets 431 */

enum http_result {
    HTTP_NEED_MORE,  /* all input consumed, request not complete */
    HTTP_REQUEST,    /* a request head is complete (its body, if any, is skipped later) */
    HTTP_BAD,        /* malformed: reply 400 and close */
    HTTP_TOO_LARGE,  /* head over HTTP_MAX_HEAD: reply 431 and close */
    HTTP_UNSUPPORTED, /* Transfer-Encoding (not implemented): reply 501 and close */
};

struct http_parser {
    uint8_t state;
    uint8_t method_cand; /* candidates still matching: bit 0 GET, bit 1 HEAD */
    uint8_t header;      /* header being matched or read (enum in http.c) */
    uint8_t token_cand;  /* Connection value tokens still matching: close, keep-alive */
    uint16_t pos;        /* position in the token being matched */
    uint8_t minor;       /* HTTP/1.minor */
    uint8_t conn_close, conn_keep_alive, head_only, has_length, transfer_coding;
    uint32_t head_bytes;
    uint64_t length;     /* Content-Length being read, then body bytes left to skip */
};

void http_parser_init(struct http_parser *p);

/* Feeds buf[0..len) and stops after at most one request head. *used says how many
 * bytes were consumed. After HTTP_REQUEST, http_keep_alive/p->head_only describe it. */
enum http_result http_parse(struct http_parser *p, const char *buf, size_t len, size_t *used);
int http_keep_alive(const struct http_parser *p);

/* The fixed replies: 200 with or without body, per Connection header, and the errors. */
enum reply_kind {
    REPLY_OK, REPLY_OK_CLOSE, REPLY_OK_KEEP_ALIVE,
    REPLY_HEAD, REPLY_HEAD_CLOSE, REPLY_HEAD_KEEP_ALIVE,
    REPLY_400, REPLY_431, REPLY_501, REPLY_KINDS
};

struct reply {
    char *data;
    size_t len;
};

/* Builds all replies for a body of `body_bytes`: bytes 'a'..'z' repeating. */
int replies_build(struct reply replies[REPLY_KINDS], size_t body_bytes);
/* The reply for the request the parser just completed. */
enum reply_kind reply_for(const struct http_parser *p);
/* Replies after which the connection is closed. */
int reply_closes(enum reply_kind kind);

#endif
