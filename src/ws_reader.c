/* WebSocket client frames: see ws_reader.h.
 *
 * wslay's frame context reads into its own 4 KB buffer as much as its
 * receive callback gives it. So that it never holds a byte past the frame
 * it is parsing (and can be dropped or reused between frames), the
 * callback gives it one byte at a time until the frame's header is parsed,
 * then at most what is left of the payload. A read's bytes are all fed in
 * this way; what is left over at the end belongs to a frame in flight. */
#include "ws_reader.h"
#include "framing.h"
#include "log.h"
#include "stats.h"
#include "stream.h"
#include "utf8.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <wslay/wslay.h>

/* Bytes read from a client per readable event. */
#define WS_READ_MAX 4096
/* A client's data message at most: it has nothing to tell us. */
#define WS_MESSAGE_MAX 4096
/* Bytes of unread input discarded before closing on an error, so that the
 * close is a FIN the client reads, not a reset that loses our close frame. */
#define WS_DRAIN_MAX 65536

/* stream.ws: pings unanswered (2 bits), the slot of the frame in flight
 * (14 bits, 0: none). */
#define PINGS_MASK 3u
#define SLOT_SHIFT 2
#define SLOTS 16383u

/* One frame (or fragmented data message) being read. About 4.5 KB while
 * it exists: this ~150-byte record and wslay's context (4,264 bytes as
 * malloc_usable_size measures it with Debian's wslay 1.1.1, mostly its
 * 4 KB input buffer). */
struct ws_frame {
    wslay_frame_context_ptr ctx;
    uint64_t length;            /* this frame's payload */
    uint64_t got;               /* of it, seen so far */
    uint32_t fed;               /* bytes given to ctx since the frame began */
    uint32_t message;           /* bytes of the data message so far */
    uint8_t started;            /* the header is parsed */
    uint8_t fin;
    uint8_t opcode;
    uint8_t fragmented;         /* opcode of a data message awaiting continuations */
    struct utf8_state text;     /* a text message's validation so far */
    uint8_t ctl_len;
    uint8_t ctl[125];           /* a control frame's payload */
};

static struct ws_frame **slots;     /* [SLOTS + 1], while streams hold frames in flight */
static uint16_t *free_slots;
static uint32_t nfree;
static struct ws_frame *spare;      /* a clean frame, kept for the next one */

/* What the current read gives wslay (loop thread only, hence static). */
static struct {
    const uint8_t *p;
    size_t left;
    struct ws_frame *f;
} feed;

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
    memcpy(buf, feed.p, n);
    feed.p += n;
    feed.left -= n;
    f->fed += (uint32_t)n;
    return (ssize_t)n;
}

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
        if (wslay_frame_context_init(&f->ctx, &callbacks, NULL) != 0) {
            free(f);
            return NULL;
        }
    }
    wslay_frame_context_ptr ctx = f->ctx;
    memset(f, 0, sizeof *f);
    f->ctx = ctx;
    return f;
}

/* A frame that stopped on a frame boundary is kept for reuse (its context
 * is empty and back at a header); any other is freed. */
static void frame_put(struct ws_frame *f)
{
    if (f->fed == 0 && !spare) {
        spare = f;
        return;
    }
    wslay_frame_context_free(f->ctx);
    free(f);
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

/* Ends the stream with a close frame of code (0: an empty close). */
static void close_with(struct stream *s, int fd, unsigned code)
{
    static char frame[4] = {(char)0x88};
    frame[1] = code ? 2 : 0;
    frame[2] = (char)(code >> 8);
    frame[3] = (char)code;
    drain(fd);
    stream_end_with(s, (struct iovec){frame, code ? 4 : 2});
}

static void protocol_error(struct stream *s, int fd, unsigned code)
{
    loop_stats.ws_bad_frames++;
    close_with(s, fd, code);
}

/* ---------------------------------------------------------------- a frame's content */

static int is_data(uint8_t opcode) { return opcode <= WSLAY_BINARY_FRAME; }

static int is_text(const struct ws_frame *f)
{
    return f->opcode == WSLAY_TEXT_FRAME ||
           (f->opcode == WSLAY_CONTINUATION_FRAME && f->fragmented == WSLAY_TEXT_FRAME);
}

/* The header is parsed: 0 when the frame may be read, else the close code. */
static unsigned frame_header(struct ws_frame *f, const struct wslay_frame_iocb *io)
{
    f->started = 1;
    f->length = io->payload_length;
    f->fin = io->fin;
    f->opcode = io->opcode;
    if (io->rsv || !io->mask)
        return WSLAY_CODE_PROTOCOL_ERROR;
    switch (io->opcode) {
    case WSLAY_CONTINUATION_FRAME:
        if (!f->fragmented)
            return WSLAY_CODE_PROTOCOL_ERROR;
        break;
    case WSLAY_TEXT_FRAME:
    case WSLAY_BINARY_FRAME:
        if (f->fragmented)
            return WSLAY_CODE_PROTOCOL_ERROR;
        f->message = 0;
        f->text = (struct utf8_state){0};
        if (!io->fin)
            f->fragmented = io->opcode;
        break;
    case WSLAY_CONNECTION_CLOSE:
    case WSLAY_PING:
    case WSLAY_PONG:
        return 0;                /* wslay checked: fin, at most 125 bytes */
    default:
        return WSLAY_CODE_PROTOCOL_ERROR;
    }
    if (f->length > WS_MESSAGE_MAX - f->message)
        return WSLAY_CODE_MESSAGE_TOO_BIG;
    return 0;
}

/* A piece of the payload: 0, or the close code. */
static unsigned frame_piece(struct ws_frame *f, const uint8_t *p, size_t n)
{
    f->got += n;
    if (!is_data(f->opcode)) {
        memcpy(f->ctl + f->ctl_len, p, n);
        f->ctl_len = (uint8_t)(f->ctl_len + n);
        return 0;
    }
    f->message += (uint32_t)n;
    if (is_text(f) && !utf8_feed(&f->text, p, n))
        return WSLAY_CODE_INVALID_FRAME_PAYLOAD_DATA;
    return 0;
}

static int close_code_valid(unsigned code)
{
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
           (code >= 3000 && code <= 4999);
}

/* The client's close: answered with its code, then the stream ends. */
static void client_close(struct stream *s, int fd, const struct ws_frame *f)
{
    if (f->ctl_len == 0) {
        loop_stats.client_closed++;
        close_with(s, fd, 0);
        return;
    }
    unsigned code = f->ctl_len < 2 ? 0 : (unsigned)f->ctl[0] << 8 | f->ctl[1];
    if (!close_code_valid(code)) {
        protocol_error(s, fd, WSLAY_CODE_PROTOCOL_ERROR);
    } else if (!utf8_valid((const char *)f->ctl + 2, f->ctl_len - 2u)) {
        protocol_error(s, fd, WSLAY_CODE_INVALID_FRAME_PAYLOAD_DATA);
    } else {
        loop_stats.client_closed++;
        close_with(s, fd, code);
    }
}

static void pong(struct stream *s, const struct ws_frame *f)
{
    char head[2];
    framing_ws_header(head, WSLAY_PONG, f->ctl_len);
    struct iovec iov[2] = {{head, 2}, {(void *)f->ctl, f->ctl_len}};
    stream_send(s, iov, 2, 2u + f->ctl_len);
}

/* The frame is read: acts on it. 0, or the close code for a text message
 * that ended inside a character. The stream may have ended. */
static unsigned frame_end(struct stream *s, int fd, struct ws_frame *f)
{
    switch (f->opcode) {
    case WSLAY_PING:
        pong(s, f);
        break;
    case WSLAY_PONG:
        s->ws &= (uint16_t)~PINGS_MASK;
        break;
    case WSLAY_CONNECTION_CLOSE:
        client_close(s, fd, f);
        return 0;
    default:
        if (!f->fin)
            break;
        if (is_text(f) && !utf8_complete(&f->text))
            return WSLAY_CODE_INVALID_FRAME_PAYLOAD_DATA;
        f->fragmented = 0;
        loop_stats.ws_ignored++;
        break;
    }
    f->started = 0;
    f->fed = 0;
    f->got = 0;
    f->ctl_len = 0;
    return 0;
}

/* ---------------------------------------------------------------- reading */

/* Feeds what feed holds to f. 0 when it is all taken (f may be in the
 * middle of a frame), -1 when the stream ended. */
static int feed_frames(struct stream *s, int fd, struct ws_frame *f)
{
    feed.f = f;
    while (feed.left) {
        struct wslay_frame_iocb io;
        ssize_t r = wslay_frame_recv(f->ctx, &io);
        if (r == WSLAY_ERR_WANT_READ)
            continue;                          /* a header byte at a time */
        unsigned code = r < 0 ? WSLAY_CODE_PROTOCOL_ERROR : 0;
        if (!code && !f->started)
            code = frame_header(f, &io);
        if (!code)
            code = frame_piece(f, io.data, io.data_length);
        if (!code && f->got == f->length) {
            code = frame_end(s, fd, f);
            if (!code && s->state != STREAM_LIVE)
                return -1;                     /* a close answered */
        }
        if (code) {
            protocol_error(s, fd, code);
            return -1;
        }
    }
    return 0;
}

void ws_reader_readable(struct stream *s, int fd)
{
    uint8_t buf[WS_READ_MAX];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        loop_stats.client_closed++;
        stream_end_with(s, (struct iovec){NULL, 0});
        return;
    }
    if (n < 0)
        return;
    unsigned slot = slot_of(s);
    struct ws_frame *f = slot ? slots[slot] : frame_take();
    if (!f) {
        log_msg(LOG_ERROR, "out of memory reading a WebSocket frame: closing the stream");
        close_with(s, fd, WSLAY_CODE_INTERNAL_SERVER_ERROR);
        return;
    }
    feed.p = buf;
    feed.left = (size_t)n;
    if (feed_frames(s, fd, f) != 0) {
        if (!slot)
            frame_put(f);                      /* else forgotten as the stream closed */
        return;
    }
    if (f->fed == 0 && !f->fragmented) {       /* between frames: nothing kept */
        slot_release(s);
        frame_put(f);
    } else if (!slot) {
        slot = slot_hold(f);
        if (!slot) {
            frame_put(f);
            protocol_error(s, fd, 1013);       /* try again later */
            return;
        }
        set_slot(s, slot);
    }
}

void ws_reader_forget(struct stream *s)
{
    unsigned slot = slot_of(s);
    if (slot) {
        struct ws_frame *f = slots[slot];
        slot_release(s);
        frame_put(f);
    }
}

void ws_reader_heartbeat(struct stream *s)
{
    static const char ping[] = "\x89\x00";
    unsigned pings = s->ws & PINGS_MASK;
    if (pings >= 2) {
        static const char going_away[] = "\x88\x02\x03\xe9";   /* 1001 */
        loop_stats.ws_dead++;
        stream_end_with(s, (struct iovec){(void *)going_away, 4});
        return;
    }
    s->ws = (uint16_t)((s->ws & ~PINGS_MASK) | (pings + 1));
    struct iovec iov = {(void *)ping, 2};
    stream_send(s, &iov, 1, 2);
}

void ws_reader_free(void)
{
    if (spare) {
        wslay_frame_context_free(spare->ctx);
        free(spare);
        spare = NULL;
    }
    free(slots);
    free(free_slots);
    slots = NULL;
    free_slots = NULL;
}
