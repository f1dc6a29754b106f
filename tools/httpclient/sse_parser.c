/* SPDX-License-Identifier: Apache-2.0 */
/* text/event-stream, a byte at a time: see sse_parser.h. */
#include "sse_parser.h"

enum { ST_LINE, ST_LINE_LF, ST_NAME, ST_VALUE_START, ST_VALUE, ST_SKIP, ST_ERROR };

enum { F_UNKNOWN, F_DATA, F_ID, F_EVENT, F_RETRY };

#define SEEN_DATA 0x01u     /* a data field: the event has data */
#define SEEN_ID 0x02u       /* a well-formed id */
#define SEEN_BAD_ID 0x04u
#define SEEN_RETRY 0x08u
#define SEEN_GAP 0x10u      /* event: gap */
#define SEEN_OTHER 0x20u    /* event: something else than message or gap */
#define SEEN_EVENT_NAME 0x40u /* an event field, whatever its value */

/* While an event field is read, pos holds the bytes seen (low 4 bits) and
 * which names the value may still be; while a retry field is, whether a
 * digit (EV_DIGIT) and anything else (EV_NEITHER) came. */
#define EV_GAP 0x40u
#define EV_MESSAGE 0x20u
#define EV_DIGIT 0x40u
#define EV_NEITHER 0x80u

static const char *const k_names[] = {"", "data", "id", "event", "retry"};

void ssep_init(struct sse_parser *p)
{
    stamp_start(&p->ts);
    id_start(&p->id);
    p->state = ST_LINE;
    p->field = F_UNKNOWN;
    p->pos = 0;
    p->seen = 0;
    p->utf8 = 0;
}

static void dispatch(struct sse_parser *p, sse_event_fn on_event, void *ctx)
{
    uint8_t seen = p->seen;
    if (seen) {
        struct sse_event ev;
        ev.type = seen & SEEN_GAP ? SSE_GAP : seen & SEEN_OTHER ? SSE_OTHER
                : seen & SEEN_DATA ? SSE_MESSAGE : SSE_NONE;
        ev.has_id = (seen & SEEN_ID) != 0;
        ev.bad_id = (seen & SEEN_BAD_ID) != 0;
        ev.epoch = p->id.epoch;
        ev.seq = p->id.seq;
        ev.topic = p->id.topic;
        ev.has_ts = stamp_found(&p->ts);
        ev.ts = p->ts.ts;
        ev.has_n = p->ts.has_n;
        ev.n = p->ts.n;
        ev.has_retry = (seen & SEEN_RETRY) != 0;
        if (on_event)
            on_event(ctx, &ev);
    }
    p->seen = 0;
    stamp_start(&p->ts);
    id_start(&p->id);
}

/* The field's value starts (after "name:" and the optional space). */
static void value_start(struct sse_parser *p)
{
    p->pos = 0;
    switch (p->field) {
    case F_DATA:
        p->seen |= SEEN_DATA;
        break;
    case F_ID:
        id_start(&p->id);
        p->seen &= (uint8_t)~(SEEN_ID | SEEN_BAD_ID);
        break;
    case F_EVENT:
        p->seen &= (uint8_t)~(SEEN_GAP | SEEN_OTHER);
        p->seen |= SEEN_EVENT_NAME;
        p->pos = EV_GAP | EV_MESSAGE;
        break;
    default:
        break;
    }
}

static void value_byte(struct sse_parser *p, unsigned c)
{
    static const char gap[] = "gap", message[] = "message";
    unsigned n = p->pos & 0x0fu;
    switch (p->field) {
    case F_DATA:
        stamp_byte(&p->ts, c);
        break;
    case F_ID:
        id_byte(&p->id, c);
        break;
    case F_EVENT: {
        unsigned g = (p->pos & EV_GAP) && n < 3 && c == (unsigned char)gap[n];
        unsigned m = (p->pos & EV_MESSAGE) && n < 7 && c == (unsigned char)message[n];
        p->pos = (uint8_t)((g ? EV_GAP : 0) | (m ? EV_MESSAGE : 0) | (n < 15 ? n + 1 : 15));
        break;
    }
    case F_RETRY:
        p->pos |= c >= '0' && c <= '9' ? EV_DIGIT : EV_NEITHER;
        break;
    default:
        break;
    }
}

/* The line ends: the field it held takes effect. */
static void field_end(struct sse_parser *p)
{
    switch (p->field) {
    case F_DATA:
        /* Only the first data line may carry the stamp: it is settled. */
        stamp_settle(&p->ts);
        break;
    case F_ID:
        if (id_ok(&p->id))
            p->seen |= SEEN_ID;
        else if (p->id.pos)         /* an empty id resets it: not an error */
            p->seen |= SEEN_BAD_ID;
        break;
    case F_EVENT: {
        unsigned n = p->pos & 0x0fu;
        if ((p->pos & EV_GAP) && n == 3)
            p->seen |= SEEN_GAP;
        else if (n != 0 && !((p->pos & EV_MESSAGE) && n == 7))
            p->seen |= SEEN_OTHER;       /* an empty name or "message" is a message */
        break;
    }
    case F_RETRY:
        if (p->pos == EV_DIGIT)
            p->seen |= SEEN_RETRY;
        break;
    default:
        break;
    }
    p->field = F_UNKNOWN;
}

static uint8_t field_of(unsigned c)
{
    switch (c) {
    case 'd': return F_DATA;
    case 'i': return F_ID;
    case 'e': return F_EVENT;
    case 'r': return F_RETRY;
    default: return F_UNKNOWN;
    }
}

static void name_byte(struct sse_parser *p, unsigned c)
{
    const char *name = k_names[p->field];
    if (p->field != F_UNKNOWN && name[p->pos] == (char)c)
        p->pos++;
    else
        p->field = F_UNKNOWN;
}

/* A line ends at the byte c (CR or LF). */
static void line_end(struct sse_parser *p, unsigned c, sse_event_fn on_event, void *ctx)
{
    if (p->state == ST_LINE) {
        dispatch(p, on_event, ctx);
    } else if (p->state == ST_NAME) {
        /* A name alone: the field with an empty value. */
        if (p->field != F_UNKNOWN && k_names[p->field][p->pos] == '\0') {
            value_start(p);
            field_end(p);
        }
    } else if (p->state == ST_VALUE_START || p->state == ST_VALUE) {
        field_end(p);
    }
    p->field = F_UNKNOWN;
    p->state = c == '\r' ? ST_LINE_LF : ST_LINE;
}

enum sse_result ssep_feed(struct sse_parser *p, const char *buf, size_t len, sse_event_fn on_event,
                         void *ctx)
{
    if (p->state == ST_ERROR)
        return SSE_ERROR;
    for (size_t i = 0; i < len; i++) {
        unsigned c = (unsigned char)buf[i];
        if (!utf8_byte(&p->utf8, c)) {
            p->state = ST_ERROR;
            return SSE_ERROR;
        }
        if (p->state == ST_LINE_LF) {
            p->state = ST_LINE;
            if (c == '\n')
                continue;           /* the LF of a CRLF */
        }
        if (c == '\r' || c == '\n') {
            line_end(p, c, on_event, ctx);
            continue;
        }
        switch (p->state) {
        case ST_LINE:
            if (c == ':') {
                p->state = ST_SKIP;
            } else {
                p->state = ST_NAME;
                p->field = field_of(c);
                p->pos = 1;
            }
            break;
        case ST_NAME:
            if (c == ':') {
                if (p->field != F_UNKNOWN && k_names[p->field][p->pos] == '\0') {
                    p->state = ST_VALUE_START;
                    value_start(p);
                } else {
                    p->state = ST_SKIP;
                }
            } else {
                name_byte(p, c);
            }
            break;
        case ST_VALUE_START:
            p->state = ST_VALUE;
            if (c != ' ')
                value_byte(p, c);
            break;
        case ST_VALUE:
            value_byte(p, c);
            break;
        default:                    /* ST_SKIP: a comment or an unknown field */
            break;
        }
    }
    return SSE_OK;
}
