/* SPDX-License-Identifier: Apache-2.0 */
/* Byte-at-a-time HTTP response state machine; chunk data is skipped in bulk
 * once its "t=<ns>;" prefix is settled. See resp_parser.h. */
#include "resp_parser.h"

enum {
    ST_PROTO, ST_VERSION, ST_STATUS, ST_REASON,
    ST_HDR_START, ST_HDR_NAME, ST_HDR_SKIP, ST_HDR_END,
    ST_TE_VALUE, ST_CL_VALUE,
    ST_CSIZE, ST_CEXT, ST_CSIZE_LF,
    ST_DATA, ST_DATA_CR, ST_DATA_LF,
    ST_TRAILER_START, ST_TRAILER_SKIP, ST_TRAILER_END,
    ST_BODY_LEN, ST_BODY_EOF,
    ST_DONE, ST_STOPPED, ST_ERROR
};

enum { TS_T, TS_EQ, TS_DIGITS, TS_FOUND, TS_NONE };

#define F_CAND_TE 0x01u   /* header name may still be Transfer-Encoding */
#define F_CAND_CL 0x02u   /* header name may still be Content-Length */
#define F_CHUNKED 0x04u
#define F_HAVE_CL 0x08u

static const char k_proto[] = "HTTP/";
static const char k_te[] = "transfer-encoding";
static const char k_cl[] = "content-length";
static const char k_chunked[] = "chunked";

/* A chunk size above this is taken as garbage rather than data to wait for. */
#define MAX_CHUNK 0x0fffffffu
/* 2^64 > 10^19: ns since the epoch has 19 digits until the year 2286. */
#define MAX_TS_DIGITS 19

void rp_init(struct resp_parser *p)
{
    p->ts = 0;
    p->remain = 0;
    p->status = 0;
    p->state = ST_PROTO;
    p->pos = 0;
    p->flags = 0;
    p->ts_phase = TS_NONE;
}

static unsigned lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (unsigned char)lower(c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

static void name_char(struct resp_parser *p, unsigned c)
{
    if ((p->flags & F_CAND_TE) && (p->pos >= sizeof k_te - 1 || (unsigned char)k_te[p->pos] != c))
        p->flags &= (uint8_t)~F_CAND_TE;
    if ((p->flags & F_CAND_CL) && (p->pos >= sizeof k_cl - 1 || (unsigned char)k_cl[p->pos] != c))
        p->flags &= (uint8_t)~F_CAND_CL;
    p->pos++;
    if (!(p->flags & (F_CAND_TE | F_CAND_CL)))
        p->state = ST_HDR_SKIP;
}

static void name_colon(struct resp_parser *p)
{
    if ((p->flags & F_CAND_TE) && p->pos == sizeof k_te - 1) {
        p->state = ST_TE_VALUE;
        p->pos = 0;
    } else if ((p->flags & F_CAND_CL) && p->pos == sizeof k_cl - 1) {
        p->state = ST_CL_VALUE;
        p->flags |= F_HAVE_CL;
        p->remain = 0;
    } else {
        p->state = ST_HDR_SKIP;
    }
}

static void te_char(struct resp_parser *p, unsigned c)
{
    /* "chunked" has no repeated prefix, so a mismatch restarts at 0 or 1. */
    if (c == (unsigned char)k_chunked[p->pos]) {
        if (++p->pos == sizeof k_chunked - 1) {
            p->flags |= F_CHUNKED;
            p->pos = 0;
        }
    } else {
        p->pos = c == 'c' ? 1 : 0;
    }
}

static void cl_char(struct resp_parser *p, unsigned c)
{
    if (c < '0' || c > '9' || !(p->flags & F_HAVE_CL))
        return;
    if (p->remain > (UINT32_MAX - 9) / 10) {
        /* Too long to count: read until the close instead. */
        p->flags &= (uint8_t)~F_HAVE_CL;
        return;
    }
    p->remain = p->remain * 10 + (c - '0');
}

/* The next chunk's size line starts. */
static void size_start(struct resp_parser *p)
{
    p->state = ST_CSIZE;
    p->remain = 0;
    p->pos = 0;
}

/* Returns nonzero if on_headers asked to stop. */
static int headers_done(struct resp_parser *p, const struct resp_callbacks *cb, void *ctx)
{
    int chunked = (p->flags & F_CHUNKED) != 0;
    if (cb->on_headers && cb->on_headers(ctx, p->status, chunked)) {
        p->state = ST_STOPPED;
        return 1;
    }
    if (chunked) {
        size_start(p);
    } else if (p->flags & F_HAVE_CL) {
        p->state = p->remain ? ST_BODY_LEN : ST_DONE;
    } else {
        p->state = ST_BODY_EOF;
    }
    return 0;
}

static void size_done(struct resp_parser *p)
{
    if (p->remain == 0) {
        p->state = ST_TRAILER_START;
    } else {
        p->state = ST_DATA;
        p->ts_phase = TS_T;
        p->ts = 0;
        p->pos = 0;
    }
}

static void ts_char(struct resp_parser *p, unsigned c)
{
    switch (p->ts_phase) {
    case TS_T:
        p->ts_phase = c == 't' ? TS_EQ : TS_NONE;
        break;
    case TS_EQ:
        p->ts_phase = c == '=' ? TS_DIGITS : TS_NONE;
        break;
    case TS_DIGITS:
        if (c >= '0' && c <= '9' && p->pos < MAX_TS_DIGITS) {
            p->ts = p->ts * 10 + (c - '0');
            p->pos++;
        } else if (c == ';' && p->pos > 0) {
            p->ts_phase = TS_FOUND;
        } else {
            p->ts_phase = TS_NONE;
        }
        break;
    default:
        break;
    }
}

/* Passes over as much of the current chunk or body as avail bytes hold,
 * in one step; returns how many that is. */
static size_t skip_data(struct resp_parser *p, size_t avail)
{
    size_t n = avail < p->remain ? avail : p->remain;
    p->remain -= (uint32_t)n;
    return n;
}

static void chunk_data_done(struct resp_parser *p, const struct resp_callbacks *cb, void *ctx)
{
    p->state = ST_DATA_CR;
    if (cb->on_chunk)
        cb->on_chunk(ctx, p->ts_phase == TS_FOUND, p->ts);
}

enum rp_result rp_feed(struct resp_parser *p, const char *buf, size_t len,
                       const struct resp_callbacks *cb, void *ctx)
{
    size_t i = 0;
    while (i < len) {
        unsigned c = (unsigned char)buf[i];
        switch (p->state) {
        case ST_PROTO:
            if (c != (unsigned char)k_proto[p->pos])
                goto bad;
            if (++p->pos == sizeof k_proto - 1)
                p->state = ST_VERSION;
            break;
        case ST_VERSION:
            if (c == ' ') {
                p->state = ST_STATUS;
                p->pos = 0;
            } else if (c == '\n' || c == '\r') {
                goto bad;
            }
            break;
        case ST_STATUS:
            if (c >= '0' && c <= '9' && p->pos < 3) {
                p->status = (uint16_t)(p->status * 10 + (c - '0'));
                p->pos++;
            } else if (p->pos == 3 && (c == ' ' || c == '\r' || c == '\n')) {
                p->state = c == '\n' ? ST_HDR_START : ST_REASON;
            } else {
                goto bad;
            }
            break;
        case ST_HDR_START:
            if (c == '\r') {
                p->state = ST_HDR_END;
            } else if (c == '\n') {
                if (headers_done(p, cb, ctx))
                    return RP_STOPPED;
            } else {
                p->state = ST_HDR_NAME;
                p->pos = 0;
                p->flags |= F_CAND_TE | F_CAND_CL;
                name_char(p, lower((unsigned char)c));
            }
            break;
        case ST_HDR_NAME:
            if (c == ':')
                name_colon(p);
            else if (c == '\n')
                p->state = ST_HDR_START;
            else
                name_char(p, lower((unsigned char)c));
            break;
        case ST_REASON:
        case ST_HDR_SKIP:
            if (c == '\n')
                p->state = ST_HDR_START;
            break;
        case ST_HDR_END:
            if (c != '\n')
                goto bad;
            if (headers_done(p, cb, ctx))
                return RP_STOPPED;
            break;
        case ST_TE_VALUE:
            if (c == '\n')
                p->state = ST_HDR_START;
            else
                te_char(p, lower((unsigned char)c));
            break;
        case ST_CL_VALUE:
            if (c == '\n')
                p->state = ST_HDR_START;
            else
                cl_char(p, c);
            break;
        case ST_CSIZE: {
            int h = hexval((unsigned char)c);
            if (h >= 0) {
                if (p->remain > MAX_CHUNK >> 4)
                    goto bad;
                p->remain = p->remain * 16 + (uint32_t)h;
                p->pos++;
            } else if (p->pos == 0) {
                goto bad;
            } else if (c == ';' || c == ' ' || c == '\t') {
                p->state = ST_CEXT;
            } else if (c == '\r') {
                p->state = ST_CSIZE_LF;
            } else if (c == '\n') {
                size_done(p);
            } else {
                goto bad;
            }
            break;
        }
        case ST_CEXT:
            if (c == '\n')
                size_done(p);
            break;
        case ST_CSIZE_LF:
            if (c != '\n')
                goto bad;
            size_done(p);
            break;
        case ST_DATA:
            if (p->ts_phase < TS_FOUND) {
                ts_char(p, c);
                if (--p->remain == 0)
                    chunk_data_done(p, cb, ctx);
            } else {
                /* The rest of the chunk: skip it in one step. */
                i += skip_data(p, len - i);
                if (p->remain == 0)
                    chunk_data_done(p, cb, ctx);
                continue;
            }
            break;
        case ST_DATA_CR:
        case ST_DATA_LF:
            if (c == '\r' && p->state == ST_DATA_CR) {
                p->state = ST_DATA_LF;
                break;
            }
            if (c != '\n')     /* a bare LF ends the chunk too */
                goto bad;
            size_start(p);
            break;
        case ST_TRAILER_START:
            if (c == '\r')
                p->state = ST_TRAILER_END;
            else if (c == '\n')
                p->state = ST_DONE;
            else
                p->state = ST_TRAILER_SKIP;
            break;
        case ST_TRAILER_SKIP:
            if (c == '\n')
                p->state = ST_TRAILER_START;
            break;
        case ST_TRAILER_END:
            if (c != '\n')
                goto bad;
            p->state = ST_DONE;
            break;
        case ST_BODY_LEN: {
            size_t n = skip_data(p, len - i);
            if (cb->on_body)
                cb->on_body(ctx, buf + i, n);
            i += n;
            if (p->remain == 0)
                p->state = ST_DONE;
            continue;
        }
        case ST_BODY_EOF:
            if (cb->on_body)
                cb->on_body(ctx, buf + i, len - i);
            return RP_MORE;
        case ST_DONE:
            return RP_DONE;
        case ST_STOPPED:
            return RP_STOPPED;
        default:
            return RP_ERROR;
        }
        i++;
    }
    if (p->state == ST_DONE)
        return RP_DONE;
    if (p->state == ST_STOPPED)
        return RP_STOPPED;
    return RP_MORE;

bad:
    p->state = ST_ERROR;
    return RP_ERROR;
}

enum rp_result rp_eof(const struct resp_parser *p)
{
    return p->state == ST_BODY_EOF || p->state == ST_DONE ? RP_DONE : RP_ERROR;
}
