/* SPDX-License-Identifier: Apache-2.0 */
/* WebSocket client frames: see ws_reader.h.
 *
 * wslay's frame context reads into its own 4 KB buffer as much as its
 * receive callback gives it. So that it never holds a byte past the frame
 * it is parsing (and can be dropped or reused between frames), the
 * callback gives it one byte at a time until the frame's header is parsed,
 * then at most what is left of the payload. A read's bytes are all fed in
 * this way; what is left over at the end belongs to a frame in flight.
 *
 * Feeding never ends the stream: it says how the read must end (a
 * verdict), and the one call that may end it (a close, or the pong of the
 * read's last ping) comes last, once the frame is put away or in its
 * slot. Such a call may free the stream's frame (ws_reader_forget), so
 * each function that makes one returns -1 when the stream ended and
 * touches nothing of the stream or its frame after it. */
#include "transport/ws_reader.h"
#include "transport/ws_budget.h"
#include "transport/ws_pause.h"
#include "core/client_in.h"
#include "core/client_rate.h"
#include "core/conn.h"
#include "core/framing.h"
#include "core/inflight.h"
#include "core/topic_join.h"
#include "core/transport_ops.h"
#include "lib/carry.h"
#include "lib/clock.h"
#include "lib/deflate_msg.h"
#include "lib/log.h"
#include "obs/stats.h"
#include "core/stream.h"
#include "lib/utf8.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <wslay/wslay.h>

/* Bytes read from a client per readable event. */
#define WS_READ_MAX 4096
/* Past CLIENT_IN_PENDING_MAX waiting for Erlang no WebSocket is read
 * (ws_pause.h). A read adds at most its 4 KB of messages and a message in
 * flight on top: the park (4 MiB) and the outbox (8 MB) keep room for them. */
/* Bytes of unread input discarded before closing on an error, so that the
 * close is a FIN the client reads, not a reset that loses our close frame. */
#define WS_DRAIN_MAX 65536

/* A client's data message (or a frame) must be whole within this many ms
 * of the read that brought its first byte and this many frames, else
 * 1008: its parse state (~4.6 KB) is not held for ever. A timer in the
 * frame state (so only a stream in the middle of a message has one) ends
 * it on time; a read checks it too, so that a late timer never lets a
 * message through. */
#define WS_MESSAGE_MS 10000
#define WS_MESSAGE_FRAMES 64

/* A client's topic joins and leaves (topic_join.h) are done once the read
 * is over (they write to the stream, which may end it); a read may bring
 * this many (a stream's topics at most), more is a flood (1008). */
#define WS_CONTROLS_PER_READ 256

/* A client message is read into a buffer that starts this small and grows
 * with what arrives (doubling, a step of at most WS_MSG_STEP), under
 * --max-input-total with every other client byte held (core/inflight.h):
 * memory follows what came, never --max-client-message at the first
 * frame. The spare frame keeps a buffer of at most WS_MSG_KEEP. */
#define WS_MSG_MIN 4096u
#define WS_MSG_STEP 65536u
#define WS_MSG_KEEP 4096u

/* What a client may send in one second of the monotonic clock; past any
 * of them it is flooding, and is closed with 1008. A browser answers our
 * pings and sends a few messages: far below. */
#define WS_SECOND_BYTES 65536
#define WS_SECOND_FRAMES 128
#define WS_SECOND_PINGS 16

/* What the options make of these: the client message's bound (without
 * --inbox: 4 KB, for nothing) and a compressed one's before inflating
 * (deflate's stored blocks add a few bytes to data it cannot shrink), the
 * frames and bytes a second may bring. */
static struct {
    int inbox;
    int topics;                 /* clients may join and leave topics */
    int keep;                   /* data messages are read whole: --inbox, or topics */
    uint32_t max_message;
    uint32_t max_compressed;
    uint32_t second_frames;
    uint32_t second_bytes;
    int32_t late_ms;            /* WS_MESSAGE_MS and a tick of the timers' clock */
} cfg = {0, 0, 0, 4096, 4096 + 4096 / 64 + 64, WS_SECOND_FRAMES, WS_SECOND_BYTES, WS_MESSAGE_MS};

/* permessage-deflate: the one buffer every compressed client message is
 * inflated into in turn (max_message + 1 bytes, made at the first), with
 * the one inflater of lib/deflate_msg.h: no zlib state per connection. */
static uint8_t *inflated;

/* stream.ws: pings unanswered (2 bits), not read while Erlang is behind
 * (1 bit), the slot of the frame in flight (13 bits, 0: none). */
#define PINGS_MASK 3u
#define PAUSED 4u
#define SLOT_SHIFT 3
#define SLOTS 8191u

/* One frame (or fragmented data message) being read. About 4.6 KB while
 * it exists: this 336-byte record (128 of them its timer) and wslay's
 * context (4,264 bytes as malloc_usable_size measures it with Debian's
 * wslay 1.1.1, mostly its 4 KB input buffer); with --inbox, and once a
 * data message came, its buffer too (WS_MSG_MIN and up, as it grows). */
struct ws_frame {
    wslay_frame_context_ptr ctx;
    uint8_t *msg;               /* --inbox: the data message so far */
    uint32_t cap;               /* msg's size */
    struct inflight held;       /* cap, counted while a stream's (not the spare's) */
    uint64_t length;            /* this frame's payload */
    uint64_t got;               /* of it, seen so far */
    struct event late;          /* WS_MESSAGE_MS after since, while in flight */
    uint32_t fed;               /* bytes given to ctx since the frame began */
    uint32_t message;           /* bytes of the data message so far */
    uint32_t since;             /* client_rate_now_ms() the message (or frame) began */
    uint8_t timed;              /* late is assigned to its stream (and maybe pending) */
    uint8_t started;            /* the header is parsed */
    uint8_t fin;
    uint8_t opcode;
    uint8_t fragmented;         /* opcode of a data message awaiting continuations */
    uint8_t compressed;         /* the data message is (RSV1 on its first frame) */
    uint8_t frames;             /* frames of the data message so far */
    struct utf8_state text;     /* a text message's validation so far */
    uint8_t ctl_len;
    uint8_t ctl[125];           /* a control frame's payload */
    uint8_t hdr_len;
    uint8_t hdr[14];            /* the frame's header as read, for a hand-over */
};

static struct ws_frame **slots;     /* [SLOTS + 1], while streams hold frames in flight */
static uint16_t *free_slots;
static uint32_t nfree;
static struct ws_frame *spare;      /* a clean frame, kept for the next one */

/* The current read (loop thread only, hence static): what it gives wslay,
 * what it brought, and the last ping's payload, answered once at its end
 * (RFC 6455 5.5.3: a pong may answer only the most recent ping). */
static struct {
    const uint8_t *p;
    size_t left;
    struct ws_frame *f;
    struct stream *s;
    uint32_t now_ms;            /* client_rate_now_ms() at the read */
    uint32_t now;               /* clock_seconds() at the read */
    uint16_t frames;
    uint16_t pings;
    uint8_t ponged;             /* a pong came: no ping is unanswered */
    uint8_t ping_due;
    uint8_t ping_len;
    uint8_t ping[125];
    uint16_t nctl;              /* topic joins and leaves read, done at the read's end */
    struct {
        uint8_t len;
        char text[TOPIC_CONTROL_MAX];
    } ctl[WS_CONTROLS_PER_READ];
} feed;

/* The length of f's header, as far as its bytes so far tell (RFC 6455
 * 5.2: 2 bytes, 2 or 8 of extended length, 4 of mask). */
static size_t header_size(const struct ws_frame *f)
{
    if (f->hdr_len < 2)
        return 2;
    unsigned len7 = f->hdr[1] & 0x7f;
    return 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + (f->hdr[1] & 0x80 ? 4 : 0);
}

static ssize_t feed_recv(uint8_t *buf, size_t len, int flags, void *user)
{
    (void)flags;
    (void)user;
    struct ws_frame *f = feed.f;
    size_t n = f->started ? (size_t)(f->length - f->got) : 1;
    if (n > len)
        n = len;
    if (n > feed.left)
        n = feed.left;
    if (n == 0)
        return -1;                  /* wslay: WSLAY_ERR_WANT_READ */
    if (!f->started && f->hdr_len < header_size(f))
        f->hdr[f->hdr_len++] = *feed.p;
    memcpy(buf, feed.p, n);
    feed.p += n;
    feed.left -= n;
    f->fed += (uint32_t)n;
    return (ssize_t)n;
}

/* Seconds of the monotonic clock, never 0 (an unused budget entry). The
 * coarse clock is a vDSO read, no syscall. */
static uint32_t clock_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
    return (uint32_t)t.tv_sec + 1;
}

/* ---------------------------------------------------------------- verdicts */

/* How a read ends: on (the stream stays), or a close with code, for why
 * (enum end_reason). code 0: an empty close (the client's own). */
#define GO_ON END_REASON_KINDS

struct verdict {
    uint16_t code;
    uint8_t why;
};

static const struct verdict go_on = {0, GO_ON};
static struct verdict bad(unsigned code) { return (struct verdict){(uint16_t)code, END_WS_PROTOCOL}; }
static struct verdict policy(void) { return (struct verdict){WSLAY_CODE_POLICY_VIOLATION, END_WS_POLICY}; }
static struct verdict rate(void) { return (struct verdict){WSLAY_CODE_POLICY_VIOLATION, END_CLIENT_RATE}; }
/* 1013: try again later (the server is receiving too much at once). */
static struct verdict shed(void) { return (struct verdict){1013, END_WS_SHED}; }

/* ---------------------------------------------------------------- frames */

static struct ws_frame *frame_take(void)
{
    struct ws_frame *f = spare;
    if (f) {
        spare = NULL;
    } else {
        static const struct wslay_frame_callbacks callbacks = {NULL, feed_recv, NULL};
        f = malloc(sizeof *f);
        if (!f)
            return NULL;
        f->msg = NULL;
        f->cap = 0;
        if (wslay_frame_context_init(&f->ctx, &callbacks, NULL) != 0) {
            free(f);
            return NULL;
        }
    }
    wslay_frame_context_ptr ctx = f->ctx;
    uint8_t *msg = f->msg;
    uint32_t cap = f->cap;
    memset(f, 0, sizeof *f);
    f->ctx = ctx;
    f->msg = msg;
    f->cap = cap;
    f->since = feed.now_ms;
    return f;
}

/* A frame that stopped on a frame boundary is kept for reuse (its context
 * is empty and back at a header); any other is freed. */
static void frame_put(struct ws_frame *f)
{
    if (f->timed) {
        event_del(&f->late);
        f->timed = 0;
    }
    inflight_drop(&f->held);
    if (f->fed == 0 && !spare) {
        if (f->cap > WS_MSG_KEEP) {
            free(f->msg);
            f->msg = NULL;
            f->cap = 0;
        }
        spare = f;
        return;
    }
    wslay_frame_context_free(f->ctx);
    free(f->msg);
    free(f);
}

/* In the middle of a frame or a fragmented message. */
static int in_flight(const struct ws_frame *f) { return f->fed != 0 || f->fragmented; }

/* Past its time (now_ms: client_rate_now_ms()). */
static int too_old(const struct ws_frame *f, uint32_t now_ms)
{
    return in_flight(f) && (int32_t)(now_ms - f->since) >= cfg.late_ms;
}

static unsigned slot_of(const struct stream *s) { return (unsigned)s->ws >> SLOT_SHIFT; }

static void set_slot(struct stream *s, unsigned slot)
{
    s->ws = (uint16_t)((s->ws & PINGS_MASK) | slot << SLOT_SHIFT);
}

/* A slot for a frame left in flight at the end of a read; 0 when all are
 * taken (16,383 clients in the middle of a frame). */
static unsigned slot_hold(struct ws_frame *f)
{
    if (!slots) {
        slots = calloc(SLOTS + 1, sizeof *slots);
        free_slots = malloc(SLOTS * sizeof *free_slots);
        if (!slots || !free_slots) {
            free(slots);
            free(free_slots);
            slots = NULL;
            free_slots = NULL;
            return 0;
        }
        for (nfree = 0; nfree < SLOTS; nfree++)
            free_slots[nfree] = (uint16_t)(SLOTS - nfree);
    }
    if (!nfree)
        return 0;
    unsigned slot = free_slots[--nfree];
    slots[slot] = f;
    return slot;
}

static void slot_release(struct stream *s)
{
    unsigned slot = slot_of(s);
    if (slot) {
        slots[slot] = NULL;
        free_slots[nfree++] = (uint16_t)slot;
        set_slot(s, 0);
    }
}

/* ---------------------------------------------------------------- ending */

/* Reads and drops what the client sent that we will not read. */
static void drain(int fd)
{
    char sink[4096];
    for (size_t total = 0; total < WS_DRAIN_MAX;) {
        ssize_t n = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (n <= 0)
            return;
        total += (size_t)n;
    }
}

/* Ends the stream for why with a close frame of code (0: an empty
 * close). -1: the stream has ended (always). */
static int close_with(struct stream *s, int fd, unsigned code, uint8_t why)
{
    static char frame[4] = {(char)0x88};
    frame[1] = code ? 2 : 0;
    frame[2] = (char)(code >> 8);
    frame[3] = (char)code;
    drain(fd);
    stream_end_with(s, (struct iovec){frame, code ? 4 : 2}, why);
    return -1;
}

/* Ends the stream as the verdict says. -1 (always). */
static int end_with(struct stream *s, int fd, struct verdict v)
{
    return close_with(s, fd, v.code, v.why);
}

/* The pong of the read's last ping. -1 when that ended the stream (its
 * output passed --max-backlog). */
static int pong(struct stream *s)
{
    char head[2];
    framing_ws_header(head, WSLAY_PONG, feed.ping_len);
    struct iovec iov[2] = {{head, 2}, {feed.ping, feed.ping_len}};
    return stream_send(s, iov, 2, 2u + feed.ping_len);
}

/* ---------------------------------------------------------------- a frame's content */

static int is_data(uint8_t opcode) { return opcode <= WSLAY_BINARY_FRAME; }

static int is_text(const struct ws_frame *f)
{
    return f->opcode == WSLAY_TEXT_FRAME ||
           (f->opcode == WSLAY_CONTINUATION_FRAME && f->fragmented == WSLAY_TEXT_FRAME);
}

/* The header is parsed: whether the frame may be read. */
static struct verdict frame_header(struct ws_frame *f, const struct wslay_frame_iocb *io)
{
    f->started = 1;
    f->length = io->payload_length;
    f->fin = io->fin;
    f->opcode = io->opcode;
    feed.frames++;
    if ((io->rsv & ~WSLAY_RSV1_BIT) || !io->mask)
        return bad(WSLAY_CODE_PROTOCOL_ERROR);
    /* RSV1: a compressed message, where permessage-deflate was agreed, and
     * only on a data message's first frame (RFC 7692 6.1). */
    int rsv1 = (io->rsv & WSLAY_RSV1_BIT) != 0;
    if (rsv1 && (!framing_ws_deflate(feed.s->framing) ||
                 (io->opcode != WSLAY_TEXT_FRAME && io->opcode != WSLAY_BINARY_FRAME)))
        return bad(WSLAY_CODE_PROTOCOL_ERROR);
    switch (io->opcode) {
    case WSLAY_CONTINUATION_FRAME:
        if (!f->fragmented)
            return bad(WSLAY_CODE_PROTOCOL_ERROR);
        if (++f->frames > WS_MESSAGE_FRAMES)
            return policy();
        break;
    case WSLAY_TEXT_FRAME:
    case WSLAY_BINARY_FRAME:
        if (f->fragmented)
            return bad(WSLAY_CODE_PROTOCOL_ERROR);
        f->message = 0;
        f->frames = 1;
        f->compressed = (uint8_t)rsv1;
        f->text = (struct utf8_state){0};
        if (!io->fin)
            f->fragmented = io->opcode;
        break;
    case WSLAY_PING:
        feed.pings++;
        return go_on;            /* wslay checked: fin, at most 125 bytes */
    case WSLAY_CONNECTION_CLOSE:
    case WSLAY_PONG:
        return go_on;
    default:
        return bad(WSLAY_CODE_PROTOCOL_ERROR);
    }
    /* A compressed message is held whole, then inflated (message_in). */
    uint32_t max = f->compressed ? cfg.max_compressed : cfg.max_message;
    if (f->length > max - f->message)
        return bad(WSLAY_CODE_MESSAGE_TOO_BIG);
    return go_on;
}

/* Room in f->msg for need bytes (at most --max-client-message, or a
 * compressed message's bound: the header was checked), counted under
 * --max-input-total. */
static struct verdict msg_room(struct ws_frame *f, uint32_t need)
{
    uint32_t cap = f->cap, max = f->compressed ? cfg.max_compressed : cfg.max_message;
    if (need > cap) {
        cap = cap < WS_MSG_MIN ? WS_MSG_MIN : cap;
        while (cap < need)
            cap += cap < WS_MSG_STEP ? cap : WS_MSG_STEP;
        if (cap > max)
            cap = max;
    }
    uint32_t counted = inflight_bytes(&f->held);
    if (cap > counted && inflight_add(&f->held, feed.s, INFLIGHT_WS, cap - counted) != 0)
        return shed();
    if (cap > f->cap) {
        uint8_t *m = realloc(f->msg, cap);
        if (!m)
            return bad(1011);                   /* internal error: out of memory */
        f->msg = m;
        f->cap = cap;
    }
    return go_on;
}

/* A piece of the payload. */
static struct verdict frame_piece(struct ws_frame *f, const uint8_t *p, size_t n)
{
    f->got += n;
    if (!is_data(f->opcode)) {
        memcpy(f->ctl + f->ctl_len, p, n);
        f->ctl_len = (uint8_t)(f->ctl_len + n);
        return go_on;
    }
    if (cfg.keep && n) {
        struct verdict v = msg_room(f, f->message + (uint32_t)n);
        if (v.why != GO_ON)
            return v;
        memcpy(f->msg + f->message, p, n);
    }
    f->message += (uint32_t)n;
    /* (a compressed text's UTF-8 is checked once inflated) */
    if (is_text(f) && !f->compressed && !utf8_feed(&f->text, p, n))
        return bad(WSLAY_CODE_INVALID_FRAME_PAYLOAD_DATA);
    return go_on;
}

static int close_code_valid(unsigned code)
{
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
           (code >= 3000 && code <= 4999);
}

/* The client's close: answered with its code, then the stream ends. */
static struct verdict client_close(const struct ws_frame *f)
{
    if (f->ctl_len == 0)
        return (struct verdict){0, END_CLIENT};
    unsigned code = f->ctl_len < 2 ? 0 : (unsigned)f->ctl[0] << 8 | f->ctl[1];
    if (!close_code_valid(code))
        return bad(WSLAY_CODE_PROTOCOL_ERROR);
    if (!utf8_valid((const char *)f->ctl + 2, f->ctl_len - 2u))
        return bad(WSLAY_CODE_INVALID_FRAME_PAYLOAD_DATA);
    return (struct verdict){(uint16_t)code, END_CLIENT};
}

/* Whether m[n] is a topic join or leave (a text message): kept for the
 * read's end. 1 when it is (taken), 0 when not, -1 when one too many. */
static int control_in(const uint8_t *m, uint32_t n)
{
    if (!cfg.topics || !topic_control_is((const char *)m, n))
        return 0;
    if (feed.nctl == WS_CONTROLS_PER_READ)
        return -1;
    feed.ctl[feed.nctl].len = (uint8_t)n;
    memcpy(feed.ctl[feed.nctl++].text, m, n);
    return 1;
}

/* The joins and leaves the read brought: 0, or -1 when the stream ended. */
static int controls_done(struct stream *s)
{
    for (uint16_t i = 0; i < feed.nctl && s->state == STREAM_LIVE; i++)
        topic_control_apply(s, feed.ctl[i].text, feed.ctl[i].len);
    feed.nctl = 0;
    return s->state == STREAM_LIVE ? 0 : -1;
}

/* A compressed message inflated into the shared buffer (*data, *len):
 * at most --max-client-message (past it, a bomb or not: 1009, counted),
 * deflate data (else 1007), UTF-8 when text (else 1007). */
static struct verdict inflate_in(int text, const uint8_t **data, uint32_t *len)
{
    if (!inflated && !(inflated = malloc((size_t)cfg.max_message + 1)))
        return bad(1011);
    size_t n;
    switch (inflate_msg(*data, *len, inflated, cfg.max_message, &n)) {
    case INFLATE_MSG_OK:
        break;
    case INFLATE_MSG_TOO_BIG:
        loop_stats.ws_inflate_too_big++;
        return bad(WSLAY_CODE_MESSAGE_TOO_BIG);
    case INFLATE_MSG_BAD:
        return bad(WSLAY_CODE_INVALID_FRAME_PAYLOAD_DATA);
    default:
        return bad(1011);                       /* internal error: out of memory */
    }
    if (text && !utf8_valid((const char *)inflated, n))
        return bad(WSLAY_CODE_INVALID_FRAME_PAYLOAD_DATA);
    loop_stats.ws_inflated++;
    *data = inflated;
    *len = (uint32_t)n;
    return go_on;
}

/* A whole data message (text or binary): to Erlang (client_in.h: past
 * --client-rate, 1008; lost to a full outbox, counted), or refused (no
 * --inbox), counted; a topic join or leave is the stream's (a compressed
 * one is known once inflated). */
static struct verdict message_in(struct ws_frame *f, int text)
{
    if (!cfg.keep) {
        loop_stats.ws_ignored++;
        return go_on;
    }
    const uint8_t *data = f->msg ? f->msg : (const uint8_t *)"";
    uint32_t len = f->message;
    if (f->compressed) {
        struct verdict v = inflate_in(text, &data, &len);
        if (v.why != GO_ON)
            return v;
    }
    int control = text ? control_in(data, len) : 0;
    if (control < 0)
        return policy();
    if (!control && !cfg.inbox) {
        loop_stats.ws_ignored++;
        return go_on;
    }
    enum client_in r = control ? client_in_charge(feed.s, NULL, NULL, feed.now_ms)
                               : client_in_send(feed.s->uid, feed.s, NULL, NULL, feed.now_ms,
                                                data, len, !text);
    switch (r) {
    case CLIENT_IN_RATE:
        return rate();
    case CLIENT_IN_NO_MEMORY:
        return bad(1011);                       /* internal error: out of memory */
    default:
        return go_on;
    }
}

/* The frame is read: acts on it (a ping's pong waits for the read's end). */
static struct verdict frame_end(struct ws_frame *f)
{
    switch (f->opcode) {
    case WSLAY_PING:
        feed.ping_due = 1;
        feed.ping_len = f->ctl_len;
        memcpy(feed.ping, f->ctl, f->ctl_len);
        break;
    case WSLAY_PONG:
        feed.ponged = 1;
        break;
    case WSLAY_CONNECTION_CLOSE:
        return client_close(f);
    default:
        if (!f->fin)
            break;
        int text = is_text(f);              /* before the message's opcode is cleared */
        if (text && !utf8_complete(&f->text))
            return bad(WSLAY_CODE_INVALID_FRAME_PAYLOAD_DATA);
        f->fragmented = 0;
        struct verdict v = message_in(f, text);
        if (v.why != GO_ON)
            return v;
        break;
    }
    f->started = 0;
    f->fed = 0;
    f->got = 0;
    f->ctl_len = 0;
    f->hdr_len = 0;
    if (!f->fragmented)
        f->since = feed.now_ms;  /* the next message begins with this read */
    return go_on;
}

/* ---------------------------------------------------------------- reading */

/* Feeds what feed holds to f, until it is all taken (f may be in the
 * middle of a frame) or the stream must end. */
static struct verdict feed_frames(struct ws_frame *f)
{
    feed.f = f;
    while (feed.left) {
        struct wslay_frame_iocb io;
        ssize_t r = wslay_frame_recv(f->ctx, &io);
        if (r == WSLAY_ERR_WANT_READ)
            continue;                          /* a header byte at a time */
        struct verdict v = r < 0 ? bad(WSLAY_CODE_PROTOCOL_ERROR) : go_on;
        if (v.why == GO_ON && !f->started)
            v = frame_header(f, &io);
        if (v.why == GO_ON)
            v = frame_piece(f, io.data, io.data_length);
        if (v.why == GO_ON && f->got == f->length)
            v = frame_end(f);
        if (v.why != GO_ON)
            return v;
    }
    return go_on;
}

/* The read's bytes against the stream's budget of this second. */
static struct verdict charge_bytes(struct ws_budget *b, size_t n)
{
    if (!b)
        return go_on;
    b->bytes += (uint32_t)n;
    return b->bytes > cfg.second_bytes ? policy() : go_on;
}

/* The read's frames and pings against it. */
static struct verdict charge_frames(struct ws_budget *b)
{
    if (b) {
        b->frames = (uint16_t)(b->frames + feed.frames);
        b->pings = (uint16_t)(b->pings + feed.pings);
        if (b->frames > cfg.second_frames || b->pings > WS_SECOND_PINGS)
            return policy();
    }
    return go_on;
}

/* ---------------------------------------------------------------- a message's time */

static void on_late(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct stream *s = arg;
    if (s->state == STREAM_LIVE)         /* else it is ending: it forgets the frame */
        end_with(s, event_get_fd(&s->u.ev), policy());
}

/* f, s's frame in flight, is ended ms from now. */
static void time_frame_in(struct ws_frame *f, struct stream *s, int32_t ms)
{
    if (!f->timed) {
        event_assign(&f->late, event_get_base(&s->u.ev), -1, 0, on_late, s);
        f->timed = 1;
    }
    const struct timeval tv = {ms / 1000, ms % 1000 * 1000};
    event_add(&f->late, &tv);
}

/* f, s's frame in flight, is ended WS_MESSAGE_MS after f->since (now, or
 * the read just made: libevent's time of this loop turn is no later). */
static void time_frame(struct ws_frame *f, struct stream *s) { time_frame_in(f, s, cfg.late_ms); }

/* ---------------------------------------------------------------- Erlang behind */

/* Stops reading s until Erlang catches up (ws_pause.h). -1 when that
 * cannot be kept track of (out of memory): s is read on. */
static int pause_stream(struct stream *s)
{
    if (ws_pause_add(s) != 0)
        return -1;
    /* Its pongs wait behind what is not read: the pings it has not
     * answered are not held against it, the count starts again; nor is
     * the time its message does not come (resume_stream starts it again). */
    s->ws = (uint16_t)((s->ws | PAUSED) & ~PINGS_MASK);
    if (slot_of(s) && slots[slot_of(s)]->timed)
        event_del(&slots[slot_of(s)]->late);
    loop_stats.client_paused++;
    stream_rewatch(s);
    return 0;
}

static void resume_stream(struct stream *s, uint32_t now_ms)
{
    unsigned slot = slot_of(s);
    if (slot) {
        slots[slot]->since = now_ms;    /* its message's time ran while not read */
        time_frame(slots[slot], s);
    }
    /* And again at the end: the pongs of the pings sent meanwhile may
     * still be behind its unread bytes, so it has two heartbeats of
     * reading to answer. A peer that died never becomes readable, is
     * never paused and is found by the next two heartbeats. */
    s->ws &= (uint16_t)~(PAUSED | PINGS_MASK);
    stream_rewatch(s);
}

int ws_reader_paused(const struct stream *s) { return (s->ws & PAUSED) != 0; }

int ws_reader_readable(struct stream *s, int fd)
{
    uint8_t buf[WS_READ_MAX];
    if (cfg.inbox && ws_pause_due() && pause_stream(s) == 0)
        return 0;
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        stream_end_with(s, (struct iovec){NULL, 0}, END_CLIENT);
        return -1;
    }
    if (n < 0)
        return 0;
    feed.now = clock_seconds();
    feed.now_ms = client_rate_now_ms();
    feed.s = s;
    unsigned slot = slot_of(s);
    struct ws_frame *f = slot ? slots[slot] : frame_take();
    if (!f) {
        log_msg(LOG_ERROR, "out of memory reading a WebSocket frame: closing the stream");
        return close_with(s, fd, WSLAY_CODE_INTERNAL_SERVER_ERROR, END_FINISHED);
    }
    feed.p = buf;
    feed.left = (size_t)n;
    feed.frames = feed.pings = 0;
    feed.ping_due = feed.ponged = 0;
    feed.nctl = 0;
    struct ws_budget *b = ws_budget_of(s, feed.now);
    struct verdict v = charge_bytes(b, (size_t)n);
    /* Its timer may not have run yet: what comes past the time is not
     * taken. */
    if (v.why == GO_ON && too_old(f, feed.now_ms))
        v = policy();
    if (v.why == GO_ON)
        v = feed_frames(f);
    if (v.why == GO_ON)
        v = charge_frames(b);
    if (feed.ponged)
        s->ws &= (uint16_t)~PINGS_MASK;
    /* The frame put away or in its slot before any call that may end the
     * stream: ending frees what is in the slot. */
    int keep = v.why == GO_ON && in_flight(f);
    if (!keep) {
        slot_release(s);
        frame_put(f);
    } else if (!slot) {
        slot = slot_hold(f);
        if (!slot) {
            frame_put(f);
            v = bad(1013);                     /* try again later */
        } else {
            set_slot(s, slot);
        }
    }
    /* A message begun in this read gets its time (one already timed
     * keeps its own). */
    if (keep && v.why == GO_ON && (!f->timed || f->since == feed.now_ms))
        time_frame(f, s);
    /* A ping read before the client's close is owed its pong (RFC 6455
     * 5.5.2: unless a close came first; what follows the close is not
     * read). A connection failed for a bad frame owes nothing. */
    if (feed.ping_due && (v.why == GO_ON || v.why == END_CLIENT) && pong(s) != 0)
        return -1;
    if (v.why == GO_ON && feed.nctl && controls_done(s) != 0)
        return -1;
    return v.why == GO_ON ? 0 : end_with(s, fd, v);
}

void ws_reader_forget(struct stream *s)
{
    unsigned slot = slot_of(s);
    if (slot) {
        struct ws_frame *f = slots[slot];
        slot_release(s);
        frame_put(f);
    }
    ws_budget_forget(s);
    if (s->ws & PAUSED)
        ws_pause_drop(s);
    conn_forget(s);
}

int ws_reader_heartbeat(struct stream *s)
{
    static const char ping[] = "\x89\x00";
    /* A paused stream is not read: its pongs cannot come, and it is not
     * held against it (pause_stream and on_resume restart its count of
     * unanswered pings too). */
    int paused_now = (s->ws & PAUSED) != 0;
    unsigned pings = paused_now ? 0 : s->ws & PINGS_MASK;
    if (pings >= 2) {
        static const char going_away[] = "\x88\x02\x03\xe9";   /* 1001 */
        stream_end_with(s, (struct iovec){(void *)going_away, 4}, END_WS_DEAD);
        return -1;
    }
    s->ws = (uint16_t)((s->ws & ~PINGS_MASK) | (pings + 1));
    struct iovec iov = {(void *)ping, 2};
    return stream_send(s, &iov, 1, 2);
}

/* inflight's way to shed another stream than the one being read: a close
 * 1013, at once (ending a stream is safe in any callback). */
static void shed_stream(void *owner)
{
    struct stream *s = owner;
    end_with(s, event_get_fd(&s->u.ev), shed());
}

void ws_reader_configure(const struct client_msg_config *c)
{
    cfg.inbox = c->inbox;
    cfg.topics = c->topics;
    cfg.keep = cfg.inbox || cfg.topics;
    inflight_on_shed(INFLIGHT_WS, shed_stream);
    ws_pause_init(resume_stream);
    cfg.max_message = c->max_message;
    cfg.max_compressed = c->max_message + c->max_message / 64 + 64;
    client_in_configure(c->rate);
    cfg.late_ms = WS_MESSAGE_MS + clock_coarse_tick_ms();
    uint32_t frames = WS_SECOND_FRAMES + (cfg.inbox ? 2 * c->rate : 0);
    /* uint16 budget: a read adds at most 4096 / 6 frames to one not past it */
    cfg.second_frames = frames > 64000 ? 64000 : frames;
    cfg.second_bytes = WS_SECOND_BYTES > 4 * cfg.max_message ? WS_SECOND_BYTES
                                                              : 4 * cfg.max_message;
}

void ws_reader_free(void)
{
    if (spare) {
        wslay_frame_context_free(spare->ctx);
        free(spare->msg);
        free(spare);
        spare = NULL;
    }
    ws_pause_free();
    conn_free();
    free(inflated);
    inflated = NULL;
    free(slots);
    free(free_slots);
    slots = NULL;
    free_slots = NULL;
    ws_budget_free();
}

/* ---------------------------------------------------------------- hand-over
 *
 * A WebSocket stream goes to the process taking over with the pings it
 * has not answered and the frame it is in the middle of, if any: the
 * header read so far, and of a frame begun, what of its payload came
 * (a control frame's, or the data message's so far, text checked up to
 * there, or compressed). wslay's context is not carried: a new one is given the header
 * again, or, once the frame has begun, a header for the rest of it (the
 * same first byte and mask, the length left, the mask turned to where its
 * payload stands), so that it reads on where the previous one stopped.
 * A stream paused for Erlang is read again at once (the new process's
 * outbox is empty). */

static int is_ws(const struct stream *s)
{
    const struct transport_ops *t = transport_ops[s->framing];
    return t && t->readable == ws_reader_readable;
}

static void put_frame(struct carry_out *o, const struct ws_frame *f)
{
    carry_u8(o, f->started);
    carry_u8(o, f->fin);
    carry_u8(o, f->opcode);
    carry_u8(o, f->fragmented);
    carry_u8(o, f->compressed);
    carry_u8(o, f->frames);
    carry_u8(o, f->hdr_len);
    carry_put(o, f->hdr, f->hdr_len);
    carry_u64(o, f->length);
    carry_u64(o, f->got);
    carry_u32(o, f->message);
    carry_u32(o, client_rate_now_ms() - f->since);
    carry_u8(o, f->text.need);
    carry_u8(o, f->text.lo);
    carry_u8(o, f->text.hi);
    carry_u8(o, f->ctl_len);
    carry_put(o, f->ctl, f->ctl_len);
    uint32_t kept = cfg.keep && f->msg ? f->message : 0;
    carry_u32(o, kept);
    carry_put(o, f->msg, kept);
}

int ws_reader_carry_export(struct carry_out *o)
{
    uint32_t n = 0, count = stream_carry_count();
    for (uint32_t i = 0; i < count; i++)
        n += is_ws(stream_carried(i)) && (stream_carried(i)->ws & (PINGS_MASK | ~0u << SLOT_SHIFT));
    size_t at = carry_begin(o, WS_READER_CARRY_TAG, WS_READER_CARRY_VERSION);
    carry_u32(o, n);
    for (uint32_t i = 0; i < count; i++) {
        const struct stream *s = stream_carried(i);
        if (!is_ws(s) || !(s->ws & (PINGS_MASK | ~0u << SLOT_SHIFT)))
            continue;
        carry_u32(o, i);
        carry_u8(o, s->ws & PINGS_MASK);
        carry_u8(o, slot_of(s) != 0);
        if (slot_of(s))
            put_frame(o, slots[slot_of(s)]);
    }
    carry_end(o, at);
    return o->failed ? -1 : 0;
}

/* Gives f's new context n header bytes; nothing may come out of them. */
static int refeed(struct ws_frame *f, const uint8_t *hdr, size_t n)
{
    uint8_t started = f->started;
    f->started = 0;
    f->hdr_len = 0;
    feed.f = f;
    feed.p = hdr;
    feed.left = n;
    while (feed.left) {
        struct wslay_frame_iocb io;
        if (wslay_frame_recv(f->ctx, &io) != WSLAY_ERR_WANT_READ)
            return -1;
    }
    f->started = started;
    return 0;
}

/* The header of what is left of f's payload (f->hdr is the whole one). */
static size_t rest_header(const struct ws_frame *f, uint8_t out[14])
{
    uint64_t left = f->length - f->got;
    size_t k = 2;
    out[0] = f->hdr[0];
    out[1] = f->hdr[1] & 0x80;
    if (left < 126) {
        out[1] |= (uint8_t)left;
    } else if (left <= 0xffff) {
        out[1] |= 126;
        out[2] = (uint8_t)(left >> 8);
        out[3] = (uint8_t)left;
        k = 4;
    } else {
        out[1] |= 127;
        for (int i = 0; i < 8; i++)
            out[2 + i] = (uint8_t)(left >> (56 - 8 * i));
        k = 10;
    }
    if (f->hdr[1] & 0x80) {
        const uint8_t *mask = f->hdr + f->hdr_len - 4;
        for (int i = 0; i < 4; i++)
            out[k + (size_t)i] = mask[(f->got + (uint64_t)i) % 4];
        k += 4;
    }
    return k;
}

/* A frame in flight of record rec for s: -1 when malformed or out of memory. */
static int take_frame(struct carry_in *rec, struct stream *s)
{
    feed.now_ms = client_rate_now_ms();
    feed.s = s;
    struct ws_frame *f = frame_take();
    if (!f)
        return -1;
    f->started = carry_get_u8(rec);
    f->fin = carry_get_u8(rec);
    f->opcode = carry_get_u8(rec);
    f->fragmented = carry_get_u8(rec);
    f->compressed = carry_get_u8(rec);
    f->frames = carry_get_u8(rec);
    f->hdr_len = carry_get_u8(rec);
    if (f->hdr_len > sizeof f->hdr)
        rec->failed = 1;
    carry_get(rec, f->hdr, f->hdr_len <= sizeof f->hdr ? f->hdr_len : 0);
    f->length = carry_get_u64(rec);
    f->got = carry_get_u64(rec);
    f->message = carry_get_u32(rec);
    uint32_t age = carry_get_u32(rec);
    f->since = feed.now_ms - age;
    f->text.need = carry_get_u8(rec);
    f->text.lo = carry_get_u8(rec);
    f->text.hi = carry_get_u8(rec);
    f->ctl_len = carry_get_u8(rec);
    if (f->ctl_len > sizeof f->ctl)
        rec->failed = 1;
    carry_get(rec, f->ctl, f->ctl_len <= sizeof f->ctl ? f->ctl_len : 0);
    uint32_t kept = carry_get_u32(rec);
    const void *msg = carry_view(rec, kept);
    uint8_t rest[14];
    size_t n = f->started ? rest_header(f, rest) : f->hdr_len;
    int bad = rec->failed || f->got > f->length || (f->started && f->hdr_len != header_size(f)) ||
              (f->compressed && !framing_ws_deflate(s->framing)) ||
              kept > (f->compressed ? cfg.max_compressed : cfg.max_message) ||
              (kept && msg_room(f, kept).why != GO_ON);
    if (!bad) {
        if (kept)
            memcpy(f->msg, msg, kept);
        uint8_t whole[14];
        memcpy(whole, f->hdr, sizeof whole);
        uint8_t hdr_len = f->hdr_len;
        bad = refeed(f, f->started ? rest : whole, n) != 0;
        memcpy(f->hdr, whole, sizeof whole);   /* refeed recorded what it gave */
        f->hdr_len = hdr_len;
        f->fed = (uint32_t)(hdr_len + f->got);
    }
    unsigned slot = bad ? 0 : slot_hold(f);
    if (!slot) {
        frame_put(f);
        return -1;
    }
    set_slot(s, slot);
    int32_t left = cfg.late_ms - (int32_t)age;
    time_frame_in(f, s, left > 0 ? left : 0);
    return 0;
}

int ws_reader_carry_take(struct carry_in *rec, uint16_t version)
{
    (void)version;                   /* 1: the only one yet */
    uint32_t n = carry_get_u32(rec);
    for (uint32_t k = 0; k < n && !rec->failed; k++) {
        struct stream *s = stream_carried(carry_get_u32(rec));
        uint8_t pings = carry_get_u8(rec), framed = carry_get_u8(rec);
        if (rec->failed || !s || !is_ws(s))
            return -1;
        s->ws = (uint16_t)(pings & PINGS_MASK);
        if (framed && take_frame(rec, s) != 0)
            return -1;
    }
    return rec->failed ? -1 : 0;
}
