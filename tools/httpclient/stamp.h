/* SPDX-License-Identifier: Apache-2.0 */
/* Incremental scanners shared by the transport parsers: the publisher's
 * "t=<ns>;" stamp at the start of a payload (and the "n=<number>;" that
 * may follow it), and a message id
 * "EPOCH:SEQ" (8 hex digits, ':', decimal). Each takes one byte at a time,
 * so a parser can feed them as bytes arrive and never buffers. */
#ifndef HTTPCLIENT_STAMP_H
#define HTTPCLIENT_STAMP_H

#include <stdint.h>

/* 2^64 > 10^19: ns since the epoch has 19 digits until the year 2286. */
#define STAMP_MAX_DIGITS 19
/* "n=<number>;" right after the stamp: a message number (msggen --seq),
 * below 10^9. */
#define STAMP_N_MAX_DIGITS 9

/* t, =, digits, ;, then the optional n, =, digits, ;. */
enum { STAMP_T, STAMP_EQ, STAMP_DIGITS, STAMP_N, STAMP_N_EQ, STAMP_N_DIGITS, STAMP_FOUND,
       STAMP_NONE };

struct stamp_scan {
    uint64_t ts;
    uint32_t n;             /* the message number, when has_n */
    uint8_t phase;
    uint8_t digits;
    uint8_t has_n;
};

static inline void stamp_start(struct stamp_scan *s)
{
    s->ts = 0;
    s->n = 0;
    s->phase = STAMP_T;
    s->digits = 0;
    s->has_n = 0;
}

/* Whether more bytes can still change the outcome. */
static inline int stamp_open(const struct stamp_scan *s)
{
    return s->phase < STAMP_FOUND;
}

/* The stamp was read (what may follow it is not needed for that). */
static inline int stamp_found(const struct stamp_scan *s)
{
    return s->phase >= STAMP_N && s->phase <= STAMP_FOUND;
}

/* The text that could hold the stamp ended: settled either way. */
static inline void stamp_settle(struct stamp_scan *s)
{
    if (s->phase < STAMP_N)
        s->phase = STAMP_NONE;
    else if (s->phase < STAMP_FOUND)
        s->phase = STAMP_FOUND;
}

static inline void stamp_byte(struct stamp_scan *s, unsigned c)
{
    switch (s->phase) {
    case STAMP_T:
        s->phase = c == 't' ? STAMP_EQ : STAMP_NONE;
        break;
    case STAMP_EQ:
        s->phase = c == '=' ? STAMP_DIGITS : STAMP_NONE;
        break;
    case STAMP_DIGITS:
        if (c >= '0' && c <= '9' && s->digits < STAMP_MAX_DIGITS) {
            s->ts = s->ts * 10 + (c - '0');
            s->digits++;
        } else {
            s->phase = c == ';' && s->digits ? STAMP_N : STAMP_NONE;
        }
        break;
    case STAMP_N:
        s->phase = c == 'n' ? STAMP_N_EQ : STAMP_FOUND;
        break;
    case STAMP_N_EQ:
        s->phase = c == '=' ? STAMP_N_DIGITS : STAMP_FOUND;
        s->digits = 0;
        break;
    case STAMP_N_DIGITS:
        if (c >= '0' && c <= '9' && s->digits < STAMP_N_MAX_DIGITS) {
            s->n = s->n * 10 + (c - '0');
            s->digits++;
        } else {
            s->has_n = c == ';' && s->digits;
            s->phase = STAMP_FOUND;
        }
        break;
    default:
        break;
    }
}

/* An id in the making. pos: hex digits of the epoch seen (0..8), then 9
 * after the ':', then 10 + decimal digits of the sequence. A topic's id
 * (httpclient --topics) leads with its topic, "t:N@": topic is N + 1 then
 * (0: a uid's id), read while pos is 0 (tpos: where in "t:N@"). */
struct id_scan {
    uint32_t epoch;
    uint32_t seq;
    unsigned topic : 24;    /* below 2^24: --topics at most 1,000,000 */
    unsigned tpos : 2;      /* 1: after 't', 2: after "t:", 3: digits of N */
    unsigned bad : 1;
    unsigned pos : 5;       /* an id is at most 19 bytes: 31 is past any */
};

static inline void id_start(struct id_scan *s)
{
    s->epoch = s->seq = s->topic = 0;
    s->pos = 0;
    s->bad = 0;
    s->tpos = 0;
}

static inline int hex_digit(unsigned c)
{
    if (c >= '0' && c <= '9')
        return (int)(c - '0');
    if (c >= 'a' && c <= 'f')
        return (int)(c - 'a' + 10);
    if (c >= 'A' && c <= 'F')
        return (int)(c - 'A' + 10);
    return -1;
}

static inline void id_byte(struct id_scan *s, unsigned c)
{
    if (s->bad)
        return;
    /* "t:N@" ahead of a topic's id ('t' is no hex digit) */
    if (s->pos == 0 && (s->tpos || c == 't')) {
        if (s->tpos == 0) {
            s->tpos = 1;
        } else if (s->tpos == 1) {
            s->bad = c != ':';
            s->tpos = 2;
            s->topic = 1;
        } else if (c == '@' && s->tpos == 3) {
            s->tpos = 0;                 /* the id proper follows */
        } else if (c >= '0' && c <= '9' && s->topic < (1u << 24) / 10) {
            s->topic = (s->topic - 1) * 10 + (c - '0') + 1;
            s->tpos = 3;
        } else {
            s->bad = 1;
        }
        return;
    }
    if (s->pos < 8) {
        int h = hex_digit(c);
        if (h < 0)
            s->bad = 1;
        else
            s->epoch = s->epoch << 4 | (uint32_t)h;
        s->pos++;
    } else if (s->pos == 8) {
        s->bad = c != ':';
        s->pos++;
    } else if (c >= '0' && c <= '9' && s->seq <= (UINT32_MAX - (c - '0')) / 10 && s->pos < 31) {
        s->seq = s->seq * 10 + (c - '0');
        s->pos++;
    } else {
        s->bad = 1;
    }
}

/* A complete, well-formed id: 8 hex digits, ':', at least one digit. */
static inline int id_ok(const struct id_scan *s)
{
    return !s->bad && s->pos > 9;
}

/* UTF-8 well-formedness (RFC 3629), a byte at a time. *state (0 at a
 * character's start) holds the continuation bytes still expected (low 2
 * bits) and a narrower range for the next one (bits 2-4: 1 = A0..BF,
 * 2 = 80..9F, 3 = 90..BF, 4 = 80..8F), which rules out overlong forms,
 * surrogates and code points past U+10FFFF. Returns 0 on a bad byte. */
static inline int utf8_byte(uint8_t *state, unsigned c)
{
    unsigned left = *state & 3u, range = *state >> 2;
    if (left) {
        unsigned lo = range == 1 ? 0xa0 : range == 3 ? 0x90 : 0x80;
        unsigned hi = range == 2 ? 0x9f : range == 4 ? 0x8f : 0xbf;
        if (c < lo || c > hi)
            return 0;
        *state = (uint8_t)(left - 1);
        return 1;
    }
    if (c < 0x80)
        return 1;
    if (c < 0xc2 || c > 0xf4)
        return 0;
    if (c < 0xe0)
        *state = 1;
    else if (c < 0xf0)
        *state = (uint8_t)(2 | (c == 0xe0 ? 1u << 2 : c == 0xed ? 2u << 2 : 0));
    else
        *state = (uint8_t)(3 | (c == 0xf0 ? 3u << 2 : c == 0xf4 ? 4u << 2 : 0));
    return 1;
}

/* Whether a character is complete (no continuation byte expected). */
static inline int utf8_complete(uint8_t state)
{
    return (state & 3u) == 0;
}

#endif
