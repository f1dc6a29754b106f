/* SPDX-License-Identifier: Apache-2.0 */
/* Command-line parsing: one row an option in `rows` below, which also
 * makes --help and --list-options (docs/configuration.md's table, written
 * by scripts/check-docs.py --fix). Every bad value is one clear line and
 * exit 2. */
#include "options.h"
#include "erl/erl_cookie.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum kind {
    U32,        /* a number in [lo, hi] into a uint32_t */
    U64,        /* the same into a uint64_t */
    TEXT,       /* a non-empty string into a char[size] */
    SET,        /* no argument: the int becomes 1 */
    CLEAR,      /* no argument: the int becomes 0 (it is 1 by default) */
    PARSE,      /* parse(o, arg): 0, -1 (bad: hint), -2 (said already) */
    HELP,       /* -h: --help, printed */
    LIST,       /* --list-options, printed */
    VERSION,    /* --version, printed */
};

struct row {
    const char *name;           /* "listen": --listen */
    char letter;                /* 'v': -v too; 0 for none */
    const char *arg;            /* "ADDR:PORT" as --help shows it; NULL: no argument */
    enum kind kind;
    size_t at, size;            /* the field: offsetof and sizeof in struct options */
    uint64_t lo, hi;            /* U32, U64: the bounds */
    int (*parse)(struct options *o, const char *arg);
    const char *def;            /* the default, read as the argument would be; NULL: none */
    const char *shown;          /* the default in words where def is not it; NULL: def */
    const char *hint;           /* a bad value's line: what was expected */
    const char *help;           /* --help and docs/configuration.md */
};

#define FIELD(f) .at = offsetof(struct options, f), .size = sizeof(((struct options *)0)->f)

static int parse_listen(struct options *o, const char *arg);
static int parse_admin(struct options *o, const char *arg);
static int parse_name(struct options *o, const char *arg);
static int parse_masters(struct options *o, const char *arg);
static int parse_cookie(struct options *o, const char *arg);
static int parse_origin(struct options *o, const char *arg);
static int parse_trusted(struct options *o, const char *arg);
static int parse_verbose(struct options *o, const char *arg);
static int parse_quiet(struct options *o, const char *arg);
static int parse_topic_auth(struct options *o, const char *arg);

/* Adding an option: its field in struct options (options.h), its row
 * here, and where server.c hands it to a layer's config. */
static const struct row rows[] = {
    {"listen", 0, "ADDR:PORT", PARSE, .parse = parse_listen, .def = "0.0.0.0:8000",
     .hint = "expected IPV4-ADDR:PORT, e.g. 0.0.0.0:8000", .help = "HTTP address"},
    {"admin-listen", 0, "ADDR:PORT", PARSE, .parse = parse_admin, .def = "127.0.0.1:8001",
     .hint = "expected IPV4-ADDR:PORT, e.g. 127.0.0.1:8001, or \"\" for none",
     .help = "private address for GET /stats, /metrics (Prometheus) and /probe; \"\" for none"},
    {"name", 0, "ALIVE@HOST", PARSE, .parse = parse_name, .def = "c1@localhost",
     .hint = "expected alive@host, e.g. c1@localhost", .help = "this C-node's name"},
    {"master", 0, "NODE@HOST[,NODE@HOST...]", PARSE, .parse = parse_masters,
     .def = "httpdmaster@localhost",
     .help = "Erlang node(s) to connect to and keep connected to, each on its own (at most 8; "
             "\"\" for none); each gets the hello and the presence messages"},
    {"cookie-file", 0, "FILE", TEXT, FIELD(cookie_file),
     .shown = "$ERLANG_COOKIE, then ~/.erlang.cookie, also mode 0600", .hint = "expected a path",
     .help = "read the Erlang cookie from FILE (mode 0600; one trailing newline removed)"},
    {"cookie", 0, "COOKIE", PARSE, .parse = parse_cookie,
     .help = "the cookie itself: visible to every user in ps, prefer --cookie-file"},
    {"erl-tick-seconds", 0, "S", U32, FIELD(erl_tick_seconds), 1, 3600, .def = "60",
     .shown = "60, Erlang's",
     .hint = "expected 1 to 3600 seconds (the masters' net_ticktime)",
     .help = "a master link that brings nothing, not even a tick, for S seconds (up to 1.25 S) "
             "is dropped and dialled again; set it to the masters' net_ticktime (1 to 3600)"},
    {"presence", 0, "NAME", TEXT, FIELD(presence), .hint = "expected a registered process name",
     .help = "send {httpdcnode, Node, hello, Info} and {httpdcnode, Node, "
             "up|down|snapshot|snapshot_more, Uids} to the process registered as NAME on each "
             "master"},
    {"presence-conns", 0, NULL, SET, FIELD(presence_conns), .shown = "off",
     .help = "to --presence also {httpdcnode, Node, conn_up, Uid, ConnId, Transport, Peer} when "
             "a stream opens and {httpdcnode, Node, conn_down, Uid, ConnId, Reason} when it ends "
             "(with --inbox, conn_down of a WebSocket to the inbox too)"},
    {"inbox", 0, "NAME", TEXT, FIELD(inbox), .hint = "expected a registered process name",
     .help = "send each message a client sends (a WebSocket message, a POST /send/N) as "
             "{httpdcnode_in, Node, Uid, ConnId, Data} to the process registered as NAME on one "
             "linked master (by uid); without it client messages are refused (counted)"},
    {"max-client-message", 0, "BYTES", U32, FIELD(max_client_message), 1, CLIENT_MESSAGE_LIMIT,
     .def = "4096", .hint = "expected 1..1048576",
     .help = "largest client message (past it a WebSocket is closed 1009, a POST gets 413)"},
    {"client-rate", 0, "MSGS", U32, FIELD(client_rate), 1, 100000, .def = "50",
     .hint = "expected 1..100000",
     .help = "client messages per second per connection (POST /send/N without ?conn=: per "
             "client address), with a burst of MSGS/4 + 8 (past it: close 1008, 429)"},
    {"ws-deflate", 0, NULL, SET, FIELD(ws_deflate), .shown = "off",
     .help = "compress WebSocket messages (permessage-deflate, RFC 7692) for clients that offer "
             "it, with no context takeover either way: a message is compressed once for all its "
             "receivers (64 bytes and up, when that makes it smaller)"},
    {"max-users", 0, "N", U32, FIELD(max_users), 1, 1u << 30, .def = "1114112",
     .hint = "expected 1 to 1073741824", .help = "uids 1..N; the table is N pointers"},
    {"max-message", 0, "BYTES", U32, FIELD(max_message), 1, MAX_MESSAGE_LIMIT, .def = "65536",
     .hint = "expected 1 to 8388608 bytes", .help = "largest message payload"},
    {"max-conns-per-uid", 0, "N", U32, FIELD(max_conns_per_uid), 1, 1024, .def = "8",
     .hint = "expected 1 to 1024", .help = "streams per uid; the oldest is ended"},
    {"max-backlog", 0, "BYTES", U32, FIELD(max_backlog), 1024, 1u << 30, .def = "1048576",
     .hint = "expected 1024 to 1073741824 bytes",
     .help = "unsent bytes a stream may hold before it is ended as a slow consumer"},
    {"max-backlog-total", 0, "BYTES", U64, FIELD(max_backlog_total), 1024, 1ull << 40,
     .def = "268435456", .hint = "expected 1024 to 2^40 bytes",
     .help = "unsent bytes of all streams together; past it the streams holding the most are "
             "ended"},
    {"max-input-total", 0, "BYTES", U64, FIELD(max_input_total), 65536, 1ull << 40,
     .def = "67108864", .hint = "expected 65536 to 2^40 bytes",
     .help = "bytes clients sent that are held until whole (requests being read, POST bodies "
             "above all; WebSocket messages in flight), all connections together; past it those "
             "holding the most are ended"},
    {"header-timeout", 0, "SECONDS", U32, FIELD(header_timeout), 1, 3600, .def = "10",
     .hint = "expected 1 to 3600 seconds",
     .help = "a request must be complete this long after its first byte, however slowly it "
             "trickles in"},
    {"keepalive", 0, "SECONDS", U32, FIELD(keepalive), 0, 32767, .def = "60",
     .hint = "expected 0 (off) to 32767 seconds",
     .help = "TCP keepalive: a peer silent this long is probed and dropped within about twice "
             "that (0 off)"},
    {"history", 0, "N", U32, FIELD(history), 0, 4096, .def = "32",
     .hint = "expected 0 (off) to 4096 messages",
     .help = "messages kept per uid for clients that come back (0: none)"},
    {"history-ttl", 0, "SECONDS", U32, FIELD(history_ttl), 1, 86400, .def = "120",
     .hint = "expected 1 to 86400 seconds", .help = "none kept longer"},
    {"history-bytes", 0, "BYTES", U64, FIELD(history_bytes), 65536, 1ull << 34, .def = "67108864",
     .hint = "expected 65536 to 2^34 bytes (16 GiB)",
     .help = "all kept messages together, at most 17179869184; the oldest go first"},
    {"history-file", 0, "FILE", TEXT, FIELD(history_file), .shown = "in memory only",
     .hint = "expected a path",
     .help = "keep ids and history in FILE (a tmpfs such as /dev/shm: mode 0600, locked while in "
             "use), so that a node restarted with the same --name after a crash keeps its epoch "
             "and ids and its clients resume with no gap; a damaged file, or another node's, is "
             "started afresh"},
    {"max-topics", 0, "N", U32, FIELD(max_topics), 0, 1u << 24, .def = "100000",
     .hint = "expected 0 (no topics) to 16777216",
     .help = "topics held at once (0: no topics); a topic no stream holds is kept --topic-history-ttl "
             "seconds for its resuming clients"},
    {"max-topics-per-stream", 0, "N", U32, FIELD(topics_per_stream), 1, 255, .def = "16",
     .hint = "expected 1 to 255", .help = "topics one stream may subscribe to (at most 255)"},
    {"max-streams-per-topic", 0, "N", U32, FIELD(streams_per_topic), 1, 1u << 30,
     .def = "1000000", .hint = "expected 1 to 1073741824",
     .help = "streams subscribed to one topic here"},
    {"topic-history", 0, "N", U32, FIELD(topic_history), 0, 4096, .shown = "--history's",
     .hint = "expected 0 (off) to 4096 messages",
     .help = "messages kept per topic for clients that come back (0: none)"},
    {"topic-history-bytes", 0, "BYTES", U64, FIELD(topic_history_bytes), 1024, 1ull << 34,
     .def = "1048576", .hint = "expected 1024 to 2^34 bytes (16 GiB)",
     .help = "one topic's kept messages together, each counted with its 32-byte header: past "
             "it that topic's oldest go, not other topics' or uids' (a larger message is not "
             "kept)"},
    {"topic-history-ttl", 0, "SECONDS", U32, FIELD(topic_history_ttl), 1, 86400,
     .shown = "--history-ttl's", .hint = "expected 1 to 86400 seconds",
     .help = "none of a topic's kept longer; a topic no stream holds is kept this long for its "
             "resuming clients"},
    {"topic-auth", 0, "MODE", PARSE, .parse = parse_topic_auth,
     .shown = "token with --auth-secret-file, else open",
     .hint = "expected open, token or handler",
     .help = "who may subscribe to what: open (any topic), token (the topics its subscriber "
             "token's claim lists), or handler (those, and what the --inbox handler's "
             "authorize_join allows)"},
    {"presence-topics", 0, NULL, SET, FIELD(presence_topics), .shown = "off",
     .help = "to --presence also who subscribes: each join and leave of a topic, with its uid "
             "and conn"},
    {"heartbeat", 0, "SECONDS", U32, FIELD(heartbeat), 0, 3600, .def = "25",
     .hint = "expected 0 (off) to 3600 seconds",
     .help = "a comment to every SSE stream (a ping to every WebSocket) this often, so that "
             "proxies keep it open (0 off)"},
    {"poll-timeout", 0, "SECONDS", U32, FIELD(poll_timeout), 1, 3600, .def = "25",
     .hint = "expected 1 to 3600 seconds",
     .help = "a long-poll with nothing new waits this long at most"},
    {"allow-origin", 0, "ORIGIN", PARSE, .parse = parse_origin,
     .hint = "expected * or scheme://host[:port], at most 16 of them",
     .help = "a web origin (scheme://host[:port]) whose pages may read streams cross-origin; "
             "repeatable, or * for any"},
    {"trusted-proxy", 0, "ADDR[/BITS][,...]", PARSE, .parse = parse_trusted,
     .help = "a reverse proxy (or network of them) whose X-Forwarded-For (else X-Real-IP) names "
             "the client: its address for the POST /send/N rate and conn_up's Peer; repeatable, "
             "at most 16; from any other peer those headers are ignored"},
    {"writers", 0, "N", U32, FIELD(writers), 1, 64, .shown = "the CPUs it may use, at most 4",
     .hint = "expected 1 to 64 threads",
     .help = "threads writing a large fan-out, the event loop included"},
    {"auth-secret-file", 0, "FILE", TEXT, FIELD(auth_secret_file), .hint = "expected a path",
     .help = "subscribers need a token signed with the secret in FILE (mode 600): a JWT (HS256, "
             "sub the uid) as token=JWT in the query or Authorization: Bearer JWT, or "
             "exp=EXP&sig=HMAC (docs/security.md)"},
    {"drain-seconds", 0, "SECONDS", U32, FIELD(drain_seconds), 0, 3600, .def = "10",
     .hint = "expected 0 (all at once) to 3600 seconds",
     .help = "on SIGTERM, end the streams spread over this long (at least 100 a second) so that "
             "their clients do not all come back at once (0: all at once)"},
    {"no-token-expiry", 0, NULL, CLEAR, FIELD(token_expiry),
     .help = "a stream opened with a token lives past the token's exp (by default it is ended "
             "then)"},
    {"takeover", 0, NULL, SET, FIELD(takeover),
     .help = "take over from the process running as this --name on this host, started with the "
             "same options: its listening sockets, streams (open, with what they had not written "
             "yet), history and Erlang links pass to this one, and it exits; no client is "
             "disconnected. Exits 1 when refused (the other one serves on). SIGUSR2 to a running "
             "server starts its binary so (systemctl reload)"},
    {"probe-latency", 0, NULL, SET, FIELD(probe_latency),
     .help = "for benchmarks: GET /probe on the admin address gives the age of messages whose "
             "payload starts with t=<ns since the epoch>; at each hop inside the server"},
    {"list-counters", 0, NULL, SET, FIELD(list_counters),
     .help = "print the name of every counter of GET /stats and every metric family of GET "
             "/metrics (with its reason labels), one a line, and exit"},
    {"list-options", 0, NULL, LIST,
     .help = "print every option, its default and its text, one a line (tab-separated), and "
             "exit"},
    {"verbose", 'v', NULL, PARSE, .parse = parse_verbose,
     .help = "log connections and Erlang traffic too"},
    {"quiet", 'q', NULL, PARSE, .parse = parse_quiet, .help = "log errors only"},
    {"help", 'h', NULL, HELP, .help = "this text"},
    {"version", 0, NULL, VERSION, .help = "print the version"},
};

#define NROWS (sizeof rows / sizeof rows[0])

/* ---------------------------------------------------------------- values */

/* CPUs this process may run on (taskset, cgroup cpusets), at least 1. */
static uint32_t usable_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 1;
    int n = CPU_COUNT(&set);
    return n < 1 ? 1 : (uint32_t)n;
}

static int bad(const char *what, const char *value, const char *hint)
{
    fprintf(stderr, "httpdcnode: bad --%s '%s': %s (see --help)\n", what, value, hint);
    return -2;
}

static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    errno = 0;
    if (*s < '0' || *s > '9')
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int copy_str(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (n >= size)
        return -1;
    memcpy(dst, src, n + 1);
    return 0;
}

/* IPV4-ADDR:PORT ("localhost" is 127.0.0.1) into host[64] and *port. */
static int parse_addr(const char *s, char host[64], uint16_t *port)
{
    const char *colon = strrchr(s, ':');
    uint64_t p;
    if (!colon || colon == s || (size_t)(colon - s) >= 64 || parse_u64(colon + 1, 1, 65535, &p))
        return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    if (strcmp(host, "localhost") == 0)
        strcpy(host, "127.0.0.1");
    struct in_addr addr;
    if (inet_pton(AF_INET, host, &addr) != 1)
        return -1;
    *port = (uint16_t)p;
    return 0;
}

static int parse_listen(struct options *o, const char *arg)
{
    return parse_addr(arg, o->listen_host, &o->listen_port);
}

/* "" for none; given on the command line, a port in use is an error. */
static int parse_admin(struct options *o, const char *arg)
{
    o->admin_explicit = 1;
    o->admin_port = 0;
    return *arg ? parse_addr(arg, o->admin_host, &o->admin_port) : 0;
}

/* alive@host, both parts non-empty, host without further '@'. */
static int valid_node_name(const char *s)
{
    const char *at = strchr(s, '@');
    return at && at != s && at[1] && !strchr(at + 1, '@') && strlen(s) < 256;
}

static int parse_name(struct options *o, const char *arg)
{
    return valid_node_name(arg) ? copy_str(o->name, sizeof o->name, arg) : -1;
}

/* --master: "" (none) or node@host[,node@host...], each once, at most
 * MASTERS_MAX. */
static int parse_masters(struct options *o, const char *arg)
{
    char name[256];
    o->n_masters = 0;
    for (const char *p = arg; *arg;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len >= sizeof name)
            return bad("master", arg, "a node name is longer than 255 characters");
        memcpy(name, p, len);
        name[len] = '\0';
        if (!valid_node_name(name))
            return bad("master", arg, "expected node@host[,node@host...], or \"\" for none");
        if (o->n_masters == MASTERS_MAX)
            return bad("master", arg, "more than 8 masters");
        for (uint32_t i = 0; i < o->n_masters; i++)
            if (strcmp(o->masters[i], name) == 0)
                return bad("master", arg, "a master is named twice");
        strcpy(o->masters[o->n_masters++], name);
        if (!end)
            break;
        p = end + 1;
    }
    return 0;
}

/* The cookie is never printed, not even when it is bad. */
static int parse_cookie(struct options *o, const char *arg)
{
    if (!*arg || copy_str(o->cookie, sizeof o->cookie, arg))
        return bad("cookie", "(hidden)", "expected 1 to 255 characters");
    o->cookie_in_argv = 1;
    return 0;
}

/* "*", or scheme://host[:port] with no path, as browsers send Origin. */
static int valid_origin(const char *s)
{
    if (strcmp(s, "*") == 0)
        return 1;
    const char *sep = strstr(s, "://");
    if (!sep || sep == s || !sep[3])
        return 0;
    for (const char *p = sep + 3; *p; p++)
        if (*p == '/' || *p == ' ' || *p == ',' || (unsigned char)*p < 0x21)
            return 0;
    return 1;
}

static int parse_origin(struct options *o, const char *arg)
{
    if (o->n_allow_origin == ALLOW_ORIGIN_MAX || !valid_origin(arg) ||
        copy_str(o->allow_origin[o->n_allow_origin], sizeof o->allow_origin[0], arg))
        return -1;
    o->n_allow_origin++;
    return 0;
}

/* --trusted-proxy: ADDR[/BITS][,ADDR[/BITS]...], added to those before. */
static int parse_trusted(struct options *o, const char *arg)
{
    char one[64];
    for (const char *p = arg;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len >= sizeof one)
            return bad("trusted-proxy", arg, "an address is too long");
        memcpy(one, p, len);
        one[len] = '\0';
        if (o->n_trusted_proxy == TRUSTED_PROXY_MAX)
            return bad("trusted-proxy", arg, "more than 16 addresses");
        if (peer_net_parse(one, &o->trusted_proxy[o->n_trusted_proxy]) != 0)
            return bad("trusted-proxy", arg,
                       "expected an IPv4 or IPv6 address, or a network ADDR/BITS, e.g. 127.0.0.1 "
                       "or 10.0.0.0/8");
        o->n_trusted_proxy++;
        if (!end)
            return 0;
        p = end + 1;
    }
}

static int parse_topic_auth(struct options *o, const char *arg)
{
    static const char *const modes[] = {"open", "token", "handler"};
    for (int i = 0; i < 3; i++)
        if (strcmp(arg, modes[i]) == 0) {
            o->topic_auth = i;
            return 0;
        }
    return -1;
}

static int parse_verbose(struct options *o, const char *arg)
{
    (void)arg;
    o->verbosity = 2;
    return 0;
}

static int parse_quiet(struct options *o, const char *arg)
{
    (void)arg;
    o->verbosity = 0;
    return 0;
}

/* One row's argument into its field: 0, -1 (bad, the row's hint says
 * why), -2 (the parser said why). */
static int apply(struct options *o, const struct row *r, const char *arg)
{
    char *field = (char *)o + r->at;
    uint64_t v;
    switch (r->kind) {
    case U32:
        if (parse_u64(arg, r->lo, r->hi, &v))
            return -1;
        *(uint32_t *)(void *)field = (uint32_t)v;
        return 0;
    case U64:
        if (parse_u64(arg, r->lo, r->hi, &v))
            return -1;
        *(uint64_t *)(void *)field = v;
        return 0;
    case TEXT:
        return !*arg ? -1 : copy_str(field, r->size, arg);
    case SET: *(int *)(void *)field = 1; return 0;
    case CLEAR: *(int *)(void *)field = 0; return 0;
    case PARSE: return r->parse(o, arg);
    default: return 0;
    }
}

void options_defaults(struct options *o)
{
    memset(o, 0, sizeof *o);
    for (size_t i = 0; i < NROWS; i++) {
        if (rows[i].kind == CLEAR)
            *(int *)(void *)((char *)o + rows[i].at) = 1;
        else if (rows[i].def && apply(o, &rows[i], rows[i].def) != 0)
            abort();            /* a row's default it refuses: a bug in the table */
    }
    o->admin_explicit = 0;      /* the default is not given on the command line */
    o->topic_history = UINT32_MAX;      /* --history's unless given */
    o->topic_history_ttl = UINT32_MAX;  /* --history-ttl's unless given */
    o->topic_auth = -1;                 /* token with --auth-secret-file, else open */
    o->verbosity = 1;
    o->writers = usable_cpus();
    if (o->writers > 4)
        o->writers = 4;
}

/* ---------------------------------------------------------------- help */

#define HELP_INDENT 27
#define HELP_WIDTH 79

/* "--name ARG", "-v, --verbose" */
static int row_head(const struct row *r, char *out, size_t size)
{
    char letter[5] = "";
    if (r->letter)
        snprintf(letter, sizeof letter, "-%c, ", r->letter);
    return snprintf(out, size, "%s--%s%s%s", letter, r->name, r->arg ? " " : "",
                    r->arg ? r->arg : "");
}

/* The row's text and its default, as one line. */
static void row_text(const struct row *r, char *out, size_t size)
{
    const char *d = r->shown ? r->shown : r->def;
    if (d && r->kind != SET && r->kind != CLEAR)
        snprintf(out, size, "%s (default %s)", r->help, *d ? d : "\"\"");
    else if (d)
        snprintf(out, size, "%s; %s by default", r->help, d);
    else
        snprintf(out, size, "%s", r->help);
}

/* text wrapped at HELP_WIDTH, starting at column col, the rest of its
 * lines at HELP_INDENT. */
static void wrap(FILE *f, const char *text, int col)
{
    const char *p = text;
    while (*p) {
        size_t room = col < HELP_WIDTH - 20 ? (size_t)(HELP_WIDTH - col) : 20;
        size_t n = strlen(p);
        if (n > room) {
            n = room;
            while (n > 0 && p[n] != ' ')
                n--;
            if (n == 0)                 /* one long word: up to the next space */
                n = strcspn(p, " ");
        }
        fprintf(f, "%.*s\n", (int)n, p);
        p += n;
        while (*p == ' ')
            p++;
        if (*p)
            fprintf(f, "%*s", HELP_INDENT, "");
        col = HELP_INDENT;
    }
}

static void print_help(FILE *f)
{
    fputs("Usage: httpdcnode [options]\n"
          "Comet push server: holds streaming HTTP connections (GET /test/UID) and\n"
          "writes to them what Erlang nodes send to its C-node.\n\n", f);
    for (size_t i = 0; i < NROWS; i++) {
        char head[128], text[1024];
        row_head(&rows[i], head, sizeof head);
        row_text(&rows[i], text, sizeof text);
        int n = fprintf(f, "  %s", head);
        if (n < HELP_INDENT - 1)
            n += fprintf(f, "%*s", HELP_INDENT - n, "");
        else
            n += fprintf(f, "  ");
        wrap(f, text, n);
    }
}

/* --list-options: "--name ARG<TAB>default<TAB>text", one row a line. */
static void print_list(FILE *f)
{
    for (size_t i = 0; i < NROWS; i++) {
        const struct row *r = &rows[i];
        char head[128];
        const char *d = r->shown ? r->shown : r->def;
        row_head(r, head, sizeof head);
        fprintf(f, "%s\t%s\t%s\n", head, d ? (*d ? d : "\"\"") : "",
                r->help);
    }
}

/* ---------------------------------------------------------------- parse */

/* --cookie or --cookie-file (not both), else $ERLANG_COOKIE or ~/.erlang.cookie. */
static int take_cookie(struct options *o)
{
    if (o->cookie_file[0] && o->cookie_in_argv) {
        fprintf(stderr, "httpdcnode: give --cookie or --cookie-file, not both\n");
        return -1;
    }
    if (o->cookie_file[0])
        return erl_cookie_read_file(o->cookie_file, o->cookie, sizeof o->cookie);
    if (o->cookie_in_argv)
        return 0;
    return erl_cookie_find(o->cookie, sizeof o->cookie);
}

int options_parse(struct options *o, int argc, char **argv)
{
    struct option longs[NROWS + 1];
    char shorts[2 * NROWS + 1];
    size_t ns = 0;
    for (size_t i = 0; i < NROWS; i++) {
        longs[i] = (struct option){rows[i].name, rows[i].arg ? required_argument : no_argument,
                                   NULL, (int)(256 + i)};
        if (rows[i].letter)
            shorts[ns++] = rows[i].letter;
    }
    longs[NROWS] = (struct option){0};
    shorts[ns] = '\0';

    options_defaults(o);
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
        const struct row *r = NULL;
        for (size_t i = 0; i < NROWS && !r; i++)
            if (c == (int)(256 + i) || (rows[i].letter && c == rows[i].letter))
                r = &rows[i];
        if (!r) {
            fprintf(stderr, "httpdcnode: unknown or incomplete option '%s' (see --help)\n",
                    argv[optind - 1]);
            return -1;
        }
        switch (r->kind) {
        case HELP: print_help(stdout); return 1;
        case LIST: print_list(stdout); return 1;
        case VERSION: printf("httpdcnode %s\n", HTTPDCNODE_VERSION); return 1;
        default: break;
        }
        int e = apply(o, r, optarg ? optarg : "");
        if (e == -1)
            bad(r->name, optarg, r->hint ? r->hint : "see --help");
        if (e != 0)
            return -1;
    }
    if (optind < argc) {
        fprintf(stderr, "httpdcnode: unexpected argument '%s' (see --help)\n", argv[optind]);
        return -1;
    }
    if (o->list_counters)
        return 0;
    if (o->max_backlog < o->max_message + 32) {
        fprintf(stderr, "httpdcnode: --max-backlog must hold at least one message "
                        "(--max-message + 32 bytes)\n");
        return -1;
    }
    if (o->presence_conns && !o->presence[0] && !o->inbox[0]) {
        fprintf(stderr, "httpdcnode: --presence-conns needs --presence or --inbox\n");
        return -1;
    }
    if (o->presence_topics && !o->presence[0]) {
        fprintf(stderr, "httpdcnode: --presence-topics needs --presence\n");
        return -1;
    }
    if (o->topic_history == UINT32_MAX)
        o->topic_history = o->history;
    if (o->topic_history_ttl == UINT32_MAX)
        o->topic_history_ttl = o->history_ttl;
    if (o->topic_auth < 0)
        o->topic_auth = o->auth_secret_file[0] ? 1 : 0;
    if (o->topic_auth == 1 && !o->auth_secret_file[0]) {
        fprintf(stderr, "httpdcnode: --topic-auth token needs --auth-secret-file (the "
                        "tokens that list the topics)\n");
        return -1;
    }
    if (o->topic_auth == 2 && !o->inbox[0]) {
        fprintf(stderr, "httpdcnode: --topic-auth handler needs --inbox (the process whose "
                        "handler decides)\n");
        return -1;
    }
    return take_cookie(o);
}
