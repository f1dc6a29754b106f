/* WebSocket handshake answer and server frames: see ws_parser.h. */
#include "ws_parser.h"

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

void ws_parser_init(struct ws_parser *p)
{
    p->upgraded = 0;
    p->close_code = 0;
    p->u.hs.status = 0;
    p->u.hs.state = H_PROTO;
    p->u.hs.pos = 0;
    p->u.hs.header = HD_NONE;
    p->u.hs.got = 0;
}

unsigned ws_parser_status(const struct ws_parser *p)
{
    return p->upgraded ? 101 : p->u.hs.status;
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

/* --- frames ------------------------------------------------------------------ */

enum { FR_HEAD, FR_LEN, FR_EXT, FR_PAYLOAD, FR_ERROR };
/* The id prefix of a data message: "id: " then the id then LF, other
 * lines skipped, a blank line before the payload. */
enum { M_LINE, M_NAME, M_ID, M_SKIP, M_BODY };

#define OP_CONT 0x0u
#define OP_TEXT 0x1u
#define OP_BINARY 0x2u
#define OP_CLOSE 0x8u
#define OP_PING 0x9u
#define OP_PONG 0xau
#define FIN 0x80u
#define RSV 0x70u
/* Frames longer than this are taken as garbage (the server's largest
 * message is 8 MiB). */
#define MAX_FRAME 0x7fffffffu

static void upgrade(struct ws_parser *p)
{
    struct ws_frames *f = &p->u.fr;
    p->upgraded = 1;
    stamp_start(&f->ts);
    id_start(&f->id);
    f->remain = 0;
    f->state = FR_HEAD;
    f->pos = 0;
    f->head = 0;
    f->msg = 0;
    f->meta = M_LINE;
    f->mpos = 0;
    f->ext = 0;
    f->utf8 = 0;
}

static unsigned opcode(const struct ws_frames *f)
{
    return f->head & 0x0fu;
}

static int is_control(unsigned op)
{
    return op >= 0x8u;
}

/* A frame's first byte: checks its opcode against the message state. */
static int frame_head(struct ws_frames *f, unsigned c)
{
    unsigned op = c & 0x0fu;
    if (c & RSV)
        return -1;
    if (is_control(op)) {
        if (op != OP_CLOSE && op != OP_PING && op != OP_PONG)
            return -1;
        if (!(c & FIN))
            return -1;              /* control frames are never fragmented */
    } else if (op == OP_CONT) {
        if (!f->msg)
            return -1;              /* a continuation of nothing */
    } else if (op == OP_TEXT || op == OP_BINARY) {
        if (f->msg)
            return -1;              /* a new message inside another one */
        f->msg = (uint8_t)op;
        f->meta = M_LINE;
        f->mpos = 0;
        f->utf8 = 0;
        id_start(&f->id);
        stamp_start(&f->ts);
        f->ts.phase = STAMP_NONE;   /* until the prefix ends */
    } else {
        return -1;
    }
    f->head = (uint8_t)c;
    return 0;
}

static void message_done(struct ws_frames *f, const struct ws_callbacks *cb, void *ctx)
{
    struct ws_message m;
    m.text = f->msg == OP_TEXT;
    m.has_id = id_ok(&f->id) && f->meta == M_BODY;
    m.bad_id = !m.has_id;
    m.epoch = f->id.epoch;
    m.seq = f->id.seq;
    m.has_ts = stamp_found(&f->ts);
    m.ts = f->ts.ts;
    f->msg = 0;
    if (cb->on_message)
        cb->on_message(ctx, &m);
}

/* One byte of a data message's payload, across its frames. */
static void meta_byte(struct ws_frames *f, unsigned c)
{
    static const char name[] = "id: ";
    switch (f->meta) {
    case M_LINE:
        if (c == '\n') {
            f->meta = M_BODY;
            stamp_start(&f->ts);
            break;
        }
        f->meta = M_NAME;
        f->mpos = 0;
        /* fall through */
    case M_NAME:
        if (c == (unsigned char)name[f->mpos]) {
            if (++f->mpos == sizeof name - 1) {
                f->meta = M_ID;
                id_start(&f->id);
            }
        } else {
            f->meta = c == '\n' ? M_LINE : M_SKIP;
        }
        break;
    case M_ID:
        if (c == '\n')
            f->meta = M_LINE;
        else
            id_byte(&f->id, c);
        break;
    case M_SKIP:
        if (c == '\n')
            f->meta = M_LINE;
        break;
    default:
        stamp_byte(&f->ts, c);
        break;
    }
}

/* The frame's payload is complete. Returns WS_CLOSED for a close frame. */
static enum ws_result frame_done(struct ws_parser *p, const struct ws_callbacks *cb, void *ctx)
{
    struct ws_frames *f = &p->u.fr;
    unsigned op = opcode(f);
    f->state = FR_HEAD;
    if (op == OP_CLOSE) {
        if (p->close_code == 0)
            p->close_code = 1005;   /* no status code in the frame */
        return WS_CLOSED;
    }
    if (!is_control(op) && (f->head & FIN)) {
        if (f->msg == OP_TEXT && !utf8_complete(f->utf8))
            return WS_ERROR;
        message_done(f, cb, ctx);
    }
    return WS_MORE;
}

/* Payload bytes: the prefix and the stamp byte by byte, the rest in bulk.
 * Returns how many of avail it took, or -1 on invalid UTF-8. */
static long payload(struct ws_parser *p, const unsigned char *b, size_t avail)
{
    struct ws_frames *f = &p->u.fr;
    size_t n = avail < f->remain ? avail : f->remain;
    unsigned op = opcode(f);
    if (op == OP_CLOSE) {
        /* The status code: the first two bytes of the payload. */
        for (size_t i = 0; i < n; i++, f->pos++)
            if (f->pos < 2)
                p->close_code = (uint16_t)(p->close_code << 8 | b[i]);
    } else if (!is_control(op)) {
        for (size_t i = 0; i < n; i++) {
            if (f->msg == OP_TEXT && !utf8_byte(&f->utf8, b[i]))
                return -1;
            if (f->meta != M_BODY || stamp_open(&f->ts))
                meta_byte(f, b[i]);
            else if (f->msg != OP_TEXT)
                break;              /* binary: nothing more to look at */
        }
    }
    f->remain -= (uint32_t)n;
    return (long)n;
}

/* The payload length's bytes: 7 bits in the second byte, then 2 or 8
 * more, big-endian, in their shortest form. */
static int length_byte(struct ws_frames *f, unsigned c)
{
    if (f->state == FR_LEN) {
        if (c & 0x80u)
            return -1;              /* server frames are never masked */
        c &= 0x7fu;
        if (is_control(opcode(f)) && c > 125)
            return -1;
        f->ext = c == 126 ? 2 : c == 127 ? 8 : 0;
        f->pos = f->ext;
        f->remain = c < 126 ? c : 0;
        f->state = f->ext ? FR_EXT : FR_PAYLOAD;
        return 0;
    }
    if (f->remain > (MAX_FRAME >> 8))
        return -1;
    f->remain = f->remain << 8 | c;
    if (--f->pos)
        return 0;
    f->state = FR_PAYLOAD;
    return f->ext == 2 ? (f->remain < 126 ? -1 : 0) : (f->remain <= 0xffffu ? -1 : 0);
}

static enum ws_result frames(struct ws_parser *p, const unsigned char *b, size_t len,
                             const struct ws_callbacks *cb, void *ctx)
{
    struct ws_frames *f = &p->u.fr;
    size_t i = 0;
    while (i < len || (f->state == FR_PAYLOAD && f->remain == 0)) {
        switch (f->state) {
        case FR_HEAD:
            if (frame_head(f, b[i++]) != 0)
                goto bad;
            f->state = FR_LEN;
            break;
        case FR_LEN:
        case FR_EXT:
            if (length_byte(f, b[i++]) != 0)
                goto bad;
            if (f->state == FR_PAYLOAD && is_control(opcode(f)))
                f->pos = 0;
            break;
        case FR_PAYLOAD:
            if (f->remain) {
                long n = payload(p, b + i, len - i);
                if (n < 0)
                    goto bad;
                i += (size_t)n;
            }
            if (f->remain == 0) {
                enum ws_result r = frame_done(p, cb, ctx);
                if (r != WS_MORE)
                    return r == WS_ERROR ? (f->state = FR_ERROR, WS_ERROR) : r;
            }
            break;
        default:
            return WS_ERROR;
        }
    }
    return WS_MORE;
bad:
    f->state = FR_ERROR;
    return WS_ERROR;
}

enum ws_result ws_parser_feed(struct ws_parser *p, const char *buf, size_t len,
                       const struct ws_callbacks *cb, void *ctx, int *upgraded_now)
{
    const unsigned char *b = (const unsigned char *)buf;
    size_t i = 0;
    if (upgraded_now)
        *upgraded_now = 0;
    if (!p->upgraded) {
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
        if (!p->upgraded)
            return WS_MORE;
    }
    if (p->u.fr.state == FR_ERROR)
        return WS_ERROR;
    return frames(p, b + i, len - i, cb, ctx);
}

void ws_parser_close_frame(uint8_t out[WS_CLOSE_FRAME_LEN], uint16_t code, uint32_t mask)
{
    out[0] = FIN | OP_CLOSE;
    out[1] = 0x80u | 2u;            /* masked, 2 bytes of payload */
    for (int i = 0; i < 4; i++)
        out[2 + i] = (uint8_t)(mask >> (24 - 8 * i));
    out[6] = (uint8_t)((code >> 8) ^ out[2]);
    out[7] = (uint8_t)((code & 0xffu) ^ out[3]);
}
