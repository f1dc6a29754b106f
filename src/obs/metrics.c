/* SPDX-License-Identifier: Apache-2.0 */
/* The Prometheus exposition of the counters: see metrics.h. Which counter
 * feeds which metric is one table; a new reason is one line in it (a
 * stream's ending: one in end_reason.h's). */
#include "obs/metrics.h"
#include "obs/delivery_time.h"
#include "obs/end_reason.h"
#include "obs/stats.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum family {
    STREAMS_OPEN, UIDS_ONLINE, BACKLOG_BYTES, INPUT_BYTES, ERLANG_NODES, RESIDENT_MEMORY,
    STREAMS_OPENED, STREAMS_CLOSED, MESSAGES_RECEIVED, MESSAGES_DROPPED, DELIVERIES,
    BYTES_OUT, HTTP_REJECTED, REPLIES_DROPPED, ERLANG_CONNECTS, ERLANG_REFUSED,
    BACKPRESSURE, HISTORY_BYTES, HISTORY_ENTRIES, HISTORY_EVICTED, HISTORY_MOVED,
    HISTORY_TOPIC_TRIMMED, REPLAYS, REPLAYED, REPLAY_GAPS, MULTICAST_REPEATS,
    WS_IGNORED, CLIENT_POSTS, ERLANG_MASTERS, CLIENT_IN, CLIENT_DROPPED, CLIENT_PAUSED,
    CONN_SENT, CONN_DROPPED, CONN_EMPTY_DROPPED, PRESENCE_DROPPED, CONN_EVENTS_DROPPED,
    INBOX_RESETS, INBOX_RESET_UNACKED, INBOX_WINDOWS_STUCK, ERLANG_SILENT, NUMBERED,
    NUMBERED_SKIPPED, NUMBERED_ACKS, GAP_UIDS, GAP_TOPICS, PROXY_BAD_FORWARDED,
    WS_DEFLATED, WS_DEFLATE_IN, WS_DEFLATE_OUT, WS_INFLATED, WS_INFLATE_TOO_BIG,
    TOPICS, TOPIC_SUBSCRIPTIONS, TOPIC_JOINS, TOPIC_LEAVES, TOPICS_GIVEN_UP, TOPIC_PUBLISHED,
    TOPIC_REFUSED, TOPIC_ASKS, TOPIC_PRESENCE_DROPPED, LINGERING, LINGER_FULL, FAMILIES
};

static const struct {
    const char *name, *type, *help;
} families[FAMILIES] = {
    [STREAMS_OPEN] = {"streams_open", "gauge", "Streams held now."},
    [UIDS_ONLINE] = {"uids_online", "gauge", "Uids with at least one stream."},
    [BACKLOG_BYTES] = {"backlog_bytes", "gauge", "Unsent bytes held for all streams."},
    [INPUT_BYTES] = {"input_bytes", "gauge",
                     "Bytes clients sent held until whole (requests, WebSocket messages)."},
    [ERLANG_NODES] = {"erlang_nodes", "gauge", "Erlang connections up."},
    [RESIDENT_MEMORY] = {"resident_memory_bytes", "gauge", "Resident set size of the server."},
    [STREAMS_OPENED] = {"streams_opened_total", "counter", "Streams started."},
    [STREAMS_CLOSED] = {"streams_closed_total", "counter", "Streams ended, by reason."},
    [MESSAGES_RECEIVED] = {"messages_received_total", "counter", "Messages received from Erlang."},
    [MESSAGES_DROPPED] = {"messages_dropped_total", "counter",
                          "Messages from Erlang not delivered, by reason."},
    [DELIVERIES] = {"deliveries_total", "counter", "Messages written (or queued) to streams."},
    [BYTES_OUT] = {"bytes_out_total", "counter", "Payload bytes delivered to streams."},
    [HTTP_REJECTED] = {"http_rejected_total", "counter", "HTTP requests refused, by reason."},
    [REPLIES_DROPPED] = {"replies_dropped_total", "counter",
                         "Replies and presence lost: the queue to Erlang was full."},
    [ERLANG_CONNECTS] = {"erlang_connects_total", "counter", "Erlang connections made or accepted."},
    [ERLANG_REFUSED] = {"erlang_refused_total", "counter",
                        "Erlang connections closed: every handshake thread was busy."},
    [BACKPRESSURE] = {"backpressure_seconds_total", "counter",
                      "Seconds the Erlang reader waited for the event loop."},
    [HISTORY_BYTES] = {"history_bytes", "gauge", "Bytes of messages kept for resume."},
    [HISTORY_ENTRIES] = {"history_messages", "gauge", "Messages kept for resume."},
    [HISTORY_EVICTED] = {"history_evicted_total", "counter",
                         "Kept messages pushed out for room."},
    [HISTORY_MOVED] = {"history_moved_total", "counter",
                       "Kept messages moved ahead, still of use, rather than pushed out."},
    [HISTORY_TOPIC_TRIMMED] = {"topic_history_trimmed_total", "counter",
                               "A topic's kept messages pushed out past --topic-history-bytes "
                               "of its newer ones."},
    [MULTICAST_REPEATS] = {"multicast_repeats_total", "counter",
                           "Uids a multicast listed again (given the message once)."},
    [REPLAYS] = {"replays_total", "counter", "Resumes that replayed from the history or told a gap."},
    [REPLAYED] = {"replayed_messages_total", "counter", "Messages replayed to resuming clients."},
    [REPLAY_GAPS] = {"replay_gaps_total", "counter", "Gaps told to resuming clients."},
    [WS_IGNORED] = {"websocket_client_messages_total", "counter",
                    "Data messages WebSocket clients sent (ignored)."},
    [CLIENT_POSTS] = {"client_posts_total", "counter",
                      "POST /send/N requests, by outcome (accepted or why refused)."},
    [ERLANG_MASTERS] = {"erlang_masters", "gauge", "Erlang connections up to --master nodes."},
    [CLIENT_IN] = {"client_messages_total", "counter",
                   "Client messages queued for the --inbox process."},
    [CLIENT_DROPPED] = {"client_messages_dropped_total", "counter",
                        "Client messages lost, by reason."},
    [CLIENT_PAUSED] = {"client_pauses_total", "counter",
                       "Times a WebSocket was not read: Erlang was behind."},
    [CONN_SENT] = {"conn_messages_sent_total", "counter",
                   "{conn, Conn, Data} written to their connection."},
    [CONN_DROPPED] = {"conn_messages_dropped_total", "counter",
                      "{conn, Conn, Data} for an unknown or closed connection."},
    [CONN_EMPTY_DROPPED] = {"conn_messages_empty_dropped_total", "counter",
                            "{conn, Conn, <<>>} to a stream that cannot carry an empty message "
                            "(chunked, HTTP/1.0)."},
    [PRESENCE_DROPPED] = {"presence_dropped_total", "counter",
                          "Presence messages not sent to a master that was not reading."},
    [CONN_EVENTS_DROPPED] = {"conn_events_dropped_total", "counter",
                             "Connection presence (conn_up, conn_down) lost: too many queued."},
    [INBOX_RESETS] = {"inbox_resets_total", "counter",
                      "Inbox processes that announced they started (again)."},
    [INBOX_RESET_UNACKED] = {"inbox_reset_unacked_total", "counter",
                             "Client messages an inbox had not acknowledged when a new one "
                             "started: lost with the old one, most of them."},
    [INBOX_WINDOWS_STUCK] = {"inbox_windows_stuck", "gauge",
                             "Master links whose inbox window is full with no acknowledgement "
                             "for 5 s."},
    [ERLANG_SILENT] = {"erlang_masters_silent_total", "counter",
                       "Links to masters dropped: nothing came from them for --erl-tick-seconds."},
    [NUMBERED] = {"numbered_messages_total", "counter",
                  "Numbered messages from masters not applied as they came, by reason: "
                  "duplicate (dropped), reordered (held for their turn), not_held (no room: "
                  "their master sends them again), untracked (applied unnumbered)."},
    [NUMBERED_SKIPPED] = {"numbered_skipped_total", "counter",
                          "Numbers of a master's stream given up: a hole not filled in 10 s, "
                          "or the master's run gone."},
    [NUMBERED_ACKS] = {"numbered_acks_total", "counter",
                       "Acknowledgements of numbered messages sent to masters."},
    [GAP_UIDS] = {"gap_uids_total", "counter",
                  "Uids told a gap: a master could not keep messages for them."},
    [GAP_TOPICS] = {"gap_topics_total", "counter",
                    "Topics told a gap: a master could not keep messages of them."},
    [PROXY_BAD_FORWARDED] = {"proxy_bad_forwarded_total", "counter",
                             "Requests from a --trusted-proxy whose X-Forwarded-For or X-Real-IP "
                             "named no address (the address before it was taken)."},
    [WS_DEFLATED] = {"websocket_deflated_total", "counter",
                     "Payloads compressed for permessage-deflate WebSockets, once per payload "
                     "and batch."},
    [WS_DEFLATE_IN] = {"websocket_deflate_in_bytes_total", "counter",
                       "Bytes of those payloads before compression."},
    [WS_DEFLATE_OUT] = {"websocket_deflate_out_bytes_total", "counter",
                        "Bytes of those payloads compressed."},
    [WS_INFLATED] = {"websocket_inflated_total", "counter",
                     "Compressed client messages inflated."},
    [WS_INFLATE_TOO_BIG] = {"websocket_inflate_too_big_total", "counter",
                            "Compressed client messages past --max-client-message inflated "
                            "(closed 1009)."},
    [TOPICS] = {"topics", "gauge", "Topics held: subscribed to, or lingering for resumes."},
    [TOPIC_SUBSCRIPTIONS] = {"topic_subscriptions", "gauge", "Subscriptions of streams to topics."},
    [TOPIC_JOINS] = {"topic_joins_total", "counter", "Subscriptions to topics made."},
    [TOPIC_LEAVES] = {"topic_leaves_total", "counter", "Subscriptions to topics ended."},
    [TOPICS_GIVEN_UP] = {"topics_given_up_total", "counter",
                         "Topics given up: no stream for their linger time."},
    [TOPIC_PUBLISHED] = {"topic_published_total", "counter",
                         "Messages published to a topic held here."},
    [TOPIC_REFUSED] = {"topic_refused_total", "counter", "Joins of topics refused, by reason."},
    [TOPIC_ASKS] = {"topic_asks_total", "counter",
                    "Joins asked of the --inbox handler (--topic-auth handler), by outcome."},
    [TOPIC_PRESENCE_DROPPED] = {"topic_presence_dropped_total", "counter",
                                "Topic presence entries lost to a full outbox (repaired by a "
                                "snapshot)."},
    [LINGERING] = {"lingering_sockets", "gauge",
                   "Closed connections whose last input is read before the close, so that the "
                   "client gets the last bytes."},
    [LINGER_FULL] = {"linger_full_total", "counter",
                     "Connections closed at once: every lingering slot was busy."},
};

/* Each sample: its family, its reason label (NULL for none) and the
 * stats_collect counter that gives its value. */
static const struct sample {
    enum family family;
    const char *reason;
    const char *stat;
} samples[] = {
    {STREAMS_OPEN, NULL, "streams_open"},
    {UIDS_ONLINE, NULL, "uids_online"},
    {BACKLOG_BYTES, NULL, "backlog_bytes"},
    {INPUT_BYTES, NULL, "input_bytes"},
    {ERLANG_NODES, NULL, "erl_nodes"},
    {RESIDENT_MEMORY, NULL, "memory"},
    {STREAMS_OPENED, NULL, "streams_total"},
#define CLOSED(counter, name, label, word) {STREAMS_CLOSED, label, #counter},
    END_REASONS(CLOSED)
#undef CLOSED
    {MESSAGES_RECEIVED, NULL, "msgs_in"},
    {MESSAGES_DROPPED, "no_conn", "dropped_no_conn"},
    {MESSAGES_DROPPED, "bad_term", "bad_terms"},
    {MESSAGES_DROPPED, "bad_uid", "bad_uid"},
    {MESSAGES_DROPPED, "too_big", "too_big"},
    {MESSAGES_DROPPED, "empty", "empty"},
    {MESSAGES_DROPPED, "not_utf8", "not_utf8"},
    {MESSAGES_DROPPED, "bad_topic", "bad_topic"},
    {MESSAGES_DROPPED, "topic_not_held", "topic_no_subscribers"},
    {MESSAGES_DROPPED, "topic_conn_unknown", "topic_conn_unknown"},
    {DELIVERIES, NULL, "deliveries"},
    {BYTES_OUT, NULL, "bytes_out"},
    {HTTP_REJECTED, "not_found", "http_not_found"},
    {HTTP_REJECTED, "too_big", "http_too_big"},
    {HTTP_REJECTED, "bad_method", "http_bad_method"},
    {HTTP_REJECTED, "no_fds", "http_no_fds"},
    {HTTP_REJECTED, "draining", "http_draining"},
    {HTTP_REJECTED, "header_timeout", "http_header_timeout"},
    {HTTP_REJECTED, "bad_origin", "http_bad_origin"},
    {HTTP_REJECTED, "bad_framing", "http_bad_framing"},
    {HTTP_REJECTED, "shed", "http_shed"},
    {HTTP_REJECTED, "ws_handshake", "ws_refused"},
    {HTTP_REJECTED, "auth_missing", "auth_missing"},
    {HTTP_REJECTED, "auth_expired", "auth_expired"},
    {HTTP_REJECTED, "auth_bad", "auth_bad"},
    {REPLIES_DROPPED, NULL, "replies_dropped"},
    {ERLANG_CONNECTS, NULL, "erl_connects"},
    {ERLANG_REFUSED, NULL, "erl_refused"},
    {BACKPRESSURE, NULL, "backpressure"},
    {HISTORY_BYTES, NULL, "history_bytes"},
    {HISTORY_ENTRIES, NULL, "history_entries"},
    {HISTORY_EVICTED, NULL, "history_evicted"},
    {HISTORY_MOVED, NULL, "history_moved"},
    {HISTORY_TOPIC_TRIMMED, NULL, "topic_history_trimmed"},
    {MULTICAST_REPEATS, NULL, "multicast_repeats"},
    {REPLAYS, NULL, "replays"},
    {REPLAYED, NULL, "replayed"},
    {REPLAY_GAPS, NULL, "replay_gaps"},
    {WS_IGNORED, NULL, "ws_ignored"},
    {CLIENT_POSTS, "accepted", "post_in"},
    {CLIENT_POSTS, "no_inbox", "post_no_inbox"},
    {CLIENT_POSTS, "bad_type", "post_bad_type"},
    {CLIENT_POSTS, "bad_conn", "post_bad_conn"},
    {CLIENT_POSTS, "too_big", "post_too_big"},
    {CLIENT_POSTS, "rate", "post_rate"},
    {CLIENT_POSTS, "busy", "post_busy"},
    {ERLANG_MASTERS, NULL, "erl_masters"},
    {CLIENT_IN, NULL, "client_in"},
    {CLIENT_DROPPED, "outbox_full", "client_in_dropped"},
    {CLIENT_DROPPED, "no_master", "in_no_master"},
    {CLIENT_DROPPED, "parked_full", "in_park_dropped"},
    {CLIENT_PAUSED, NULL, "client_paused"},
    {CONN_SENT, NULL, "conn_sent"},
    {CONN_DROPPED, NULL, "conn_dropped"},
    {CONN_EMPTY_DROPPED, NULL, "conn_empty_dropped"},
    {PRESENCE_DROPPED, NULL, "presence_dropped"},
    {CONN_EVENTS_DROPPED, NULL, "conn_events_dropped"},
    {INBOX_RESETS, NULL, "in_resets"},
    {INBOX_RESET_UNACKED, NULL, "in_reset_unacked"},
    {INBOX_WINDOWS_STUCK, NULL, "in_windows_stuck"},
    {ERLANG_SILENT, NULL, "erl_silent_masters"},
    {NUMBERED, "duplicate", "seq_duplicates"},
    {NUMBERED, "reordered", "seq_reordered"},
    {NUMBERED, "not_held", "seq_held_dropped"},
    {NUMBERED, "untracked", "seq_untracked"},
    {NUMBERED_SKIPPED, NULL, "seq_skipped"},
    {NUMBERED_ACKS, NULL, "seq_acks"},
    {GAP_UIDS, NULL, "seq_gap_uids"},
    {GAP_TOPICS, NULL, "seq_gap_topics"},
    {PROXY_BAD_FORWARDED, NULL, "proxy_bad_forwarded"},
    {WS_DEFLATED, NULL, "ws_deflated"},
    {WS_DEFLATE_IN, NULL, "ws_deflate_in_bytes"},
    {WS_DEFLATE_OUT, NULL, "ws_deflate_out_bytes"},
    {WS_INFLATED, NULL, "ws_inflated"},
    {WS_INFLATE_TOO_BIG, NULL, "ws_inflate_too_big"},
    {TOPICS, NULL, "topics"},
    {TOPIC_SUBSCRIPTIONS, NULL, "topic_subscriptions"},
    {TOPIC_JOINS, NULL, "topic_joins"},
    {TOPIC_LEAVES, NULL, "topic_leaves"},
    {TOPICS_GIVEN_UP, NULL, "topics_given_up"},
    {TOPIC_PUBLISHED, NULL, "topic_published"},
    {TOPIC_REFUSED, "bad_name", "topic_refused_name"},
    {TOPIC_REFUSED, "too_many_topics", "topic_refused_stream_full"},
    {TOPIC_REFUSED, "topic_full", "topic_refused_topic_full"},
    {TOPIC_REFUSED, "no_room", "topic_refused_no_room"},
    {TOPIC_REFUSED, "denied", "topic_refused_denied"},
    {TOPIC_REFUSED, "no_memory", "topic_refused_no_memory"},
    {TOPIC_ASKS, "asked", "topic_asks"},
    {TOPIC_ASKS, "allowed", "topic_asks_allowed"},
    {TOPIC_ASKS, "refused", "topic_asks_refused"},
    {TOPIC_ASKS, "not_sent", "topic_asks_dropped"},
    {TOPIC_PRESENCE_DROPPED, NULL, "topic_presence_dropped"},
    {LINGERING, NULL, "lingering"},
    {LINGER_FULL, NULL, "linger_full"},
};
#define NSAMPLES (sizeof samples / sizeof samples[0])

#define PREFIX "httpdcnode_"

static const struct stat_pair *find_stat(const struct stat_pair *pairs, size_t n,
                                         const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(pairs[i].name, name) == 0)
            return &pairs[i];
    return NULL;
}

const char *metrics_unknown_stat(void)
{
    struct stat_pair pairs[STATS_MAX_PAIRS];
    size_t n = stats_collect(pairs);
    for (size_t i = 0; i < NSAMPLES; i++)
        if (!find_stat(pairs, n, samples[i].stat))
            return samples[i].stat;
    return NULL;
}

void metrics_list(FILE *out)
{
    struct stat_pair pairs[STATS_MAX_PAIRS];
    size_t n = stats_collect(pairs);
    for (size_t i = 0; i < n; i++)
        fprintf(out, "counter %s\n", pairs[i].name);
    for (int f = 0; f < FAMILIES; f++) {
        fprintf(out, "metric " PREFIX "%s %s\n", families[f].name, families[f].type);
        for (size_t i = 0; i < NSAMPLES; i++)
            if (samples[i].family == (enum family)f && samples[i].reason)
                fprintf(out, "label " PREFIX "%s reason=%s\n", families[f].name, samples[i].reason);
    }
    fprintf(out, "metric " PREFIX "delivery_seconds histogram\n");
}

/* An output buffer that remembers running out of room. */
struct out {
    char *buf;
    size_t size, len;
    int full;
};

__attribute__((format(printf, 2, 3))) static void put(struct out *o, const char *fmt, ...)
{
    if (o->full)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(o->buf + o->len, o->size - o->len, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= o->size - o->len)
        o->full = 1;
    else
        o->len += (size_t)k;
}

static void put_head(struct out *o, const char *name, const char *type, const char *help)
{
    put(o, "# HELP " PREFIX "%s %s\n# TYPE " PREFIX "%s %s\n", name, help, name, type);
}

static void put_family(struct out *o, enum family f, const struct stat_pair *pairs, size_t n)
{
    put_head(o, families[f].name, families[f].type, families[f].help);
    for (size_t i = 0; i < NSAMPLES; i++) {
        const struct sample *s = &samples[i];
        const struct stat_pair *p = s->family == f ? find_stat(pairs, n, s->stat) : NULL;
        if (!p)
            continue;
        if (s->reason)
            put(o, PREFIX "%s{reason=\"%s\"} %llu\n", families[f].name, s->reason,
                (unsigned long long)p->value);
        else
            put(o, PREFIX "%s %llu\n", families[f].name, (unsigned long long)p->value);
    }
}

static void put_delivery_time(struct out *o)
{
    const struct delivery_time *d = &delivery_time;
    put_head(o, "delivery_seconds", "histogram",
             "Seconds from the C-node receiving a message to the end of the batch write "
             "that carried it, per delivery.");
    uint64_t cum = 0;
    for (int i = 0; i < DELIVERY_BUCKETS; i++) {
        cum += d->bucket[i];
        put(o, PREFIX "delivery_seconds_bucket{le=\"%s\"} %llu\n", delivery_bounds[i].le,
            (unsigned long long)cum);
    }
    put(o, PREFIX "delivery_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)d->count);
    put(o, PREFIX "delivery_seconds_sum %llu.%09llu\n",
        (unsigned long long)(d->sum_ns / 1000000000u),
        (unsigned long long)(d->sum_ns % 1000000000u));
    put(o, PREFIX "delivery_seconds_count %llu\n", (unsigned long long)d->count);
}

size_t metrics_format(char *buf, size_t size)
{
    struct stat_pair pairs[STATS_MAX_PAIRS];
    size_t n = stats_collect(pairs);
    struct out o = {.buf = buf, .size = size};
    for (int f = 0; f < FAMILIES; f++)
        put_family(&o, (enum family)f, pairs, n);
    put_delivery_time(&o);
    return o.full ? 0 : o.len;
}
