/* One connection of a shard's loop (loop.c opens and closes it). */
#ifndef WB_CONN_H
#define WB_CONN_H

#include <stdint.h>

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

#endif
