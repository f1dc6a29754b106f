/* SPDX-License-Identifier: Apache-2.0 */
/* Command line parsing and the request template. */
#include "options.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "conn-t.h"
#include "ws_parser.h"

static const char *const k_protos[] = {"chunked", "sse", "ws", "poll"};
static const char *const k_default_paths[] = {"/test/%d", "/sse/%d", "/ws/%d", "/poll/%d"};

const char *opts_proto_name(enum client_proto p)
{
    return k_protos[p];
}

void opts_usage(FILE *out)
{
    fprintf(out,
"Usage: httpclient [options]\n"
"Opens many streaming HTTP connections (GET PATH, chunked response) to a comet\n"
"server, counts what arrives and measures message latency. With --proto, the\n"
"streams are Server-Sent Events, WebSockets or long-polls instead, and the\n"
"message ids of each are checked.\n"
"\n"
"      --proto P        chunked (default): GET /test/N, one chunk per message;\n"
"                       sse: GET /sse/N, text/event-stream, one event each;\n"
"                       ws: GET /ws/N, WebSocket, subprotocol ws+meta.httpdcnode;\n"
"                       poll: GET /poll/N?since=ID in a loop, JSON answers\n"
"  -n, --conns N        connections to open (default 1000)\n"
"      --host HOST      server address (default 127.0.0.1)\n"
"  -p, --port PORT      server port (default 8000)\n"
"      --path TEMPLATE  request path, %%d is the uid (default /test/%%d, or\n"
"                       /sse/%%d, /ws/%%d, /poll/%%d as --proto says)\n"
"      --uid-base U     uid of the first connection (default 1)\n"
"      --uids K         wrap uids over K values, so several connections share a\n"
"                       uid (default: every connection its own uid)\n"
"  -P, --procs P        worker processes (default: as few as the limit of\n"
"                       %d sockets per process allows)\n"
"      --src A[-B][,..] local IPv4 source addresses, bound before connect, used\n"
"                       in turn (e.g. 127.0.0.1-127.0.0.20): each address gives\n"
"                       one local port range of connections to one server\n"
"  -r, --rate R         connections opened per second, all processes together\n"
"                       (default 0: no limit)\n"
"      --pending N      at most N connections connecting or awaiting their first\n"
"                       chunk at once, all processes together (default 100)\n"
"      --timeout S      a connection not welcomed within S seconds fails (default 10)\n"
"      --hold S         stay connected S seconds after all are up (default 0, or\n"
"                       until --until-msgs when that is given)\n"
"      --until-msgs K   stop once K messages arrived in total\n"
"      --max-time S     hard bound on the whole run (default 60 + hold + conns/rate)\n"
"  -H, --header 'K: V'  extra request header (repeatable)\n"
"      --churn R        once a worker's connections are up: R disconnects per\n"
"                       second, all processes together, each connection in turn,\n"
"                       each reconnected at once with its uid; one that failed\n"
"                       or was closed is opened again in its turn (default 0)\n"
"      --churn-reset P  P%% of those disconnects are resets (SO_LINGER 0: RST),\n"
"                       the others clean closes (default 50)\n"
"      --reconnect-after K  drop each connection once, after its first K\n"
"                       messages, and reconnect it resuming from the last id\n"
"                       (sse: Last-Event-ID; ws, poll: ?since=)\n"
"      --reconnect-on-signal  with --reconnect-after: the dropped connections\n"
"                       wait for SIGUSR1 (to this process) before reconnecting;\n"
"                       resume_s is then the time from the signal to the last\n"
"                       message\n"
"      --reconnect-lost MS  a stream that ends (the server closed or reset\n"
"                       it) and a connection that fails are opened again\n"
"                       after a random wait in [0, min(--reconnect-cap,\n"
"                       MS * 2^n)], n the failures in a row (full jitter, as\n"
"                       the browser client), resuming from the last id; not\n"
"                       bound by --pending: all come back as they would\n"
"      --reconnect-cap MS  the longest of those waits (default 20000)\n"
"      --topics T       sse, ws, chunked: each stream subscribes to topics of\n"
"                       t:0 .. t:T-1 (?topics=), as --topics-per-conn says;\n"
"                       sse, ws: their messages' ids (t:N@EPOCH:SEQ) are checked\n"
"                       per topic, and a reconnection resumes each from its last\n"
"                       id (chunked: the messages come as any, with no id)\n"
"      --topics-per-conn K  topics of each stream: connection g takes\n"
"                       t:((g * K + j) mod T) for j < K, so each topic has\n"
"                       conns * K / T streams (default 1; at most 255, the\n"
"                       server's --max-topics-per-stream must allow it)\n"
"      --send-rate R    ws: once a worker's streams are up, send R messages a\n"
"                       second up to the server, all processes together, each\n"
"                       stream in turn: masked text frames \"q=SEQ;t=NS;\", SEQ\n"
"                       counting each stream's messages from 0, NS the send\n"
"                       time (ns since the epoch); up_sent counts them,\n"
"                       up_blocked those a full socket buffer refused (not sent)\n"
"      --request-rate R ws: R more a second, \"r=SEQ;t=NS;\" (the same SEQ), that\n"
"                       the server's inbox answers to the one stream with an\n"
"                       \"event: conn\" frame whose body starts \"t=NS;\": its\n"
"                       round trip (rtt_p50_us, rtt_p99_us; replies counts them)\n"
"      --no-read        stop reading each stream after its welcome: a client\n"
"                       that never reads, for the server's --max-backlog\n"
"      --read-on-signal with --no-read: every stream starts reading once\n"
"                       SIGUSR1 (to this process) came, and reads on: what\n"
"                       the server held meanwhile is checked as it comes\n"
"      --json           print the summary as one JSON line on stdout\n"
"      --record FILE    append a line for each message received, \"m UID\n"
"                       EPOCH:SEQ N\" (N from \"n=N;\" after the stamp, -1\n"
"                       without), and for each gap told, \"g UID\"; a\n"
"                       connection's lines keep their order (a checker compares\n"
"                       them with what was sent: scripts/cluster-sim.sh)\n"
"      --hist-out FILE  each second, the latency histogram so far to FILE\n"
"                       (replaced whole): a line \"HIGH_US COUNT\" per bucket\n"
"                       that holds samples, then \"max US\"; several clients'\n"
"                       files add up to the histogram of all\n"
"  -q, --quiet          no progress lines on stderr\n"
"  -h, --help           this help\n"
"\n"
"Counts: connected (TCP), welcomed (first chunk received), failed (connect\n"
"error, non-200, closed or timed out before the first chunk), closed by server,\n"
"chunks, bytes. Every chunk after the first is a message; a message starting\n"
"with \"t=<ns since the epoch>;\" gives a latency sample (now - t, us, log-linear\n"
"histogram, ~1.6%% precision, 1 us..10 s). msgs/s is counted from the first to\n"
"the last message. The progress line (each second, on stderr) ends with the\n"
"latency so far (p50, p99, max) and last_msg_ms, when the last message came\n"
"(ms since the epoch). With --churn, connected and welcomed include the\n"
"reconnections; churn_closed counts the disconnects, churn_reset those that\n"
"were resets. A reconnection (--churn, --reconnect-after, --reconnect-lost)\n"
"resumes from the last id seen, as a browser does. With --reconnect-lost,\n"
"retries counts the waits begun, up the streams welcomed and not lost since\n"
"(a poll loop is up from its first answer's head until it is lost).\n"
"\n"
"The welcome: chunked, the first chunk; sse, the first event block (the\n"
"server's \"retry:\"); ws, the 101 answer; poll, the first answer's head.\n"
"Ids (sse, ws, poll) are checked per connection, a poll loop being one:\n"
"each must be the previous + 1 in its epoch unless a gap was reported\n"
"before it (gaps); id_errors counts ids missing without a gap, another\n"
"epoch without a gap, and messages without a readable id; dup counts ids\n"
"not after the previous one (a message seen twice). polls counts answers.\n"
"ws answers each ping with a masked pong of its payload (pongs) and the\n"
"server's close with a close; its gap frame (\"event: gap\") counts in gaps.\n"
"\n"
"Cost: one connection takes %s\n"
"(a 224-byte record: a 128-byte libevent event, the parsers and the last id;\n"
"and libevent's per-fd entry; reads go through one shared buffer per process,\n"
"ws frame headers through one wslay context per process),\n"
"plus the kernel's socket memory. With many TIME_WAIT sockets left from\n"
"earlier runs, spread connections over --src addresses to keep connect() fast.\n"
"\n"
"Exit status: 0 done, 2 bad option or plan, 3 ended by --max-time, 1 error.\n",
            CONN_MAX_PER_PROC, CONN_COST_TEXT);
}

static int bad(const char *opt, const char *val, const char *why)
{
    fprintf(stderr, "httpclient: bad %s '%s': %s\n", opt, val, why);
    return -1;
}

static int parse_ulong(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
    char *end;
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_seconds(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < 0 || v > 86400.0 * 365)
        return -1;
    *out = v;
    return 0;
}

/* Adds "A" or "A-B" (IPv4, A <= B) to o->src. */
static int add_src_range(struct client_opts *o, const char *item)
{
    char lo[64], hi[64];
    const char *dash = strchr(item, '-');
    size_t l = dash ? (size_t)(dash - item) : strlen(item);
    if (l == 0 || l >= sizeof lo)
        return -1;
    memcpy(lo, item, l);
    lo[l] = 0;
    snprintf(hi, sizeof hi, "%s", dash ? dash + 1 : lo);
    struct in_addr a, b;
    if (inet_pton(AF_INET, lo, &a) != 1 || inet_pton(AF_INET, hi, &b) != 1)
        return -1;
    uint32_t x = ntohl(a.s_addr), y = ntohl(b.s_addr);
    if (x > y)
        return -1;
    for (uint64_t v = x; v <= y; v++) {
        if (o->nsrc == OPT_MAX_SRC)
            return -1;
        o->src[o->nsrc++].s_addr = htonl((uint32_t)v);
    }
    return 0;
}

static int parse_src(struct client_opts *o, const char *arg)
{
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", arg) >= (int)sizeof buf)
        return -1;
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save))
        if (add_src_range(o, item))
            return -1;
    return o->nsrc ? 0 : -1;
}

static int append(char *dst, size_t *len, const char *s, size_t n)
{
    if (*len + n >= OPT_MAX_REQUEST)
        return -1;
    memcpy(dst + *len, s, n);
    *len += n;
    dst[*len] = 0;
    return 0;
}

/* Splits the path template at its %d into req_pre/req_post ("%%" is a '%'). */
static int set_path(struct client_opts *o, const char *path)
{
    if (path[0] != '/')
        return -1;
    o->req_pre_len = o->req_post_len = 0;
    o->path_has_uid = 0;
    o->path_has_query = strchr(path, '?') != NULL;
    if (append(o->req_pre, &o->req_pre_len, "GET ", 4))
        return -1;
    for (const char *p = path; *p; p++) {
        char *dst = o->path_has_uid ? o->req_post : o->req_pre;
        size_t *len = o->path_has_uid ? &o->req_post_len : &o->req_pre_len;
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
            return -1;
        if (*p == '%') {
            p++;
            if (*p == 'd' && !o->path_has_uid) {
                o->path_has_uid = 1;
                continue;
            }
            if (*p != '%')
                return -1;
        }
        if (append(dst, len, p, 1))
            return -1;
    }
    return 0;
}

static int check_header(const char *h)
{
    const char *colon = strchr(h, ':');
    if (!colon || colon == h)
        return -1;
    for (const char *p = h; *p; p++)
        if (*p == '\r' || *p == '\n')
            return -1;
    return 0;
}

static int resolve(struct client_opts *o)
{
    struct addrinfo hints, *res = NULL;
    char port[16];
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_family = o->nsrc ? AF_INET : AF_UNSPEC;
    snprintf(port, sizeof port, "%u", o->port);
    int rc = getaddrinfo(o->host, port, &hints, &res);
    if (rc) {
        fprintf(stderr, "httpclient: cannot resolve --host '%s'%s: %s\n", o->host,
                o->nsrc ? " as IPv4 (needed with --src)" : "", gai_strerror(rc));
        return -1;
    }
    memcpy(&o->dst, res->ai_addr, res->ai_addrlen);
    o->dst_len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

/* Headers the transport asks for: EventSource's Accept, the upgrade. */
static const char *proto_headers(enum client_proto p)
{
    return p == PROTO_SSE ? "Accept: text/event-stream\r\nCache-Control: no-cache\r\n"
         : p == PROTO_WS ? WS_REQUEST_HEADERS : "";
}

/* req_tail: " HTTP/1.1", Host, the transport's and the extra headers. */
static int finish_request(struct client_opts *o, char **headers, size_t nheaders)
{
    char host[300];
    int n = strchr(o->host, ':') ? snprintf(host, sizeof host, "[%s]:%u", o->host, o->port)
                                 : snprintf(host, sizeof host, "%s:%u", o->host, o->port);
    if (n < 0 || (size_t)n >= sizeof host)
        return -1;
    char *tail = o->req_tail;
    size_t *len = &o->req_tail_len;
    const char *ph = proto_headers(o->proto);
    *len = 0;
    if (append(tail, len, " HTTP/1.1\r\nHost: ", 17) || append(tail, len, host, (size_t)n)
        || append(tail, len, "\r\n", 2) || append(tail, len, ph, strlen(ph)))
        return -1;
    for (size_t i = 0; i < nheaders; i++)
        if (append(tail, len, headers[i], strlen(headers[i])) || append(tail, len, "\r\n", 2))
            return -1;
    /* 20 digits of uid, "?since=" or "Last-Event-ID: " with an id, the
     * blank line: 64 bytes at most. */
    return o->req_pre_len + o->req_post_len + o->req_tail_len + 64 < OPT_MAX_REQUEST ? 0 : -1;
}

enum {
    O_HOST = 256, O_PATH, O_UID_BASE, O_UIDS, O_SRC, O_PENDING, O_TIMEOUT, O_HOLD,
    O_UNTIL, O_MAX_TIME, O_JSON, O_HIST_OUT, O_RECORD, O_CHURN, O_CHURN_RESET, O_NO_READ, O_PROTO,
    O_READ_ON_SIGNAL, O_RECONNECT_AFTER, O_RECONNECT_ON_SIGNAL, O_RECONNECT_LOST, O_RECONNECT_CAP, O_SEND_RATE,
    O_TOPICS, O_TOPICS_PER_CONN,
    O_REQUEST_RATE
};

static int parse_proto(const char *s, enum client_proto *out)
{
    for (unsigned i = 0; i < sizeof k_protos / sizeof k_protos[0]; i++)
        if (strcmp(s, k_protos[i]) == 0) {
            *out = (enum client_proto)i;
            return 0;
        }
    return -1;
}

int opts_parse(struct client_opts *o, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"conns", required_argument, NULL, 'n'},
        {"host", required_argument, NULL, O_HOST},
        {"port", required_argument, NULL, 'p'},
        {"path", required_argument, NULL, O_PATH},
        {"uid-base", required_argument, NULL, O_UID_BASE},
        {"uids", required_argument, NULL, O_UIDS},
        {"procs", required_argument, NULL, 'P'},
        {"src", required_argument, NULL, O_SRC},
        {"rate", required_argument, NULL, 'r'},
        {"pending", required_argument, NULL, O_PENDING},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"hold", required_argument, NULL, O_HOLD},
        {"until-msgs", required_argument, NULL, O_UNTIL},
        {"max-time", required_argument, NULL, O_MAX_TIME},
        {"header", required_argument, NULL, 'H'},
        {"json", no_argument, NULL, O_JSON},
        {"hist-out", required_argument, NULL, O_HIST_OUT},
        {"record", required_argument, NULL, O_RECORD},
        {"churn", required_argument, NULL, O_CHURN},
        {"churn-reset", required_argument, NULL, O_CHURN_RESET},
        {"no-read", no_argument, NULL, O_NO_READ},
        {"read-on-signal", no_argument, NULL, O_READ_ON_SIGNAL},
        {"send-rate", required_argument, NULL, O_SEND_RATE},
        {"request-rate", required_argument, NULL, O_REQUEST_RATE},
        {"proto", required_argument, NULL, O_PROTO},
        {"reconnect-after", required_argument, NULL, O_RECONNECT_AFTER},
        {"reconnect-on-signal", no_argument, NULL, O_RECONNECT_ON_SIGNAL},
        {"reconnect-lost", required_argument, NULL, O_RECONNECT_LOST},
        {"reconnect-cap", required_argument, NULL, O_RECONNECT_CAP},
        {"topics", required_argument, NULL, O_TOPICS},
        {"topics-per-conn", required_argument, NULL, O_TOPICS_PER_CONN},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static char *headers[64];
    size_t nheaders = 0;
    const char *path = NULL;
    int max_time_set = 0;
    unsigned long v;

    memset(o, 0, sizeof *o);
    snprintf(o->host, sizeof o->host, "127.0.0.1");
    o->port = 8000;
    o->conns = 1000;
    o->uid_base = 1;
    o->pending = 100;
    o->timeout = 10;
    o->churn_reset_pct = 50;
    o->reconnect_cap_ms = 20000;

    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":n:p:P:r:H:qh", longopts, NULL)) != -1) {
        const char *name = argv[optind - 1];
        switch (c) {
        case 'n':
            if (parse_ulong(optarg, 1, 100000000, &o->conns))
                return bad("--conns", optarg, "want 1..100000000");
            break;
        case O_HOST:
            if (!*optarg || snprintf(o->host, sizeof o->host, "%s", optarg) >= (int)sizeof o->host)
                return bad("--host", optarg, "want a host name or address");
            break;
        case 'p':
            if (parse_ulong(optarg, 1, 65535, &v))
                return bad("--port", optarg, "want 1..65535");
            o->port = (unsigned)v;
            break;
        case O_PATH:
            path = optarg;
            break;
        case O_UID_BASE:
            if (parse_ulong(optarg, 0, 1ul << 62, &o->uid_base))
                return bad("--uid-base", optarg, "want a non-negative integer");
            break;
        case O_UIDS:
            if (parse_ulong(optarg, 1, 1ul << 62, &o->uids))
                return bad("--uids", optarg, "want a positive integer");
            break;
        case 'P':
            if (parse_ulong(optarg, 1, 256, &v))
                return bad("--procs", optarg, "want 1..256");
            o->procs = (unsigned)v;
            break;
        case O_SRC:
            if (parse_src(o, optarg))
                return bad("--src", optarg,
                           "want IPv4 A or A-B (A <= B), comma-separated, at most 256");
            break;
        case 'r':
            if (parse_seconds(optarg, &o->rate))
                return bad("--rate", optarg, "want a non-negative number");
            break;
        case O_PENDING:
            if (parse_ulong(optarg, 1, 1000000, &o->pending))
                return bad("--pending", optarg, "want 1..1000000");
            break;
        case O_TIMEOUT:
            if (parse_seconds(optarg, &o->timeout) || o->timeout <= 0)
                return bad("--timeout", optarg, "want seconds > 0");
            break;
        case O_HOLD:
            if (parse_seconds(optarg, &o->hold))
                return bad("--hold", optarg, "want seconds >= 0");
            o->hold_set = 1;
            break;
        case O_UNTIL:
            if (parse_ulong(optarg, 1, ~0ul, &v))
                return bad("--until-msgs", optarg, "want a positive integer");
            o->until_msgs = v;
            break;
        case O_MAX_TIME:
            if (parse_seconds(optarg, &o->max_time) || o->max_time <= 0)
                return bad("--max-time", optarg, "want seconds > 0");
            max_time_set = 1;
            break;
        case 'H':
            if (check_header(optarg))
                return bad("--header", optarg, "want 'Name: value' on one line");
            if (nheaders == sizeof headers / sizeof headers[0])
                return bad("--header", optarg, "at most 64 headers");
            headers[nheaders++] = optarg;
            break;
        case O_JSON:
            o->json = 1;
            break;
        case O_RECORD:
            o->record = optarg;
            break;
        case O_HIST_OUT:
            o->hist_out = optarg;
            break;
        case O_CHURN:
            if (parse_seconds(optarg, &o->churn))
                return bad("--churn", optarg, "want a non-negative number");
            break;
        case O_CHURN_RESET:
            if (parse_ulong(optarg, 0, 100, &v))
                return bad("--churn-reset", optarg, "want a percentage 0..100");
            o->churn_reset_pct = (unsigned)v;
            break;
        case O_NO_READ:
            o->no_read = 1;
            break;
        case O_READ_ON_SIGNAL:
            o->read_on_signal = 1;
            break;
        case O_SEND_RATE:
            if (parse_seconds(optarg, &o->send_rate))
                return bad("--send-rate", optarg, "want a non-negative number");
            break;
        case O_REQUEST_RATE:
            if (parse_seconds(optarg, &o->request_rate))
                return bad("--request-rate", optarg, "want a non-negative number");
            break;
        case O_TOPICS:
        case O_TOPICS_PER_CONN: {
            char *end;
            unsigned long n = strtoul(optarg, &end, 10);
            unsigned long hi = c == O_TOPICS ? 1000000ul : 255ul;
            if (*optarg < '0' || *optarg > '9' || *end || n < 1 || n > hi)
                return bad(c == O_TOPICS ? "--topics" : "--topics-per-conn", optarg,
                           c == O_TOPICS ? "want 1 to 1000000 topics" : "want 1 to 255");
            if (c == O_TOPICS)
                o->topics = (uint32_t)n;
            else
                o->topics_per_conn = (uint32_t)n;
            break;
        }
        case O_PROTO:
            if (parse_proto(optarg, &o->proto))
                return bad("--proto", optarg, "want chunked, sse, ws or poll");
            break;
        case O_RECONNECT_AFTER:
            if (parse_ulong(optarg, 1, ~0ul, &v))
                return bad("--reconnect-after", optarg, "want a positive integer");
            o->reconnect_after = v;
            break;
        case O_RECONNECT_ON_SIGNAL:
            o->reconnect_on_signal = 1;
            break;
        case O_RECONNECT_LOST:
            if (parse_ulong(optarg, 1, 3600000, &v))
                return bad("--reconnect-lost", optarg, "want 1..3600000 ms");
            o->reconnect_lost_ms = (uint32_t)v;
            break;
        case O_RECONNECT_CAP:
            if (parse_ulong(optarg, 1, 3600000, &v))
                return bad("--reconnect-cap", optarg, "want 1..3600000 ms");
            o->reconnect_cap_ms = (uint32_t)v;
            break;
        case 'q':
            o->quiet = 1;
            break;
        case 'h':
            opts_usage(stdout);
            return 1;
        case ':':
            fprintf(stderr, "httpclient: option %s needs a value (see --help)\n", name);
            return -1;
        default:
            fprintf(stderr, "httpclient: unknown option %s (see --help)\n", name);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "httpclient: unexpected argument '%s' (see --help)\n", argv[optind]);
        return -1;
    }
    if (o->read_on_signal && (!o->no_read || o->reconnect_on_signal)) {
        fprintf(stderr, "httpclient: --read-on-signal needs --no-read (and no "
                        "--reconnect-on-signal: both wait for SIGUSR1)\n");
        return -1;
    }
    if (o->reconnect_on_signal && !o->reconnect_after) {
        fprintf(stderr, "httpclient: --reconnect-on-signal needs --reconnect-after\n");
        return -1;
    }
    if (o->reconnect_after && o->proto == PROTO_CHUNKED)
        fprintf(stderr, "httpclient: note: chunked streams carry no ids: a reconnection "
                        "cannot resume\n");
    if (o->no_read && o->proto == PROTO_POLL) {
        fprintf(stderr, "httpclient: --no-read makes no sense with --proto poll\n");
        return -1;
    }
    if ((o->send_rate > 0 || o->request_rate > 0) && (o->proto != PROTO_WS || o->no_read)) {
        fprintf(stderr, "httpclient: --send-rate and --request-rate need --proto ws (and reading)\n");
        return -1;
    }
    if (o->topics && o->proto == PROTO_POLL) {
        fprintf(stderr, "httpclient: --topics needs --proto sse, ws or chunked\n");
        return -1;
    }
    if (o->topics && o->topics_per_conn > o->topics) {
        fprintf(stderr, "httpclient: --topics-per-conn is more than --topics\n");
        return -1;
    }
    if (!o->topics_per_conn)
        o->topics_per_conn = 1;
    if (!path)
        path = k_default_paths[o->proto];
    if (set_path(o, path))
        return bad("--path", path, "want /..., no spaces, at most one %d (%% for a '%')");
    if (finish_request(o, headers, nheaders)) {
        fprintf(stderr, "httpclient: request longer than %d bytes\n", OPT_MAX_REQUEST);
        return -1;
    }
    if (resolve(o))
        return -1;
    if (!max_time_set)
        o->max_time = 60 + o->hold + (o->rate > 0 ? (double)o->conns / o->rate : 0);
    return 0;
}

unsigned long opts_uid_of(const struct client_opts *o, uint64_t g)
{
    return o->uid_base + (unsigned long)(o->uids ? g % o->uids : g);
}

uint32_t opts_topic_of(const struct client_opts *o, uint64_t g, uint32_t j)
{
    return (uint32_t)((g * o->topics_per_conn + j) % o->topics);
}

uint32_t opts_topic_index(const struct client_opts *o, uint64_t g, uint32_t t)
{
    uint64_t first = g * o->topics_per_conn % o->topics;
    return (uint32_t)((t + o->topics - first) % o->topics);
}
