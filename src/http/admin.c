/* SPDX-License-Identifier: Apache-2.0 */
/* The admin listener: see admin.h. A second evhttp on the same loop, with
 * no streams: every request is answered at once. */
#include "http/admin.h"
#include "http/http_reply.h"
#include "http/listener_pause.h"
#include "lib/carry.h"
#include "obs/probe.h"
#include "lib/log.h"
#include "obs/metrics.h"
#include "obs/stats.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Seconds an admin connection may stay idle or take to send a request. */
#define ADMIN_TIMEOUT 30

static struct evhttp *admin_http;
static int on_public;

static void reply(struct evhttp_request *req, int code, const char *reason,
                  const char *content_type, const char *body, size_t n)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-store");
    http_reply(req, code, reason, content_type, body, n);
}

static void reply_not_found(struct evhttp_request *req, const char *body)
{
    loop_stats.http_not_found++;
    reply(req, HTTP_NOTFOUND, "Not Found", "text/plain; charset=utf-8", body, strlen(body));
}

/* The n bytes of body as type, or a 500 when its formatter found the
 * buffer (cap bytes, named by what) too small and gave 0. */
static void reply_formatted(struct evhttp_request *req, const char *body, size_t n,
                            const char *type, const char *what, int cap)
{
    if (n == 0) {
        log_msg(LOG_ERROR, "the %s outgrew its %d-byte buffer", what, cap);
        static const char msg[] = "buffer too small";
        reply(req, HTTP_INTERNAL, "Internal Server Error", "text/plain; charset=utf-8", msg,
              sizeof msg - 1);
        return;
    }
    reply(req, HTTP_OK, "OK", type, body, n);
}

static void reply_stats(struct evhttp_request *req)
{
    static char json[STATS_JSON_MAX];         /* loop thread only */
    reply_formatted(req, json, stats_format_json(json, sizeof json), "application/json",
                    "/stats JSON (STATS_JSON_MAX)", STATS_JSON_MAX);
}

static void reply_metrics(struct evhttp_request *req)
{
    static char text[METRICS_MAX_BYTES];      /* loop thread only */
    reply_formatted(req, text, metrics_format(text, sizeof text), METRICS_CONTENT_TYPE,
                    "/metrics text (METRICS_MAX_BYTES)", METRICS_MAX_BYTES);
}

static void reply_probe(struct evhttp_request *req)
{
    if (!probe_enabled) {
        reply_not_found(req, "The latency probe is off: start the server with --probe-latency");
        return;
    }
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    char json[1024];
    size_t n = probe_format_json(json, sizeof json, query && strcmp(query, "reset=1") == 0);
    reply(req, HTTP_OK, "OK", "application/json", json, n);
}

int admin_route(struct evhttp_request *req, const char *path)
{
    if (strcmp(path, "/stats") == 0)
        reply_stats(req);
    else if (strcmp(path, "/metrics") == 0)
        reply_metrics(req);
    else if (strcmp(path, "/probe") == 0)
        reply_probe(req);
    else
        return 0;
    return 1;
}

int admin_on_public(void) { return on_public; }

static void on_admin_request(struct evhttp_request *req, void *arg)
{
    (void)arg;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
        loop_stats.http_bad_method++;
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
        static const char msg[] = "Only GET and HEAD are served";
        reply(req, 405, "Method Not Allowed", "text/plain; charset=utf-8", msg, sizeof msg - 1);
        return;
    }
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
    if (!path || !admin_route(req, path))
        reply_not_found(req, "The admin address serves /stats, /metrics and /probe");
}

/* accept() failed (descriptors ran out): pause rather than spin. */
static void on_accept_error(struct evconnlistener *listener, void *arg)
{
    (void)arg;
    static struct log_ratelimit rl;
    static const struct timeval pause = {1, 0};
    log_limited(&rl, LOG_ERROR, "admin listener: accept failed: %s", strerror(errno));
    listener_pause(listener, &pause);
}

/* A listening socket on host:port, or -1 with errno set. */
static int admin_socket(const char *host, uint16_t port)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (inet_pton(AF_INET, host, &sin.sin_addr) != 1) {
        errno = EINVAL;
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0)
        return -1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)&sin, sizeof sin) != 0 || listen(fd, 64) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

static struct evconnlistener *admin_listener;
/* A hot upgrade: the listening socket taken over, -1 none; whether the
 * running process had one at all (0: it ran without, as this one will). */
static int handed_fd = -1, handed = 0, handed_had = 0;

static int serve(struct event_base *base, int fd)
{
    admin_http = evhttp_new(base);
    if (!admin_http) {
        close(fd);
        log_msg(LOG_ERROR, "evhttp_new failed for the admin listener");
        return -1;
    }
    evhttp_set_allowed_methods(admin_http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                               EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                               EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
    evhttp_set_max_headers_size(admin_http, 8192);
    evhttp_set_max_body_size(admin_http, 8192);
    evhttp_set_timeout(admin_http, ADMIN_TIMEOUT);
    evhttp_set_gencb(admin_http, on_admin_request, NULL);
    struct evhttp_bound_socket *bound = evhttp_accept_socket_with_handle(admin_http, fd);
    if (!bound) {
        close(fd);
        log_msg(LOG_ERROR, "evhttp cannot take the admin listening socket");
        return -1;
    }
    admin_listener = evhttp_bound_socket_get_listener(bound);
    evconnlistener_set_error_cb(admin_listener, on_accept_error);
    return 0;
}

int admin_start(struct event_base *base, const struct admin_config *cfg)
{
    const char *host = cfg->host;
    unsigned port = cfg->port;
    if (port == 0) {
        log_msg(LOG_INFO, "no admin listener (--admin-listen \"\"): no /stats, /metrics, /probe");
        return 0;
    }
    if (port == cfg->listen_port && strcmp(host, cfg->listen_host) == 0) {
        on_public = 1;
        log_msg(LOG_INFO, "/stats, /metrics and /probe on the public address %s:%u "
                "(--admin-listen is --listen)", host, port);
        return 0;
    }
    if (handed) {
        int fd = handed_fd;
        handed_fd = -1;
        if (!handed_had)
            return 0;
        if (serve(base, fd) != 0)
            return 1;
        log_msg(LOG_INFO, "admin on http://%s:%u/metrics (also /stats, /probe)", host, port);
        return 0;
    }
    int fd = admin_socket(host, cfg->port);
    if (fd < 0 && errno == EADDRINUSE && !cfg->given) {
        log_msg(LOG_INFO, "admin address %s:%u is in use (another server on this host?): "
                "running without /stats, /metrics and /probe; give each server its own "
                "--admin-listen", host, port);
        return 0;
    }
    if (fd < 0) {
        log_msg(LOG_ERROR, "cannot listen on %s:%u for --admin-listen: %s (pick a free address, "
                "the --listen one to serve both there, or \"\" for none)", host, port,
                strerror(errno));
        return cfg->given ? 2 : 1;
    }
    if (serve(base, fd) != 0)
        return 1;
    log_msg(LOG_INFO, "admin on http://%s:%u/metrics (also /stats, /probe)", host, port);
    return 0;
}

void admin_pause(int paused) { listener_hold(admin_listener, paused); }

int admin_carry_export(struct carry_out *o)
{
    size_t at = carry_begin(o, ADMIN_CARRY_TAG, ADMIN_CARRY_VERSION);
    carry_u8(o, admin_listener != NULL);
    if (admin_listener)
        carry_u32(o, carry_fd(o, evconnlistener_get_fd(admin_listener)));
    carry_end(o, at);
    return o->failed ? -1 : 0;
}

int admin_carry_take(struct carry_in *rec, uint16_t version, const int *fds, uint32_t nfds)
{
    (void)version;                   /* 1: the only one yet */
    handed_had = carry_get_u8(rec);
    uint32_t i = handed_had ? carry_get_u32(rec) : 0;
    if (rec->failed || (handed_had && i >= nfds))
        return -1;
    handed = 1;
    handed_fd = handed_had ? fds[i] : -1;
    return 0;
}

void admin_stop(void)
{
    admin_listener = NULL;
    if (admin_http) {
        evhttp_free(admin_http);
        admin_http = NULL;
    }
}
