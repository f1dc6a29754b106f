/* SPDX-License-Identifier: Apache-2.0 */
/* A long-poll answer, a byte at a time: see poll_parser.h. */
#include "poll_parser.h"

enum {
    S_TOP, S_KEY_OR_END, S_KEY, S_KEYSTR, S_KEYSTR_ESC, S_COLON, S_VALUE, S_VALUE_OR_END,
    S_STR, S_STR_ESC, S_STR_HEX, S_LIT, S_NUM, S_AFTER, S_DONE, S_ERROR
};

/* Members that mean something: "messages", "gap" and "next" in the
 * answer, "id" and "data" in a message. */
enum { K_MESSAGES, K_GAP, K_ID, K_DATA, K_NEXT, K_OTHER };
static const char *const k_keys[] = {"messages", "gap", "id", "data", "next"};
#define N_KEYS 5

#define MAX_DEPTH 8
/* depth of the answer object, the messages array, a message */
#define D_ANSWER 1
#define D_LIST 2
#define D_MESSAGE 3

#define FL_GAP 0x01u        /* "gap": true */
#define FL_HAVE_ID 0x02u
#define FL_BAD_ID 0x04u
#define FL_IN_LIST 0x08u    /* the container at D_LIST is "messages" */
#define FL_HAVE_NEXT 0x10u  /* "next" was a well-formed EPOCH:SEQ string */

void pollp_init(struct poll_parser *p)
{
    stamp_start(&p->ts);
    id_start(&p->id);
    p->state = S_TOP;
    p->depth = 0;
    p->arrays = 0;
    p->key = K_OTHER;
    p->pos = 0;
    p->cand = 0;
    p->flags = 0;
    p->lit = 0;
}

static int is_space(unsigned c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int in_array(const struct poll_parser *p)
{
    return p->depth && (p->arrays >> (p->depth - 1) & 1u);
}

/* What the member or element being read is, at the current depth. */
static int reading(const struct poll_parser *p, unsigned depth, unsigned key)
{
    return p->depth == depth && p->key == key && (depth != D_MESSAGE || (p->flags & FL_IN_LIST));
}

static void key_byte(struct poll_parser *p, unsigned c)
{
    for (unsigned k = 0; k < N_KEYS; k++)
        if ((p->cand >> k & 1u) && (unsigned char)k_keys[k][p->pos] != c)
            p->cand &= (uint8_t)~(1u << k);
    if (p->pos < 255)
        p->pos++;
}

static void key_end(struct poll_parser *p)
{
    p->key = K_OTHER;
    for (unsigned k = 0; k < N_KEYS; k++)
        if ((p->cand >> k & 1u) && k_keys[k][p->pos] == '\0')
            p->key = (uint8_t)k;
}

/* Opens an object or array; returns -1 when too deep or not where the
 * answer's shape wants it. */
static int open_container(struct poll_parser *p, int array)
{
    if (p->depth == 0 && array)
        return -1;                              /* the answer is an object */
    if (reading(p, D_ANSWER, K_MESSAGES)) {
        if (!array)
            return -1;
        p->flags |= FL_IN_LIST;
    } else if (p->depth == D_LIST && (p->flags & FL_IN_LIST)) {
        if (array)
            return -1;                          /* each message is an object */
        stamp_start(&p->ts);
        id_start(&p->id);
        p->flags &= (uint8_t)~(FL_HAVE_ID | FL_BAD_ID | FL_HAVE_NEXT);
        p->ts.phase = STAMP_NONE;               /* until "data" starts */
    }
    if (p->depth == MAX_DEPTH)
        return -1;
    if (array)
        p->arrays |= (uint8_t)(1u << p->depth);
    else
        p->arrays &= (uint8_t)~(1u << p->depth);
    p->depth++;
    p->key = K_OTHER;
    p->state = array ? S_VALUE_OR_END : S_KEY_OR_END;
    return 0;
}

static void close_container(struct poll_parser *p, const struct poll_callbacks *cb, void *ctx)
{
    if (p->depth == D_MESSAGE && (p->flags & FL_IN_LIST) && !in_array(p) && cb->on_message) {
        struct poll_message m;
        m.has_id = (p->flags & FL_HAVE_ID) != 0;
        m.bad_id = (p->flags & FL_BAD_ID) != 0;
        m.epoch = p->id.epoch;
        m.seq = p->id.seq;
        m.has_ts = stamp_found(&p->ts);
        m.ts = p->ts.ts;
        m.has_n = p->ts.has_n;
        m.n = p->ts.n;
        cb->on_message(ctx, &m);
    }
    if (p->depth == D_LIST)
        p->flags &= (uint8_t)~FL_IN_LIST;
    p->depth--;
    /* The member or element this container was is done; the key of the
     * enclosing object no longer matters. */
    p->key = K_OTHER;
    if (p->depth == 0) {
        p->state = S_DONE;
        if (cb->on_answer)
            cb->on_answer(ctx, (p->flags & FL_GAP) != 0);
    } else {
        p->state = S_AFTER;
    }
}

static void string_start(struct poll_parser *p)
{
    p->state = S_STR;
    /* "next" shares the id scanner: it counts if no message id follows it
     * (the server writes it last). */
    if (reading(p, D_MESSAGE, K_ID) || reading(p, D_ANSWER, K_NEXT)) {
        id_start(&p->id);
        p->flags &= (uint8_t)~FL_HAVE_NEXT;
    } else if (reading(p, D_MESSAGE, K_DATA)) {
        stamp_start(&p->ts);
    }
}

static void string_byte(struct poll_parser *p, unsigned c)
{
    if (reading(p, D_MESSAGE, K_ID) || reading(p, D_ANSWER, K_NEXT))
        id_byte(&p->id, c);
    else if (reading(p, D_MESSAGE, K_DATA))
        stamp_byte(&p->ts, c);
}

static void string_end(struct poll_parser *p)
{
    if (reading(p, D_MESSAGE, K_ID))
        p->flags |= id_ok(&p->id) ? FL_HAVE_ID : FL_BAD_ID;
    else if (reading(p, D_MESSAGE, K_DATA))
        stamp_settle(&p->ts);
    else if (reading(p, D_ANSWER, K_NEXT) && id_ok(&p->id))
        p->flags |= FL_HAVE_NEXT;
    p->state = S_AFTER;
}

/* The first byte of a value; returns -1 on a byte no value starts with. */
static int value_start(struct poll_parser *p, unsigned c)
{
    if (reading(p, D_ANSWER, K_MESSAGES) && c != '[')
        return -1;
    if (p->depth == D_LIST && (p->flags & FL_IN_LIST) && c != '{')
        return -1;
    switch (c) {
    case '{':
        return open_container(p, 0);
    case '[':
        return open_container(p, 1);
    case '"':
        string_start(p);
        return 0;
    case 't':
    case 'f':
    case 'n':
        if (reading(p, D_ANSWER, K_GAP) && c == 't')
            p->flags |= FL_GAP;
        p->state = S_LIT;
        p->lit = (uint8_t)c;
        p->pos = 1;
        return 0;
    default:
        if (c == '-' || (c >= '0' && c <= '9')) {
            p->state = S_NUM;
            return 0;
        }
        return -1;
    }
}

static const char *literal_of(unsigned first)
{
    return first == 't' ? "true" : first == 'f' ? "false" : "null";
}

/* After a value: a comma or the container's end. */
static int after_value(struct poll_parser *p, unsigned c, const struct poll_callbacks *cb,
                       void *ctx)
{
    if (is_space(c))
        return 0;
    if (c == ',') {
        p->state = in_array(p) ? S_VALUE : S_KEY;
        p->key = K_OTHER;
        return 0;
    }
    if (c == (in_array(p) ? ']' : '}')) {
        close_container(p, cb, ctx);
        return 0;
    }
    return -1;
}

static int step(struct poll_parser *p, unsigned c, const struct poll_callbacks *cb, void *ctx)
{
    switch (p->state) {
    case S_TOP:
        if (is_space(c))
            return 0;
        return c == '{' ? open_container(p, 0) : -1;
    case S_KEY_OR_END:
        if (c == '}') {
            close_container(p, cb, ctx);
            return 0;
        }
        /* fall through */
    case S_KEY:
        if (is_space(c))
            return 0;
        if (c != '"')
            return -1;
        p->state = S_KEYSTR;
        p->pos = 0;
        p->cand = (1u << N_KEYS) - 1;
        return 0;
    case S_KEYSTR:
        if (c == '"') {
            key_end(p);
            p->state = S_COLON;
        } else if (c == '\\') {
            p->cand = 0;                        /* no key we know has escapes */
            p->state = S_KEYSTR_ESC;
        } else if (c < 0x20) {
            return -1;
        } else {
            key_byte(p, c);
        }
        return 0;
    case S_KEYSTR_ESC:
        p->state = S_KEYSTR;                    /* \uXXXX: the hex digits pass as key bytes */
        return 0;
    case S_COLON:
        if (is_space(c))
            return 0;
        if (c != ':')
            return -1;
        p->state = S_VALUE;
        return 0;
    case S_VALUE_OR_END:
        if (c == ']') {
            close_container(p, cb, ctx);
            return 0;
        }
        /* fall through */
    case S_VALUE:
        if (is_space(c))
            return 0;
        return value_start(p, c);
    case S_STR:
        if (c == '"')
            string_end(p);
        else if (c == '\\') {
            string_byte(p, c);                  /* an escaped stamp is no stamp */
            p->state = S_STR_ESC;
        } else if (c < 0x20)
            return -1;
        else
            string_byte(p, c);
        return 0;
    case S_STR_ESC:
        if (c == 'u') {
            p->state = S_STR_HEX;
            p->pos = 0;
            return 0;
        }
        p->state = S_STR;
        return c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' ||
               c == 'r' || c == 't' ? 0 : -1;
    case S_STR_HEX:
        if (hex_digit(c) < 0)
            return -1;
        if (++p->pos == 4)
            p->state = S_STR;
        return 0;
    case S_LIT: {
        const char *lit = literal_of(p->lit);
        if (lit[p->pos] == '\0') {
            p->state = S_AFTER;
            return after_value(p, c, cb, ctx);
        }
        if ((unsigned char)lit[p->pos] != c)
            return -1;
        p->pos++;
        return 0;
    }
    case S_NUM:
        if ((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')
            return 0;
        p->state = S_AFTER;
        return after_value(p, c, cb, ctx);
    case S_AFTER:
        return after_value(p, c, cb, ctx);
    case S_DONE:
        return is_space(c) ? 0 : -1;
    default:
        return -1;
    }
}

int pollp_next(const struct poll_parser *p, uint32_t *epoch, uint32_t *seq)
{
    if (!(p->flags & FL_HAVE_NEXT))
        return 0;
    *epoch = p->id.epoch;
    *seq = p->id.seq;
    return 1;
}

enum poll_result pollp_feed(struct poll_parser *p, const char *buf, size_t len,
                           const struct poll_callbacks *cb, void *ctx)
{
    if (p->state == S_ERROR)
        return POLL_ERROR;
    for (size_t i = 0; i < len; i++)
        if (step(p, (unsigned char)buf[i], cb, ctx) != 0) {
            p->state = S_ERROR;
            return POLL_ERROR;
        }
    return p->state == S_DONE ? POLL_DONE : POLL_MORE;
}
