/* HTTP/1.1 response framing for the generator: status and Content-Length, nothing else. */
#ifndef WB_HTTP_H
#define WB_HTTP_H

#include <stddef.h>

/* Parses one response header block [p, p+n) that ends with CRLFCRLF.
 * Returns 0 with *status and *body_len set, or -1 when it is not a response we can frame
 * (no status line, no Content-Length, chunked). */
int http_parse_head(const char *p, size_t n, int *status, size_t *body_len);

#endif
