/* SPDX-License-Identifier: Apache-2.0 */
/* WebSocket handshake answer and server frames: see ws_parser.h. */
#include "ws_parser.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <wslay/wslay.h>

/* --- the handshake answer -------------------------------------------------- */

enum {
    H_PROTO, H_VERSION, H_STATUS, H_REASON, H_LINE, H_NAME, H_VALUE_SP, H_VALUE, H_VALUE_END,
    H_SKIP, H_END, H_STATUS_DONE, H_ERROR
};

/* The headers checked, and the value each must have. */
enum { HD_UPGRADE, HD_CONNECTION, HD_ACCEPT, HD_PROTOCOL, HD_COUNT, HD_NONE = HD_COUNT };
static const char *const k_names[HD_COUNT] = {
    "upgrade", "connection", "sec-websocket-accept", "sec-websocket-protocol"};
static const char *const k_values[HD_COUNT] = {"websocket", "upgrade", WS_ACCEPT, WS_PROTOCOL};
/* Upgrade and Connection compare without case; Connection is a list, so
 * "upgrade" may be one of its tokens (matched as a substring). */
#define ALL_GOT ((1u << HD_COUNT) - 1)

static const char k_proto[] = "HTTP/1.";

static unsigned lower(unsigned c)
{
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* ws_parser.state */
enum { WS_S_HANDSHAKE, WS_S_HEAD, WS_S_PAYLOAD, WS_S_CLOSED, WS_S_ERROR };

void ws_parser_init(struct ws_parser *p)
{
    p->state = WS_S_HANDSHAKE;
    p->carry_len = 0;
    p->u.hs.status = 0;
    p->u.hs.state = H_PROTO;
    p->u.hs.pos = 0;
    p->u.hs.header = HD_NONE;
    p->u.hs.got = 0;
}

int ws_parser_upgraded(const struct ws_parser *p)
{
    return p->state != WS_S_HANDSHAKE;
}

int ws_parser_open(const struct ws_parser *p)
{
    return p->state == WS_S_HEAD || p->state == WS_S_PAYLOAD;
}

unsigned ws_parser_status(const struct ws_parser *p)
{
    return ws_parser_upgraded(p) ? 101 : p->u.hs.status;
}

unsigned ws_parser_close_code(const struct ws_parser *p)
{
    return p->state == WS_S_CLOSED ? p->u.fr.remain : 0;
}

/* Header names: the first byte picks the candidate (u, c, s), and the two
 * sec-websocket-* names part at byte 14. pos counts the name's bytes. */
static void hs_name_byte(struct ws_handshake *h, unsigned c)
{
    if (h->pos == 0) {
        h->header = c == 'u' ? HD_UPGRADE : c == 'c' ? HD_CONNECTION
                  : c == 's' ? HD_ACCEPT : HD_NONE;
    } else if (h->header == HD_ACCEPT && h->pos == 14 && c == 'p') {
        h->header = HD_PROTOCOL;
    }
    if (h->header != HD_NONE && (h->pos >= 40 || (unsigned char)k_names[h->header][h->pos] != c))
        h->header = HD_NONE;
    if (h->pos < 255)
        h->pos++;
}

static void hs_value_byte(struct ws_handshake *h, unsigned c)
{
    const char *want = k_values[h->header];
    if (h->header == HD_CONNECTION) {
        /* "upgrade" has no repeated prefix: a mismatch restarts at 0 or 1. */
        if (h->pos == 7)
            return;
        c = lower(c);
        if (c == (unsigned char)want[h->pos])
            h->pos++;
        else
            h->pos = c == 'u' ? 1 : 0;
        return;
    }
    if (h->header == HD_UPGRADE)
        c = lower(c);
    if (h->pos < 64 && want[h->pos] != '\0' && (unsigned char)want[h->pos] == c)
        h->pos++;
    else
        h->pos = 0xff;          /* no match possible any more */
}

static void hs_value_end(struct ws_handshake *h)
{
    const char *want = k_values[h->header];
    unsigned len = 0;
    while (want[len])
        len++;
    if (h->pos == len)
        h->got |= (uint8_t)(1u << h->header);
    h->header = HD_NONE;
}

/* One byte of the answer's head. Returns 1 when the head is complete. */
static int hs_byte(struct ws_handshake *h, unsigned c)
{
    switch (h->state) {
    case H_PROTO:
        if (c != (unsigned char)k_proto[h->pos])
            goto bad;
        if (++h->pos == sizeof k_proto - 1)
            h->state = H_VERSION;
        break;
    case H_VERSION:
        if (c < '0' || c > '9')
            goto bad;
        h->state = H_STATUS;
        h->pos = 0;
        break;
    case H_STATUS:
        if (h->pos == 0 && c == ' ')
            break;
        if (c >= '0' && c <= '9' && h->pos < 3) {
            h->status = (uint16_t)(h->status * 10 + (c - '0'));
            h->pos++;
        } else if (h->pos == 3 && (c == ' ' || c == '\r' || c == '\n')) {
            h->state = c == '\n' ? H_LINE : H_REASON;
        } else {
            goto bad;
        }
        break;
    case H_REASON:
    case H_SKIP:
        if (c == '\n')
            h->state = H_LINE;
        break;
    case H_LINE:
        if (c == '\r') {
            h->state = H_END;
        } else if (c == '\n') {
            return 1;
        } else {
            h->state = H_NAME;
            h->pos = 0;
            hs_name_byte(h, lower(c));
        }
        break;
    case H_NAME:
        if (c == ':') {
            if (h->header != HD_NONE && k_names[h->header][h->pos] == '\0') {
                h->state = H_VALUE_SP;
                h->pos = 0;
            } else {
                h->state = H_SKIP;
            }
        } else if (c == '\n') {
            goto bad;
        } else {
            hs_name_byte(h, lower(c));
        }
        break;
    case H_VALUE_SP:
        if (c == ' ' || c == '\t')
            break;
        h->state = H_VALUE;
        /* fall through */
    case H_VALUE:
        /* Connection's value is a list: only its end ends it. */
        if (c == '\r' || c == '\n' || ((c == ' ' || c == '\t') && h->header != HD_CONNECTION)) {
            hs_value_end(h);
            h->state = c == '\n' ? H_LINE : H_VALUE_END;
        } else {
            hs_value_byte(h, c);
        }
        break;
    case H_VALUE_END:
        if (c == '\n')
            h->state = H_LINE;
        else if (c != '\r' && c != ' ' && c != '\t')
            goto bad;               /* a second word where one value was wanted */
        break;
    case H_END:
        if (c != '\n')
            goto bad;
        return 1;
    default:
        goto bad;
    }
    return 0;
bad:
    h->state = H_ERROR;
    return -1;
}


/* --- wslay: one frame context for every connection ----------------------- */

#define OP_CONT WSLAY_CONTINUATION_FRAME
#define OP_TEXT WSLAY_TEXT_FRAME
#define OP_BINARY WSLAY_BINARY_FRAME
#define OP_CLOSE WSLAY_CONNECTION_CLOSE
#define OP_PING WSLAY_PING
#define OP_PONG WSLAY_PONG
#define FIN 0x80u
/* Frames longer than this are taken as garbage (the server's largest
 * message is 8 MiB). */
#define MAX_FRAME 0x7fffffffu
#define CTL_MAX 125u

static wslay_frame_context_ptr g_ctx;

/* What the receive callback gives wslay: a whole header (p, left), then
 * skip bytes of payload that it counts without copying them. */
static struct {
    const uint8_t *p;
    size_t left;
    uint64_t skip;
} g_in;

/* What the send callback collects: one frame, a pong at most. */
static struct {
    uint8_t b[2 + 4 + CTL_MAX];
    size_t len;
} g_out;

static uint32_t g_mask;

static ssize_t ctx_recv(uint8_t *buf, size_t len, int flags, void *user)
{
    (void)flags;
    (void)user;
    size_t n;
    if (g_in.left) {
        n = len < g_in.left ? len : g_in.left;
        memcpy(buf, g_in.p, n);
        g_in.p += n;
        g_in.left -= n;
        return (ssize_t)n;
    }
    /* Payload: wslay reads no byte of an unmasked one, so buf is left as
     * it is; the payload itself is read in place from the socket's bytes. */
    n = len < g_in.skip ? len : (size_t)g_in.skip;
    g_in.skip -= n;
    return n ? (ssize_t)n : -1;
}

static ssize_t ctx_send(const uint8_t *data, size_t len, int flags, void *user)
{
    (void)flags;
    (void)user;
    if (len > sizeof g_out.b - g_out.len)
        return -1;
    memcpy(g_out.b + g_out.len, data, len);
    g_out.len += len;
    return (ssize_t)len;
}

/* xorshift32, seeded once per process: RFC 6455 wants masks that a page's
 * script cannot guess; a load client only needs them to vary. */
static int ctx_genmask(uint8_t *buf, size_t len, void *user)
{
    (void)user;
    for (size_t i = 0; i < len; i++) {
        if (i % 4 == 0) {
            g_mask ^= g_mask << 13;
            g_mask ^= g_mask >> 17;
            g_mask ^= g_mask << 5;
        }
        buf[i] = (uint8_t)(g_mask >> (8 * (i % 4)));
    }
    return 0;
}

/* The context, made at first use in each (worker) process. */
static int ctx_ready(void)
{
    static const struct wslay_frame_callbacks callbacks = {ctx_send, ctx_recv, ctx_genmask};
    if (g_ctx)
        return 1;
    while (!g_mask)
        if (getrandom(&g_mask, sizeof g_mask, GRND_NONBLOCK) != (ssize_t)sizeof g_mask)
            g_mask = ((uint32_t)time(NULL) ^ (uint32_t)getpid() << 16) | 1u;
    return wslay_frame_context_init(&g_ctx, &callbacks, NULL) == 0;
}

/* After an error the context may hold part of a header: wslay has no reset. */
static void ctx_reset(void)
{
    wslay_frame_context_free(g_ctx);
    g_ctx = NULL;
}

/* Decodes the whole header h[0..hl) and lets wslay count the payload, so
 * that its context is at a frame's start again. One payload byte first:
 * wslay tells the header only with payload, if there is any. */
static int decode_header(const uint8_t *h, size_t hl, struct wslay_frame_iocb *io)
{
    if (!ctx_ready())
        return -1;
    g_in.p = h;
    g_in.left = hl;
    g_in.skip = 1;
    ssize_t r = wslay_frame_recv(g_ctx, io);
    if (r < 0 || g_in.left || io->payload_length > MAX_FRAME)
        goto bad;
    uint64_t left = io->payload_length - (uint64_t)r;
    g_in.skip = left;
    while (left) {
        struct wslay_frame_iocb more;
        r = wslay_frame_recv(g_ctx, &more);
        if (r <= 0)
            goto bad;
        left -= (uint64_t)r;
    }
    return 0;
bad:
    ctx_reset();
    return -1;
}

/* A masked frame of ours into g_out. */
static int build_frame(unsigned op, const uint8_t *payload, size_t n)
{
    struct wslay_frame_iocb io = {.fin = 1, .opcode = (uint8_t)op, .mask = 1,
                                  .payload_length = n, .data = payload, .data_length = n};
    if (!ctx_ready())
        return -1;
    g_out.len = 0;
    if (wslay_frame_send(g_ctx, &io) != (ssize_t)n) {
        ctx_reset();
        return -1;
    }
    return 0;
}

size_t ws_parser_close_frame(uint8_t out[WS_CLOSE_FRAME_LEN], uint16_t code)
{
    const uint8_t payload[2] = {(uint8_t)(code >> 8), (uint8_t)code};
    if (build_frame(OP_CLOSE, payload, 2) != 0 || g_out.len != WS_CLOSE_FRAME_LEN)
        return 0;
    memcpy(out, g_out.b, WS_CLOSE_FRAME_LEN);
    return WS_CLOSE_FRAME_LEN;
}

/* --- a connection's frames ------------------------------------------------ */

/* msg: the message's opcode, and whether its prefix said "event: gap". */
#define MSG_OP 0x0fu
#define MSG_GAP 0x80u
#define MSG_CONN 0x40u          /* "event: conn": the answer of a {conn, Conn, Data} */
#define MSG_OTHER 0x20u         /* another "event:" (a topic's joined, refused, left) */

/* The prefix of a data message, a line at a time: "id: " then the id,
 * "event:" then " gap" or " conn" (the space optional, as in SSE), other
 * lines skipped, a blank line before the body. meta = state << 4 | position. */
enum { M_LINE, M_NAME_ID, M_NAME_EVENT, M_ID, M_EVENT, M_EVENT_END, M_SKIP, M_BODY, M_CONN,
       M_CONN_END };
#define META(state, pos) ((uint8_t)((unsigned)(state) << 4 | (pos)))

static int is_control(unsigned op)
{
    return op >= 0x8u;
}

static unsigned opcode(const struct ws_parser *p)
{
    return p->head & 0x0fu;
}

static void upgrade(struct ws_parser *p)
{
    stamp_start(&p->u.fr.ts);
    id_start(&p->u.fr.id);
    p->u.fr.remain = 0;
    p->state = WS_S_HEAD;
    p->carry_len = 0;
    p->head = 0;
    p->msg = 0;
    p->meta = META(M_LINE, 0);
    p->utf8 = 0;
}

/* A cut control frame longer than the carry: its payload is on the heap. */
static int ctl_on_heap(const struct ws_parser *p)
{
    return p->state == WS_S_PAYLOAD && is_control(opcode(p)) && p->carry_len &&
           p->carry_len + p->u.fr.remain > WS_HEADER_MAX;
}

static uint8_t *ctl_heap(const struct ws_parser *p)
{
    uint8_t *buf;
    _Static_assert(sizeof buf <= WS_HEADER_MAX, "the carry holds a pointer");
    memcpy(&buf, p->carry, sizeof buf);
    return buf;
}

void ws_parser_release(struct ws_parser *p)
{
    if (ctl_on_heap(p))
        free(ctl_heap(p));
    p->carry_len = 0;
    p->state = WS_S_ERROR;
}

static void message_start(struct ws_parser *p, unsigned op)
{
    p->msg = (uint8_t)op;
    p->meta = META(M_LINE, 0);
    p->utf8 = 0;
    id_start(&p->u.fr.id);
    stamp_start(&p->u.fr.ts);
    p->u.fr.ts.phase = STAMP_NONE;      /* until the prefix ends */
}

/* The header is decoded: checks what wslay's frame API leaves to its user. */
static int frame_begin(struct ws_parser *p, const uint8_t *h, size_t hl)
{
    struct wslay_frame_iocb io;
    if (decode_header(h, hl, &io) != 0)
        return -1;
    unsigned op = io.opcode;
    if (io.rsv || io.mask)
        return -1;
    if (is_control(op)) {
        if (op != OP_CLOSE && op != OP_PING && op != OP_PONG)
            return -1;
    } else if (op == OP_CONT) {
        if (!(p->msg & MSG_OP))
            return -1;                  /* a continuation of nothing */
    } else if (op == OP_TEXT || op == OP_BINARY) {
        if (p->msg & MSG_OP)
            return -1;                  /* a new message inside another one */
        message_start(p, op);
    } else {
        return -1;
    }
    p->head = (uint8_t)((io.fin ? FIN : 0) | op);
    p->u.fr.remain = (uint32_t)io.payload_length;
    p->state = WS_S_PAYLOAD;
    return 0;
}

/* The next header from the carry and b[*i..len): decoded once whole, else
 * carried (*i = len). 0 or -1 on a bad frame. */
static int header(struct ws_parser *p, const uint8_t *b, size_t len, size_t *i)
{
    size_t have = p->carry_len, avail = len - *i;
    if (have + avail < 2)
        goto carry;
    unsigned second = have >= 2 ? p->carry[1] : b[*i + 1 - have];
    if (second & 0x80u)
        return -1;                      /* a server never masks (RFC 6455 5.1) */
    second &= 0x7fu;
    size_t hl = 2u + (second == 126 ? 2u : second == 127 ? 8u : 0u);
    if (have + avail < hl)
        goto carry;
    const uint8_t *h = b + *i;
    size_t take = hl - have;
    if (have) {
        memcpy(p->carry + have, b + *i, take);
        h = p->carry;
    }
    *i += take;
    p->carry_len = 0;
    return frame_begin(p, h, hl);
carry:
    memcpy(p->carry + have, b + *i, avail);
    p->carry_len = (uint8_t)(have + avail);
    *i = len;
    return 0;
}

/* One byte of a data message's prefix, or of its body while the stamp is
 * still open. */
static void meta_byte(struct ws_parser *p, unsigned c)
{
    static const char id_name[] = "id: ", event_name[] = "event:", gap[] = " gap",
                      conn[] = " conn";
    unsigned state = p->meta >> 4, pos = p->meta & 0x0fu;
    if (state == M_BODY) {
        stamp_byte(&p->u.fr.ts, c);
        return;
    }
    if (c == '\n') {
        if (state == M_LINE) {
            p->meta = META(M_BODY, 0);
            stamp_start(&p->u.fr.ts);
            return;
        }
        if (state == M_EVENT_END)
            p->msg |= MSG_GAP;
        else if (state == M_CONN_END)
            p->msg |= MSG_CONN;
        else if (state == M_EVENT || state == M_CONN)
            p->msg |= MSG_OTHER;        /* "ga", "co": a shorter name */
        p->meta = META(M_LINE, 0);
        return;
    }
    switch (state) {
    case M_LINE:
        p->meta = c == 'i' ? META(M_NAME_ID, 1) : c == 'e' ? META(M_NAME_EVENT, 1) : META(M_SKIP, 0);
        break;
    case M_NAME_ID:
        if (c != (unsigned char)id_name[pos])
            p->meta = META(M_SKIP, 0);
        else if (++pos == sizeof id_name - 1)
            p->meta = META(M_ID, 0), id_start(&p->u.fr.id);
        else
            p->meta = META(M_NAME_ID, pos);
        break;
    case M_NAME_EVENT:
        if (c != (unsigned char)event_name[pos])
            p->meta = META(M_SKIP, 0);
        else
            p->meta = ++pos == sizeof event_name - 1 ? META(M_EVENT, 0) : META(M_NAME_EVENT, pos);
        break;
    case M_EVENT:
        if (pos == 0 && (c == 'g' || c == 'c'))
            pos = 1;                    /* no space after the colon */
        if (pos == 1 && c == 'c') {
            p->meta = META(M_CONN, 2);
            break;
        }
        if (c != (unsigned char)gap[pos])
            p->meta = META(M_SKIP, 0), p->msg |= MSG_OTHER;
        else
            p->meta = ++pos == sizeof gap - 1 ? META(M_EVENT_END, 0) : META(M_EVENT, pos);
        break;
    case M_ID:
        id_byte(&p->u.fr.id, c);
        break;
    case M_CONN:
        if (c != (unsigned char)conn[pos])
            p->meta = META(M_SKIP, 0), p->msg |= MSG_OTHER;
        else
            p->meta = ++pos == sizeof conn - 1 ? META(M_CONN_END, 0) : META(M_CONN, pos);
        break;
    case M_EVENT_END:                   /* "gap" and more: another event */
    case M_CONN_END:
        p->meta = META(M_SKIP, 0), p->msg |= MSG_OTHER;
        break;
    default:                            /* M_SKIP */
        break;
    }
}

static void message_done(struct ws_parser *p, const struct ws_callbacks *cb, void *ctx)
{
    struct ws_message m;
    m.text = (p->msg & MSG_OP) == OP_TEXT;
    m.gap = (p->msg & MSG_GAP) != 0;
    m.reply = !m.gap && (p->msg & MSG_CONN) != 0;
    m.other = !m.gap && !m.reply && (p->msg & MSG_OTHER) != 0;
    m.has_id = !m.gap && !m.reply && !m.other && id_ok(&p->u.fr.id) && p->meta >> 4 == M_BODY;
    m.bad_id = !m.gap && !m.reply && !m.other && !m.has_id;
    m.epoch = p->u.fr.id.epoch;
    m.seq = p->u.fr.id.seq;
    m.topic = p->u.fr.id.topic;
    m.has_ts = stamp_found(&p->u.fr.ts);
    m.ts = p->u.fr.ts.ts;
    m.has_n = p->u.fr.ts.has_n;
    m.n = p->u.fr.ts.n;
    p->msg = 0;
    if (cb->on_message)
        cb->on_message(ctx, &m);
}

/* n bytes of a data frame's payload: the prefix and the stamp byte by byte,
 * the rest only checked as UTF-8 (text) or not looked at (binary). */
static enum ws_result data_bytes(struct ws_parser *p, const uint8_t *b, size_t n,
                                 const struct ws_callbacks *cb, void *ctx)
{
    int text = (p->msg & MSG_OP) == OP_TEXT;
    for (size_t i = 0; i < n; i++) {
        if (text && !utf8_byte(&p->utf8, b[i]))
            return WS_ERROR;
        if (p->meta >> 4 != M_BODY || stamp_open(&p->u.fr.ts))
            meta_byte(p, b[i]);
        else if (!text)
            break;
    }
    p->u.fr.remain -= (uint32_t)n;
    if (p->u.fr.remain)
        return WS_MORE;
    p->state = WS_S_HEAD;
    if (p->head & FIN) {
        if (text && !utf8_complete(p->utf8))
            return WS_ERROR;
        message_done(p, cb, ctx);
    }
    return WS_MORE;
}

/* Answers with a masked frame through cb->send. */
static int answer(unsigned op, const uint8_t *payload, size_t n, const struct ws_callbacks *cb,
                  void *ctx)
{
    if (build_frame(op, payload, n) != 0)
        return -1;
    if (cb->send)
        cb->send(ctx, g_out.b, g_out.len);
    return 0;
}

/* A whole control frame's payload: a ping is answered with a pong of the
 * same payload, a close with a close of its code. */
static enum ws_result control_done(struct ws_parser *p, const uint8_t *pl, size_t n,
                                   const struct ws_callbacks *cb, void *ctx)
{
    unsigned op = opcode(p);
    p->state = WS_S_HEAD;
    if (op == OP_PING)
        return answer(OP_PONG, pl, n, cb, ctx) == 0 ? WS_MORE : WS_ERROR;
    if (op != OP_CLOSE)
        return WS_MORE;                 /* a pong: nothing to do */
    unsigned code = n >= 2 ? (unsigned)pl[0] << 8 | pl[1] : 1005;
    (void)answer(OP_CLOSE, pl, n >= 2 ? 2 : 0, cb, ctx);
    p->u.fr.remain = code;
    p->state = WS_S_CLOSED;
    return WS_CLOSED;
}

/* A control frame's payload bytes: used in place when the frame is whole
 * in this read, else kept until it is. *used: bytes of b taken. */
static enum ws_result control_bytes(struct ws_parser *p, const uint8_t *b, size_t avail,
                                    size_t *used, const struct ws_callbacks *cb, void *ctx)
{
    uint32_t remain = p->u.fr.remain;
    size_t total = p->carry_len + (size_t)remain;
    *used = 0;
    if (p->carry_len == 0 && avail >= remain) {
        *used = remain;
        p->u.fr.remain = 0;
        return control_done(p, b, remain, cb, ctx);
    }
    if (avail == 0)
        return WS_MORE;
    uint8_t *buf = p->carry;
    if (total > WS_HEADER_MAX) {
        if (p->carry_len) {
            buf = ctl_heap(p);
        } else {
            buf = malloc(CTL_MAX);
            if (!buf)
                return WS_ERROR;
            memcpy(p->carry, &buf, sizeof buf);
        }
    }
    size_t n = avail < remain ? avail : remain;
    memcpy(buf + p->carry_len, b, n);
    p->carry_len = (uint8_t)(p->carry_len + n);
    p->u.fr.remain -= (uint32_t)n;
    *used = n;
    if (p->u.fr.remain)
        return WS_MORE;
    size_t len = p->carry_len;
    p->carry_len = 0;
    enum ws_result r = control_done(p, buf, len, cb, ctx);
    if (total > WS_HEADER_MAX)
        free(buf);
    return r;
}

static enum ws_result frames(struct ws_parser *p, const uint8_t *b, size_t len,
                             const struct ws_callbacks *cb, void *ctx)
{
    size_t i = 0;
    for (;;) {
        if (p->state == WS_S_PAYLOAD) {
            size_t avail = len - i, used = avail < p->u.fr.remain ? avail : p->u.fr.remain;
            enum ws_result r = is_control(opcode(p))
                                   ? control_bytes(p, b + i, avail, &used, cb, ctx)
                                   : data_bytes(p, b + i, used, cb, ctx);
            i += used;
            if (r != WS_MORE)
                return r;
            if (p->state == WS_S_PAYLOAD)
                return WS_MORE;         /* the frame goes on in a later read */
            continue;
        }
        if (i == len)
            return WS_MORE;
        if (header(p, b, len, &i) != 0)
            return WS_ERROR;
    }
}

enum ws_result ws_parser_feed(struct ws_parser *p, const char *buf, size_t len,
                       const struct ws_callbacks *cb, void *ctx, int *upgraded_now)
{
    const unsigned char *b = (const unsigned char *)buf;
    size_t i = 0;
    if (upgraded_now)
        *upgraded_now = 0;
    if (p->state == WS_S_HANDSHAKE) {
        struct ws_handshake *h = &p->u.hs;
        if (h->state == H_ERROR)
            return WS_ERROR;
        if (h->state == H_STATUS_DONE)
            return WS_STATUS;
        for (; i < len; i++) {
            int r = hs_byte(h, b[i]);
            if (r < 0)
                return WS_ERROR;
            if (r == 0)
                continue;
            if (h->status != 101) {
                h->state = H_STATUS_DONE;
                return WS_STATUS;
            }
            if (h->got != ALL_GOT) {
                h->state = H_ERROR;
                return WS_ERROR;
            }
            upgrade(p);
            if (upgraded_now)
                *upgraded_now = 1;
            i++;
            break;
        }
        if (p->state == WS_S_HANDSHAKE)
            return WS_MORE;
    }
    if (p->state == WS_S_ERROR)
        return WS_ERROR;
    if (p->state == WS_S_CLOSED)
        return WS_CLOSED;
    enum ws_result r = frames(p, b + i, len - i, cb, ctx);
    if (r == WS_ERROR) {
        ws_parser_release(p);           /* state: WS_S_ERROR, for good */
    }
    return r;
}
