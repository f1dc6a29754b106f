/* SPDX-License-Identifier: Apache-2.0 */
/* Request routing and error replies. Streams start in the transports,
 * which register their routes here (http_front_route). */
#include "http/http_front.h"
#include "http/listener_pause.h"
#include "lib/carry.h"
#include "http/admin.h"
#include "http/auth_http.h"
#include "http/client_addr.h"
#include "http/client_post.h"
#include "http/cors.h"
#include "core/drain.h"
#include "http/http_framing.h"
#include "http/http_guard.h"
#include "http/http_reply.h"
#include "lib/log.h"
#include "obs/stats.h"
#include "http/socket_export.h"
#include "http/uid.h"
#include "http/web.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* Descriptors kept free for the detach dup, Erlang links and log files. */
#define FD_RESERVE 32
/* Seconds a connection may sit idle between requests, or writing a reply. */
#define IDLE_TIMEOUT 30

static struct evhttp *http;
static uint32_t max_users;      /* --max-users */
static int fd_limit;            /* RLIMIT_NOFILE */
static int fd_ceiling;          /* accepted sockets at or above this get 503 */
static int spare_fd = -1;       /* released to accept-and-refuse when fds run out */
static struct evconnlistener *public_listener;
static int handed_fd = -1;      /* a hot upgrade: the listening socket taken over */

static int request_fd(struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    return bufferevent_getfd(evhttp_connection_get_bufferevent(evcon));
}

static void refuse_no_fds(struct evhttp_request *req)
{
    loop_stats.http_no_fds++;
    evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
    http_reply_text(req, HTTP_SERVUNAVAIL, "Service Unavailable",
               "Server is at its connection limit, try again later");
}

/* A node being drained sends its clients elsewhere (docs/operations.md, "Draining"). */
static void refuse_draining(struct evhttp_request *req)
{
    loop_stats.http_draining++;
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Connection", "close");
    evhttp_add_header(h, "Retry-After", "5");
    http_reply_text(req, HTTP_SERVUNAVAIL, "Service Unavailable",
               "This node is draining, connect to another one");
}

static struct route {
    const char *prefix;
    size_t len;
    http_stream_start_fn start;
    int cors;
} routes[HTTP_FRONT_ROUTES];
static int n_routes;

int http_front_route(const char *prefix, http_stream_start_fn start, int cors)
{
    if (n_routes == HTTP_FRONT_ROUTES)
        return -1;
    routes[n_routes++] = (struct route){prefix, strlen(prefix), start, cors};
    return 0;
}

static const struct route *route_of(const char *path)
{
    for (int i = 0; path && i < n_routes; i++)
        if (strncmp(path, routes[i].prefix, routes[i].len) == 0)
            return &routes[i];
    return NULL;
}

static void serve_stream(struct evhttp_request *req, const char *uid_text, http_stream_start_fn start)
{
    uint32_t uid;
    char body[64];

    if (drain_refusing()) {
        refuse_draining(req);
        return;
    }
    switch (uid_parse(uid_text, max_users, &uid)) {
    case UID_INVALID:
        loop_stats.http_not_found++;
        http_reply_text(req, HTTP_NOTFOUND, "Not Found", "User id not found, try /test/123 instead");
        return;
    case UID_TOO_BIG:
        loop_stats.http_too_big++;
        snprintf(body, sizeof body, "Max uid allowed is %u", max_users);
        http_reply_text(req, HTTP_SERVUNAVAIL, "Service Unavailable", body);
        return;
    case UID_OK:
        break;
    }
    if (!auth_admit(req, uid))
        return;
    if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                          "text/html; charset=utf-8");
        evhttp_send_reply(req, HTTP_OK, "OK", NULL);
        return;
    }
    if (request_fd(req) >= fd_ceiling) {
        refuse_no_fds(req);
        return;
    }
    if (start(req, uid) != 0)
        refuse_no_fds(req);
}

static void on_request(struct evhttp_request *req, void *arg)
{
    (void)arg;
    http_guard_request_done(req);
    if (!http_framing_ok(req))
        return;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
    if (path && strncmp(path, CLIENT_POST_PREFIX, sizeof CLIENT_POST_PREFIX - 1) == 0) {
        client_post_serve(req, path + sizeof CLIENT_POST_PREFIX - 1);   /* POST, OPTIONS */
        return;
    }
    const struct route *r = route_of(path);
    if (cmd == EVHTTP_REQ_OPTIONS && r && r->cors) {
        cors_preflight(req);
        return;
    }
    if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
        loop_stats.http_bad_method++;
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
        http_reply_text(req, 405, "Method Not Allowed", "Only GET and HEAD are served");
        return;
    }
    if (r) {
        serve_stream(req, path + r->len, r->start);
    } else if (path && admin_on_public() && admin_route(req, path)) {
        return;              /* --admin-listen is --listen: /stats, /metrics, /probe here */
    } else if (path && web_serve(req, path)) {
        /* answered: the demo page or the browser client (web.c) */
    } else {
        loop_stats.http_not_found++;
        http_reply_text(req, HTTP_NOTFOUND, "Not Found", "User id not found, try /test/123 instead");
    }
}

/* accept() failed. On EMFILE/ENFILE, free the spare descriptor to accept
 * one connection and refuse it, then stop listening for a moment: the
 * listener must not spin on connections it cannot take (and the spare may
 * be lost to the C-node thread taking the number meanwhile). */
static void on_accept_error(struct evconnlistener *listener, void *arg)
{
    (void)arg;
    static struct log_ratelimit rl;
    int err = errno;
    if (err != EMFILE && err != ENFILE) {
        log_limited(&rl, LOG_ERROR, "accept failed: %s", strerror(err));
        return;
    }
    static const char refusal[] =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
        "Content-Length: 50\r\nConnection: close\r\n\r\n"
        "Server is at its connection limit, try again later";
    if (spare_fd >= 0) {
        close(spare_fd);
        int fd = accept4(evconnlistener_get_fd(listener), NULL, NULL, SOCK_NONBLOCK);
        if (fd >= 0) {
            (void)!send(fd, refusal, sizeof refusal - 1, MSG_NOSIGNAL);
            close(fd);
            loop_stats.http_no_fds++;
        }
        spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    static const struct timeval pause = {0, 100 * 1000};
    listener_pause(listener, &pause);
    log_limited(&rl, LOG_ERROR, "out of file descriptors: refusing new connections "
                "(raise ulimit -n)");
}

static int set_fd_ceiling(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        log_msg(LOG_ERROR, "getrlimit(RLIMIT_NOFILE): %m");
        return -1;
    }
    /* Use the hard limit: every stream is a descriptor. */
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur <= FD_RESERVE * 2) {
        log_msg(LOG_ERROR, "open-files limit %lu is too low; raise it with ulimit -n",
                (unsigned long)rl.rlim_cur);
        return -1;
    }
    fd_limit = rl.rlim_cur > 0x7fffffff ? 0x7fffffff : (int)rl.rlim_cur;
    fd_ceiling = fd_limit - FD_RESERVE;
    log_msg(LOG_DEBUG, "open-files limit %lu: up to ~%d streams", (unsigned long)rl.rlim_cur,
            fd_ceiling);
    return 0;
}

/* TCP keepalive on the listening socket, which accepted sockets inherit
 * (no syscall per connection): a peer that vanished without FIN or RST
 * (lost coverage, a NAT that forgot) is probed after idle seconds and
 * dropped about idle seconds later; unacknowledged data ends it as soon. */
static int set_keepalive(int fd, unsigned idle)
{
    int on = idle > 0, cnt = 4, intvl = idle / 4 > 0 ? (int)idle / 4 : 1;
    int secs = (int)idle, user_ms = (int)idle * 2000;
    if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) != 0)
        return -1;
    if (!on)
        return 0;
    if (setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &secs, sizeof secs) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms, sizeof user_ms) != 0)
        return -1;
    return 0;
}

/* Our own listening socket, for a deep accept queue: connect bursts of
 * thousands a second would overflow evhttp's default backlog of 128. */
static int listen_socket(const char *host, uint16_t port, unsigned keepalive)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (inet_pton(AF_INET, host, &sin.sin_addr) != 1) {
        log_msg(LOG_ERROR, "--listen address '%s' is not an IPv4 address", host);
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        set_keepalive(fd, keepalive) != 0 || bind(fd, (struct sockaddr *)&sin, sizeof sin) != 0 ||
        listen(fd, SOMAXCONN) != 0) {
        log_msg(LOG_ERROR, "cannot listen on %s:%u: %m (port in use? pick another with --listen)",
                host, port);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

int http_front_start(struct event_base *base, const struct http_config *cfg)
{
    max_users = cfg->max_users;
    cors_configure(&cfg->origins);
    client_addr_configure(cfg->trusted, cfg->n_trusted);
    if (set_fd_ceiling() != 0 || socket_export_init() != 0)
        return -1;
    if (web_configure(cfg->node) != 0) {
        log_msg(LOG_ERROR, "cannot build the demo page: out of memory");
        return -1;
    }
    spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    http = evhttp_new(base);
    if (!http) {
        log_msg(LOG_ERROR, "evhttp_new failed");
        return -1;
    }
    /* Every method is parsed so that we can answer 405 (evhttp says 501). */
    evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                         EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                         EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
                                         EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
    evhttp_set_max_headers_size(http, 8192);
    /* Bodies: 8 KB, more for POST /send/N with a larger --max-client-message. */
    size_t max_body = client_post_configure(http, cfg);
    evhttp_set_timeout(http, IDLE_TIMEOUT);
    if (http_guard_init(http, base, cfg->header_timeout, IDLE_TIMEOUT, fd_limit, max_body) != 0)
        return -1;
    evhttp_set_gencb(http, on_request, NULL);

    int fd = handed_fd >= 0 ? handed_fd
                            : listen_socket(cfg->listen_host, cfg->listen_port, cfg->keepalive);
    handed_fd = -1;
    if (fd < 0)
        return -1;
    struct evhttp_bound_socket *bound = evhttp_accept_socket_with_handle(http, fd);
    if (!bound) {
        log_msg(LOG_ERROR, "evhttp cannot take the listening socket");
        return -1;
    }
    public_listener = evhttp_bound_socket_get_listener(bound);
    evconnlistener_set_error_cb(public_listener, on_accept_error);
    log_msg(LOG_INFO, "listening on http://%s:%u/test/UID", cfg->listen_host,
            cfg->listen_port);
    return 0;
}

void http_front_pause(int paused) { listener_hold(public_listener, paused); }

int http_front_carry_export(struct carry_out *o)
{
    size_t at = carry_begin(o, HTTP_FRONT_CARRY_TAG, HTTP_FRONT_CARRY_VERSION);
    carry_u32(o, carry_fd(o, evconnlistener_get_fd(public_listener)));
    carry_end(o, at);
    return o->failed ? -1 : 0;
}

int http_front_carry_take(struct carry_in *rec, uint16_t version, const int *fds, uint32_t nfds)
{
    (void)version;                   /* 1: the only one yet */
    uint32_t i = carry_get_u32(rec);
    if (rec->failed || i >= nfds)
        return -1;
    handed_fd = fds[i];
    return 0;
}

void http_front_stop(void)
{
    public_listener = NULL;
    if (http) {
        evhttp_free(http);
        http = NULL;
        http_guard_free();
        socket_export_free();
        web_free();
    }
}
