/* Command-line parsing. Every bad value is one clear line and exit 2. */
#include "options.h"
#include "erl/erl_cookie.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
    "Usage: httpdcnode [options]\n"
    "Comet push server: holds streaming HTTP connections (GET /test/UID) and\n"
    "writes to them what Erlang nodes send to its C-node.\n"
    "\n"
    "  --listen ADDR:PORT       HTTP address (default 0.0.0.0:8000)\n"
    "  --admin-listen ADDR:PORT  private address for GET /stats, /metrics\n"
    "                           (Prometheus) and /probe (default 127.0.0.1:8001;\n"
    "                           \"\" for none)\n"
    "  --name ALIVE@HOST        this C-node's name (default c1@localhost)\n"
    "  --master NODE@HOST[,NODE@HOST...]  Erlang node(s) to connect to and keep\n"
    "                           connected to, each on its own (at most 8; default\n"
    "                           httpdmaster@localhost; \"\" for none); each gets the\n"
    "                           hello and the presence messages\n"
    "  --cookie-file FILE       read the Erlang cookie from FILE (mode 0600; one\n"
    "                           trailing newline removed); default $ERLANG_COOKIE,\n"
    "                           then ~/.erlang.cookie (also mode 0600)\n"
    "  --cookie COOKIE          the cookie itself: visible to every user in ps,\n"
    "                           prefer --cookie-file\n"
    "  --erl-tick-seconds S     a master link that brings nothing, not even a tick,\n"
    "                           for S seconds (up to 1.25 S) is dropped and dialled\n"
    "                           again; set it to the masters' net_ticktime\n"
    "                           (default 60, Erlang's; 1 to 3600)\n"
    "  --presence NAME          send {httpdcnode, Node, hello, Info} and\n"
    "                           {httpdcnode, Node, up|down|snapshot|snapshot_more, Uids}\n"
    "                           to the process registered as NAME on each master\n"
    "  --presence-conns         to --presence also {httpdcnode, Node, conn_up, Uid,\n"
    "                           ConnId, Transport, Peer} when a stream opens and\n"
    "                           {httpdcnode, Node, conn_down, Uid, ConnId, Reason}\n"
    "                           when it ends (with --inbox, conn_down of a WebSocket\n"
    "                           to the inbox too); off by default\n"
    "  --inbox NAME             send each message a client sends (a WebSocket\n"
    "                           message, a POST /send/N) as {httpdcnode_in, Node,\n"
    "                           Uid, ConnId, Data} to the process registered as NAME\n"
    "                           on one linked master (by uid); without it client\n"
    "                           messages are refused (counted)\n"
    "  --max-client-message BYTES  largest client message (default 4096; past it\n"
    "                           a WebSocket is closed 1009, a POST gets 413)\n"
    "  --client-rate MSGS       client messages per second per connection (POST\n"
    "                           /send/N without ?conn=: per client address), with a\n"
    "                           burst of MSGS/4 + 8 (default 50; past it: close 1008,\n"
    "                           429)\n"
    "  --ws-deflate             compress WebSocket messages (permessage-deflate,\n"
    "                           RFC 7692) for clients that offer it, with no context\n"
    "                           takeover either way: a message is compressed once\n"
    "                           for all its receivers (64 bytes and up, when that\n"
    "                           makes it smaller); off by default\n"
    "  --max-users N            uids 1..N (default 1114112); the table is N pointers\n"
    "  --max-message BYTES      largest message payload (default 65536)\n"
    "  --max-conns-per-uid N    streams per uid; the oldest is ended (default 8)\n"
    "  --max-backlog BYTES      unsent bytes a stream may hold before it is ended\n"
    "                           as a slow consumer (default 1048576)\n"
    "  --max-backlog-total BYTES  unsent bytes of all streams together; past it the\n"
    "                           streams holding the most are ended (default 268435456)\n"
    "  --max-input-total BYTES  bytes clients sent that are held until whole (requests\n"
    "                           being read, POST bodies above all; WebSocket messages\n"
    "                           in flight), all connections together; past it those\n"
    "                           holding the most are ended (default 67108864)\n"
    "  --header-timeout SECONDS  a request must be complete this long after its\n"
    "                           first byte, however slowly it trickles in (default 10)\n"
    "  --keepalive SECONDS      TCP keepalive: a peer silent this long is probed and\n"
    "                           dropped within about twice that (default 60; 0 off)\n"
    "  --history N              messages kept per uid for clients that come back\n"
    "                           (default 32; 0: none)\n"
    "  --history-ttl SECONDS    none kept longer (default 120)\n"
    "  --history-bytes BYTES    all kept messages together; the oldest go first\n"
    "                           (default 67108864, at most 17179869184)\n"
    "  --history-file FILE      keep ids and history in FILE (a tmpfs such as\n"
    "                           /dev/shm: mode 0600, locked while in use), so that\n"
    "                           a node restarted with the same --name after a crash\n"
    "                           keeps its epoch and ids and its clients resume with\n"
    "                           no gap; a damaged file, or another node's, is\n"
    "                           started afresh (default: in memory only)\n"
    "  --heartbeat SECONDS      a comment to every SSE stream (a ping to every\n"
    "                           WebSocket) this often, so that proxies keep it open\n"
    "                           (default 25; 0 off)\n"
    "  --poll-timeout SECONDS   a long-poll with nothing new waits this long at most\n"
    "                           (default 25)\n"
    "  --max-topics N           topics held at once (default 100000; 0: no topics);\n"
    "                           a topic no stream holds is kept --history-ttl\n"
    "                           seconds for its resuming clients\n"
    "  --max-topics-per-stream N  topics one stream may subscribe to (default 16,\n"
    "                           at most 255)\n"
    "  --max-streams-per-topic N  streams subscribed to one topic here (default\n"
    "                           1000000)\n"
    "  --topic-history N        messages kept per topic for clients that come back\n"
    "                           (default: --history's; 0: none)\n"
    "  --topic-auth MODE        who may subscribe to what: open (any topic), token\n"
    "                           (the topics its subscriber token's claim lists), or\n"
    "                           handler (those, and what the --inbox handler's\n"
    "                           authorize_join allows); default token with\n"
    "                           --auth-secret-file, else open\n"
    "  --presence-topics        to --presence also who subscribes: each join and\n"
    "                           leave of a topic, with its uid and conn\n"
    "  --allow-origin ORIGIN    a web origin (scheme://host[:port]) whose pages may\n"
    "                           read streams cross-origin; repeatable, or * for any\n"
    "  --trusted-proxy ADDR[/BITS][,...]  a reverse proxy (or network of them)\n"
    "                           whose X-Forwarded-For (else X-Real-IP) names the\n"
    "                           client: its address for the POST /send/N rate and\n"
    "                           conn_up's Peer; repeatable, at most 16; from any\n"
    "                           other peer those headers are ignored\n"
    "  --writers N              threads writing a large fan-out, the event loop\n"
    "                           included (default: the CPUs it may use, at most 4)\n"
    "  --auth-secret-file FILE  subscribers need a token signed with the secret in\n"
    "                           FILE (mode 600): a JWT (HS256, sub the uid) as\n"
    "                           token=JWT in the query or Authorization: Bearer JWT,\n"
    "                           or exp=EXP&sig=HMAC (docs/security.md)\n"
    "  --drain-seconds SECONDS  on SIGTERM, end the streams spread over this long\n"
    "                           (at least 100 a second) so that their clients do not\n"
    "                           all come back at once (default 10; 0: all at once)\n"
    "  --no-token-expiry        a stream opened with a token lives past the token's\n"
    "                           exp (by default it is ended then)\n"
    "  --takeover               take over from the process running as this --name\n"
    "                           on this host, started with the same options: its\n"
    "                           listening sockets, streams (open, with what they had\n"
    "                           not written yet), history and Erlang links pass to\n"
    "                           this one, and it exits; no client is disconnected.\n"
    "                           Exits 1 when refused (the other one serves on).\n"
    "                           SIGUSR2 to a running server starts its binary so\n"
    "                           (systemctl reload)\n"
    "  --probe-latency          for benchmarks: GET /probe on the admin address gives\n"
    "                           the age of messages whose payload starts with\n"
    "                           t=<ns since the epoch>; at each hop inside the server\n"
    "  --list-counters          print the name of every counter of GET /stats and\n"
    "                           every metric family of GET /metrics (with its\n"
    "                           reason labels), one a line, and exit\n"
    "  -v, --verbose            log connections and Erlang traffic too\n"
    "  -q, --quiet              log errors only\n"
    "  -h, --help               this text\n"
    "      --version            print the version\n";

enum { OPT_LISTEN = 256, OPT_ADMIN_LISTEN, OPT_NAME, OPT_MASTER, OPT_COOKIE, OPT_COOKIE_FILE,
       OPT_PRESENCE, OPT_MAX_USERS,
       OPT_MAX_MESSAGE, OPT_MAX_CONNS, OPT_MAX_BACKLOG, OPT_MAX_BACKLOG_TOTAL, OPT_HEADER_TIMEOUT, OPT_KEEPALIVE,
       OPT_HISTORY, OPT_HISTORY_TTL, OPT_HISTORY_BYTES, OPT_HISTORY_FILE, OPT_HEARTBEAT, OPT_POLL_TIMEOUT,
       OPT_ALLOW_ORIGIN, OPT_WRITERS, OPT_PROBE, OPT_VERSION, OPT_AUTH_SECRET_FILE,
       OPT_DRAIN_SECONDS, OPT_NO_TOKEN_EXPIRY, OPT_INBOX, OPT_MAX_CLIENT_MESSAGE,
       OPT_CLIENT_RATE, OPT_PRESENCE_CONNS, OPT_MAX_INPUT_TOTAL, OPT_ERL_TICK,
       OPT_TRUSTED_PROXY, OPT_LIST_COUNTERS, OPT_WS_DEFLATE, OPT_TAKEOVER,
       OPT_MAX_TOPICS, OPT_TOPICS_PER_STREAM, OPT_STREAMS_PER_TOPIC, OPT_TOPIC_HISTORY,
       OPT_TOPIC_AUTH, OPT_PRESENCE_TOPICS };

static const struct option long_opts[] = {
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"admin-listen", required_argument, NULL, OPT_ADMIN_LISTEN},
    {"name", required_argument, NULL, OPT_NAME},
    {"master", required_argument, NULL, OPT_MASTER},
    {"cookie", required_argument, NULL, OPT_COOKIE},
    {"cookie-file", required_argument, NULL, OPT_COOKIE_FILE},
    {"erl-tick-seconds", required_argument, NULL, OPT_ERL_TICK},
    {"presence", required_argument, NULL, OPT_PRESENCE},
    {"inbox", required_argument, NULL, OPT_INBOX},
    {"presence-conns", no_argument, NULL, OPT_PRESENCE_CONNS},
    {"max-client-message", required_argument, NULL, OPT_MAX_CLIENT_MESSAGE},
    {"client-rate", required_argument, NULL, OPT_CLIENT_RATE},
    {"ws-deflate", no_argument, NULL, OPT_WS_DEFLATE},
    {"max-users", required_argument, NULL, OPT_MAX_USERS},
    {"max-message", required_argument, NULL, OPT_MAX_MESSAGE},
    {"max-conns-per-uid", required_argument, NULL, OPT_MAX_CONNS},
    {"max-backlog", required_argument, NULL, OPT_MAX_BACKLOG},
    {"max-backlog-total", required_argument, NULL, OPT_MAX_BACKLOG_TOTAL},
    {"max-input-total", required_argument, NULL, OPT_MAX_INPUT_TOTAL},
    {"header-timeout", required_argument, NULL, OPT_HEADER_TIMEOUT},
    {"keepalive", required_argument, NULL, OPT_KEEPALIVE},
    {"history", required_argument, NULL, OPT_HISTORY},
    {"history-ttl", required_argument, NULL, OPT_HISTORY_TTL},
    {"history-bytes", required_argument, NULL, OPT_HISTORY_BYTES},
    {"history-file", required_argument, NULL, OPT_HISTORY_FILE},
    {"heartbeat", required_argument, NULL, OPT_HEARTBEAT},
    {"poll-timeout", required_argument, NULL, OPT_POLL_TIMEOUT},
    {"max-topics", required_argument, NULL, OPT_MAX_TOPICS},
    {"max-topics-per-stream", required_argument, NULL, OPT_TOPICS_PER_STREAM},
    {"max-streams-per-topic", required_argument, NULL, OPT_STREAMS_PER_TOPIC},
    {"topic-history", required_argument, NULL, OPT_TOPIC_HISTORY},
    {"topic-auth", required_argument, NULL, OPT_TOPIC_AUTH},
    {"presence-topics", no_argument, NULL, OPT_PRESENCE_TOPICS},
    {"allow-origin", required_argument, NULL, OPT_ALLOW_ORIGIN},
    {"trusted-proxy", required_argument, NULL, OPT_TRUSTED_PROXY},
    {"writers", required_argument, NULL, OPT_WRITERS},
    {"probe-latency", no_argument, NULL, OPT_PROBE},
    {"auth-secret-file", required_argument, NULL, OPT_AUTH_SECRET_FILE},
    {"drain-seconds", required_argument, NULL, OPT_DRAIN_SECONDS},
    {"no-token-expiry", no_argument, NULL, OPT_NO_TOKEN_EXPIRY},
    {"list-counters", no_argument, NULL, OPT_LIST_COUNTERS},
    {"takeover", no_argument, NULL, OPT_TAKEOVER},
    {"verbose", no_argument, NULL, 'v'},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

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
    fprintf(stderr, "httpdcnode: bad %s '%s': %s (see --help)\n", what, value, hint);
    return -1;
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

static int parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
    uint64_t v;
    if (parse_u64(s, lo, hi, &v))
        return -1;
    *out = (uint32_t)v;
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
    uint32_t p;
    if (!colon || colon == s || (size_t)(colon - s) >= 64 || parse_u32(colon + 1, 1, 65535, &p))
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

/* alive@host, both parts non-empty, host without further '@'. */
static int valid_node_name(const char *s)
{
    const char *at = strchr(s, '@');
    return at && at != s && at[1] && !strchr(at + 1, '@') && strlen(s) < 256;
}

/* --master: "" (none) or node@host[,node@host...], each once, at most
 * MASTERS_MAX. -1 after printing the error. */
static int parse_masters(struct options *o, const char *arg)
{
    char name[256];
    o->n_masters = 0;
    for (const char *p = arg; *arg;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len >= sizeof name)
            return bad("--master", arg, "a node name is longer than 255 characters");
        memcpy(name, p, len);
        name[len] = '\0';
        if (!valid_node_name(name))
            return bad("--master", arg, "expected node@host[,node@host...], or \"\" for none");
        if (o->n_masters == MASTERS_MAX)
            return bad("--master", arg, "more than 8 masters");
        for (uint32_t i = 0; i < o->n_masters; i++)
            if (strcmp(o->masters[i], name) == 0)
                return bad("--master", arg, "a master is named twice");
        strcpy(o->masters[o->n_masters++], name);
        if (!end)
            break;
        p = end + 1;
    }
    return 0;
}

/* --trusted-proxy: ADDR[/BITS][,ADDR[/BITS]...], added to those before.
 * -1 after printing the error. */
static int parse_trusted(struct options *o, const char *arg)
{
    char one[64];
    for (const char *p = arg;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len >= sizeof one)
            return bad("--trusted-proxy", arg, "an address is too long");
        memcpy(one, p, len);
        one[len] = '\0';
        if (o->n_trusted_proxy == TRUSTED_PROXY_MAX)
            return bad("--trusted-proxy", arg, "more than 16 addresses");
        if (peer_net_parse(one, &o->trusted_proxy[o->n_trusted_proxy]) != 0)
            return bad("--trusted-proxy", arg,
                       "expected an IPv4 or IPv6 address, or a network ADDR/BITS, e.g. 127.0.0.1 "
                       "or 10.0.0.0/8");
        o->n_trusted_proxy++;
        if (!end)
            return 0;
        p = end + 1;
    }
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

static void set_defaults(struct options *o)
{
    memset(o, 0, sizeof *o);
    strcpy(o->listen_host, "0.0.0.0");
    o->listen_port = 8000;
    strcpy(o->admin_host, "127.0.0.1");
    o->admin_port = 8001;
    strcpy(o->name, "c1@localhost");
    strcpy(o->masters[0], "httpdmaster@localhost");
    o->n_masters = 1;
    o->erl_tick_seconds = 60;
    o->max_users = DEFAULT_MAX_USERS;
    o->max_message = 65536;
    o->max_conns_per_uid = 8;
    o->max_backlog = 1u << 20;
    o->max_backlog_total = 256u << 20;
    o->max_input_total = 64u << 20;
    o->header_timeout = 10;
    o->keepalive = 60;
    o->history = 32;
    o->history_ttl = 120;
    o->history_bytes = 64u << 20;
    o->topic_history = UINT32_MAX;      /* --history's unless given */
    o->topic_auth = -1;                 /* token with --auth-secret-file, else open */
    o->max_topics = 100000;
    o->topics_per_stream = 16;
    o->streams_per_topic = 1000000;
    o->heartbeat = 25;
    o->poll_timeout = 25;
    o->max_client_message = 4096;
    o->client_rate = 50;
    o->drain_seconds = 10;
    o->token_expiry = 1;
    o->verbosity = 1;
    o->writers = usable_cpus();
    if (o->writers > 4)
        o->writers = 4;
}

/* --cookie or --cookie-file (not both), else $ERLANG_COOKIE or ~/.erlang.cookie. */
static int take_cookie(struct options *o, const char *cookie_file)
{
    if (cookie_file && o->cookie_in_argv) {
        fprintf(stderr, "httpdcnode: give --cookie or --cookie-file, not both\n");
        return -1;
    }
    if (cookie_file)
        return erl_cookie_read_file(cookie_file, o->cookie, sizeof o->cookie);
    if (o->cookie_in_argv)
        return 0;
    return erl_cookie_find(o->cookie, sizeof o->cookie);
}

int options_parse(struct options *o, int argc, char **argv)
{
    int c;
    const char *cookie_file = NULL;

    set_defaults(o);
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "vqh", long_opts, NULL)) != -1) {
        switch (c) {
        case OPT_LISTEN:
            if (parse_addr(optarg, o->listen_host, &o->listen_port))
                return bad("--listen", optarg, "expected IPV4-ADDR:PORT, e.g. 0.0.0.0:8000");
            break;
        case OPT_ADMIN_LISTEN:
            o->admin_explicit = 1;
            o->admin_port = 0;
            if (*optarg && parse_addr(optarg, o->admin_host, &o->admin_port))
                return bad("--admin-listen", optarg,
                           "expected IPV4-ADDR:PORT, e.g. 127.0.0.1:8001, or \"\" for none");
            break;
        case OPT_NAME:
            if (!valid_node_name(optarg) || copy_str(o->name, sizeof o->name, optarg))
                return bad("--name", optarg, "expected alive@host, e.g. c1@localhost");
            break;
        case OPT_MASTER:
            if (parse_masters(o, optarg) != 0)
                return -1;
            break;
        case OPT_COOKIE:
            if (!*optarg || copy_str(o->cookie, sizeof o->cookie, optarg))
                return bad("--cookie", "(hidden)", "expected 1 to 255 characters");
            o->cookie_in_argv = 1;
            break;
        case OPT_COOKIE_FILE:
            cookie_file = optarg;
            break;
        case OPT_ERL_TICK:
            if (parse_u32(optarg, 1, 3600, &o->erl_tick_seconds))
                return bad("--erl-tick-seconds", optarg,
                           "expected 1 to 3600 seconds (the masters' net_ticktime)");
            break;
        case OPT_PRESENCE:
            if (!*optarg || copy_str(o->presence, sizeof o->presence, optarg))
                return bad("--presence", optarg, "expected a registered process name");
            break;
        case OPT_MAX_USERS:
            if (parse_u32(optarg, 1, 1u << 30, &o->max_users))
                return bad("--max-users", optarg, "expected 1 to 1073741824");
            break;
        case OPT_MAX_MESSAGE:
            if (parse_u32(optarg, 1, MAX_MESSAGE_LIMIT, &o->max_message))
                return bad("--max-message", optarg, "expected 1 to 8388608 bytes");
            break;
        case OPT_MAX_CONNS:
            if (parse_u32(optarg, 1, 1024, &o->max_conns_per_uid))
                return bad("--max-conns-per-uid", optarg, "expected 1 to 1024");
            break;
        case OPT_MAX_BACKLOG:
            if (parse_u32(optarg, 1024, 1u << 30, &o->max_backlog))
                return bad("--max-backlog", optarg, "expected 1024 to 1073741824 bytes");
            break;
        case OPT_MAX_BACKLOG_TOTAL:
            if (parse_u64(optarg, 1024, 1ull << 40, &o->max_backlog_total))
                return bad("--max-backlog-total", optarg, "expected 1024 to 2^40 bytes");
            break;
        case OPT_MAX_INPUT_TOTAL:
            if (parse_u64(optarg, 65536, 1ull << 40, &o->max_input_total))
                return bad("--max-input-total", optarg, "expected 65536 to 2^40 bytes");
            break;
        case OPT_HEADER_TIMEOUT:
            if (parse_u32(optarg, 1, 3600, &o->header_timeout))
                return bad("--header-timeout", optarg, "expected 1 to 3600 seconds");
            break;
        case OPT_KEEPALIVE:
            if (parse_u32(optarg, 0, 32767, &o->keepalive))
                return bad("--keepalive", optarg, "expected 0 (off) to 32767 seconds");
            break;
        case OPT_HISTORY:
            if (parse_u32(optarg, 0, 4096, &o->history))
                return bad("--history", optarg, "expected 0 (off) to 4096 messages");
            break;
        case OPT_HISTORY_TTL:
            if (parse_u32(optarg, 1, 86400, &o->history_ttl))
                return bad("--history-ttl", optarg, "expected 1 to 86400 seconds");
            break;
        case OPT_HISTORY_BYTES:
            if (parse_u64(optarg, 65536, 1ull << 34, &o->history_bytes))
                return bad("--history-bytes", optarg, "expected 65536 to 2^34 bytes (16 GiB)");
            break;
        case OPT_HISTORY_FILE:
            if (optarg[0] == '\0' || copy_str(o->history_file, sizeof o->history_file, optarg))
                return bad("--history-file", optarg, "expected a path");
            break;
        case OPT_HEARTBEAT:
            if (parse_u32(optarg, 0, 3600, &o->heartbeat))
                return bad("--heartbeat", optarg, "expected 0 (off) to 3600 seconds");
            break;
        case OPT_INBOX:
            if (!*optarg || copy_str(o->inbox, sizeof o->inbox, optarg))
                return bad("--inbox", optarg, "expected a registered process name");
            break;
        case OPT_MAX_CLIENT_MESSAGE:
            if (parse_u32(optarg, 1, CLIENT_MESSAGE_LIMIT, &o->max_client_message))
                return bad("--max-client-message", optarg, "expected 1..1048576");
            break;
        case OPT_CLIENT_RATE:
            if (parse_u32(optarg, 1, 100000, &o->client_rate))
                return bad("--client-rate", optarg, "expected 1..100000");
            break;
        case OPT_POLL_TIMEOUT:
            if (parse_u32(optarg, 1, 3600, &o->poll_timeout))
                return bad("--poll-timeout", optarg, "expected 1 to 3600 seconds");
            break;
        case OPT_ALLOW_ORIGIN:
            if (o->n_allow_origin == ALLOW_ORIGIN_MAX || !valid_origin(optarg) ||
                copy_str(o->allow_origin[o->n_allow_origin], sizeof o->allow_origin[0], optarg))
                return bad("--allow-origin", optarg,
                           "expected * or scheme://host[:port], at most 16 of them");
            o->n_allow_origin++;
            break;
        case OPT_TRUSTED_PROXY:
            if (parse_trusted(o, optarg) != 0)
                return -1;
            break;
        case OPT_WRITERS:
            if (parse_u32(optarg, 1, 64, &o->writers))
                return bad("--writers", optarg, "expected 1 to 64 threads");
            break;
        case OPT_PROBE: o->probe_latency = 1; break;
        case OPT_AUTH_SECRET_FILE:
            if (optarg[0] == '\0' ||
                copy_str(o->auth_secret_file, sizeof o->auth_secret_file, optarg))
                return bad("--auth-secret-file", optarg, "expected a path");
            break;
        case OPT_DRAIN_SECONDS:
            if (parse_u32(optarg, 0, 3600, &o->drain_seconds))
                return bad("--drain-seconds", optarg, "expected 0 (all at once) to 3600 seconds");
            break;
        case OPT_NO_TOKEN_EXPIRY: o->token_expiry = 0; break;
        case OPT_MAX_TOPICS:
            if (parse_u32(optarg, 0, 1u << 24, &o->max_topics))
                return bad("--max-topics", optarg, "expected 0 (no topics) to 16777216");
            break;
        case OPT_TOPICS_PER_STREAM:
            if (parse_u32(optarg, 1, 255, &o->topics_per_stream))
                return bad("--max-topics-per-stream", optarg, "expected 1 to 255");
            break;
        case OPT_STREAMS_PER_TOPIC:
            if (parse_u32(optarg, 1, 1u << 30, &o->streams_per_topic))
                return bad("--max-streams-per-topic", optarg, "expected 1 to 1073741824");
            break;
        case OPT_TOPIC_HISTORY:
            if (parse_u32(optarg, 0, 4096, &o->topic_history))
                return bad("--topic-history", optarg, "expected 0 (off) to 4096 messages");
            break;
        case OPT_TOPIC_AUTH:
            if (strcmp(optarg, "open") == 0)
                o->topic_auth = 0;
            else if (strcmp(optarg, "token") == 0)
                o->topic_auth = 1;
            else if (strcmp(optarg, "handler") == 0)
                o->topic_auth = 2;
            else
                return bad("--topic-auth", optarg, "expected open, token or handler");
            break;
        case OPT_PRESENCE_TOPICS: o->presence_topics = 1; break;
        case OPT_PRESENCE_CONNS: o->presence_conns = 1; break;
        case OPT_LIST_COUNTERS: o->list_counters = 1; break;
        case OPT_WS_DEFLATE: o->ws_deflate = 1; break;
        case OPT_TAKEOVER: o->takeover = 1; break;
        case 'v': o->verbosity = 2; break;
        case 'q': o->verbosity = 0; break;
        case 'h': fputs(usage_text, stdout); return 1;
        case OPT_VERSION: printf("httpdcnode %s\n", HTTPDCNODE_VERSION); return 1;
        default:
            fprintf(stderr, "httpdcnode: unknown or incomplete option '%s' (see --help)\n",
                    argv[optind - 1]);
            return -1;
        }
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
    return take_cookie(o, cookie_file);
}
