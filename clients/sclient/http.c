/* HTTP/1.1 response framing for the generator. */
#include "http.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *find_header(const char *p, const char *end, const char *name) {
    size_t len = strlen(name);
    for (const char *line = p; line < end;) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol) break;
        if ((size_t)(eol - line) > len && line[len] == ':' && !strncasecmp(line, name, len))
            return line + len + 1;
        line = eol + 1;
    }
    return NULL;
}

int http_parse_head(const char *p, size_t n, int *status, size_t *body_len) {
    const char *end = p + n;
    if (n < 12 || memcmp(p, "HTTP/1.", 7) != 0 || p[8] != ' ') return -1;
    int code = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
    if (code < 100 || code > 599) return -1;
    *status = code;
    if (code < 200 || code == 204 || code == 304) {
        *body_len = 0;
        return 0;
    }
    const char *cl = find_header(p, end, "Content-Length");
    if (!cl) return -1;
    char *stop;
    unsigned long long v = strtoull(cl, &stop, 10);
    if (stop == cl) return -1;
    *body_len = (size_t)v;
    return 0;
}
