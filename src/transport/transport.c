/* SPDX-License-Identifier: Apache-2.0 */
/* Opening a stream: see transport.h. */
#include "transport/transport.h"
#include "core/presence.h"
#include "core/stream.h"
#include "core/topic_join.h"
#include "http/client_addr.h"
#include "http/http_guard.h"
#include "http/socket_export.h"

#include <event2/http.h>
#include <unistd.h>

struct stream *transport_reserve(struct evhttp_request *req, uint32_t uid, uint8_t framing,
                                 int keep_req)
{
    /* The stream's own descriptor first: without one there is no stream,
     * and the client is better told so (503) than welcomed and dropped. */
    int own = socket_export_reserve(evhttp_request_get_connection(req));
    if (own < 0)
        return NULL;
    /* The client's address only when Erlang is told of it (conn_up). */
    struct peer_addr peer;
    int told = presence_conns_on();
    if (told)
        client_addr_of(req, &peer);
    struct stream *s = stream_open_peer(uid, framing, keep_req ? req : NULL, own,
                                        told ? &peer : NULL);
    if (!s)
        close(own);
    else
        topic_stream_open(s);          /* the topics its request named */
    return s;
}

int transport_open(struct evhttp_request *req, uint32_t uid, const struct transport_opening *o)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct stream *s = transport_reserve(req, uid, o->framing, 0);
    if (!s)
        return -1;
    /* From here the request and its connection are gone. */
    http_guard_release(req);
    if (socket_export(evcon) != 0) {
        stream_release(s, 0);
        return 0;
    }
    struct iovec iov = {(void *)o->head, o->head_len};
    int r = o->idle ? stream_import_idle(s, o->idle) : stream_import(s);
    if (r == 0 && stream_send(s, &iov, 1, o->head_len) == 0 &&
        (!o->after_head || o->after_head(s) == 0) && topic_tell_open(s) == 0 && o->replay)
        stream_replay(s, o->since, o->budget);
    return 0;
}
