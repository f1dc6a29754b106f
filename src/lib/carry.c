/* SPDX-License-Identifier: Apache-2.0 */
/* Carried state: see carry.h. */
#include "lib/carry.h"

#include <stdlib.h>
#include <string.h>

#define HEADER 12u                 /* tag, version, pad, length */

void carry_out_init(struct carry_out *o) { memset(o, 0, sizeof *o); }

void carry_out_free(struct carry_out *o)
{
    free(o->buf);
    free(o->fds);
    memset(o, 0, sizeof *o);
}

static int room(struct carry_out *o, size_t n)
{
    if (o->failed)
        return -1;
    if (o->len + n <= o->cap)
        return 0;
    size_t cap = o->cap ? o->cap : 65536;
    while (cap < o->len + n)
        cap *= 2;
    char *b = realloc(o->buf, cap);
    if (!b) {
        o->failed = 1;
        return -1;
    }
    o->buf = b;
    o->cap = cap;
    return 0;
}

void carry_put(struct carry_out *o, const void *p, size_t n)
{
    if (n && room(o, n) == 0) {
        memcpy(o->buf + o->len, p, n);
        o->len += n;
    }
}

void carry_u8(struct carry_out *o, uint8_t v) { carry_put(o, &v, 1); }
void carry_u16(struct carry_out *o, uint16_t v) { carry_put(o, &v, 2); }
void carry_u32(struct carry_out *o, uint32_t v) { carry_put(o, &v, 4); }
void carry_u64(struct carry_out *o, uint64_t v) { carry_put(o, &v, 8); }

uint32_t carry_fd(struct carry_out *o, int fd)
{
    if (o->nfds == o->fds_cap && !o->failed) {
        uint32_t n = o->fds_cap ? o->fds_cap * 2 : 256;
        int *f = realloc(o->fds, n * sizeof *f);
        if (!f)
            o->failed = 1;
        else {
            o->fds = f;
            o->fds_cap = n;
        }
    }
    if (o->failed)
        return 0;
    o->fds[o->nfds] = fd;
    return o->nfds++;
}

size_t carry_begin(struct carry_out *o, uint32_t tag, uint16_t version)
{
    size_t at = o->len;
    carry_u32(o, tag);
    carry_u16(o, version);
    carry_u16(o, 0);
    carry_u32(o, 0);
    return at;
}

void carry_end(struct carry_out *o, size_t at)
{
    if (o->failed)
        return;
    uint32_t len = (uint32_t)(o->len - at - HEADER);
    memcpy(o->buf + at + 8, &len, 4);
}

void carry_in_init(struct carry_in *in, const void *p, size_t n)
{
    in->p = p;
    in->end = in->p + n;
    in->failed = 0;
}

size_t carry_left(const struct carry_in *in) { return (size_t)(in->end - in->p); }

const void *carry_view(struct carry_in *in, size_t n)
{
    if (in->failed || carry_left(in) < n) {
        in->failed = 1;
        return NULL;
    }
    const void *at = in->p;
    in->p += n;
    return at;
}

void carry_get(struct carry_in *in, void *p, size_t n)
{
    const void *at = carry_view(in, n);
    if (at)
        memcpy(p, at, n);
    else
        memset(p, 0, n);
}

uint8_t carry_get_u8(struct carry_in *in)
{
    uint8_t v;
    carry_get(in, &v, 1);
    return v;
}

uint16_t carry_get_u16(struct carry_in *in)
{
    uint16_t v;
    carry_get(in, &v, 2);
    return v;
}

uint32_t carry_get_u32(struct carry_in *in)
{
    uint32_t v;
    carry_get(in, &v, 4);
    return v;
}

uint64_t carry_get_u64(struct carry_in *in)
{
    uint64_t v;
    carry_get(in, &v, 8);
    return v;
}

int carry_next(struct carry_in *all, uint32_t *tag, uint16_t *version, struct carry_in *rec)
{
    if (carry_left(all) == 0)
        return 0;
    *tag = carry_get_u32(all);
    *version = carry_get_u16(all);
    (void)carry_get_u16(all);
    uint32_t len = carry_get_u32(all);
    const void *p = carry_view(all, len);
    if (!p)
        return -1;
    carry_in_init(rec, p, len);
    return 1;
}

int carry_find(const struct carry_in *all, uint32_t tag, uint16_t *version, struct carry_in *rec)
{
    struct carry_in walk = *all;
    uint32_t t;
    int r;
    while ((r = carry_next(&walk, &t, version, rec)) == 1)
        if (t == tag)
            return 1;
    return 0;
}

const char *carry_tag_name(uint32_t tag, char out[5])
{
    for (int i = 0; i < 4; i++) {
        char c = (char)(tag >> (8 * i));
        out[i] = c >= 0x20 && c < 0x7f ? c : '?';
    }
    out[4] = '\0';
    return out;
}
