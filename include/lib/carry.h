/* SPDX-License-Identifier: Apache-2.0 */
/* State carried from a running process to the one taking over from it
 * (a hot upgrade): a byte buffer of records, each [tag u32][version u16]
 * [pad u16][length u32][payload], plus the descriptors the records name
 * by index (they travel beside the bytes, with SCM_RIGHTS). Both ends run
 * on the same host: numbers are in host order. Reads are bounded: a read
 * past a record's end gives zeros and marks the reader failed, so that an
 * importer checks once, at its end. */
#ifndef HTTPDCNODE_CARRY_H
#define HTTPDCNODE_CARRY_H

#include <stddef.h>
#include <stdint.h>

#define CARRY_TAG(a, b, c, d) \
    ((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | (uint32_t)(d) << 24)

struct carry_out {
    char *buf;
    size_t len, cap;
    int *fds;                  /* not owned: the writer's own descriptors */
    uint32_t nfds, fds_cap;
    int failed;                /* out of memory: nothing more is written */
};

void carry_out_init(struct carry_out *o);
void carry_out_free(struct carry_out *o);
void carry_put(struct carry_out *o, const void *p, size_t n);
void carry_u8(struct carry_out *o, uint8_t v);
void carry_u16(struct carry_out *o, uint16_t v);
void carry_u32(struct carry_out *o, uint32_t v);
void carry_u64(struct carry_out *o, uint64_t v);
/* A descriptor to pass: its index among those passed. */
uint32_t carry_fd(struct carry_out *o, int fd);
/* A record: begin returns where it starts, end writes its length. */
size_t carry_begin(struct carry_out *o, uint32_t tag, uint16_t version);
void carry_end(struct carry_out *o, size_t at);

struct carry_in {
    const char *p, *end;
    int failed;                /* read past the end, or a malformed record */
};

void carry_in_init(struct carry_in *in, const void *p, size_t n);
void carry_get(struct carry_in *in, void *p, size_t n);
uint8_t carry_get_u8(struct carry_in *in);
uint16_t carry_get_u16(struct carry_in *in);
uint32_t carry_get_u32(struct carry_in *in);
uint64_t carry_get_u64(struct carry_in *in);
/* n bytes in place, NULL (and failed) when fewer are left. */
const void *carry_view(struct carry_in *in, size_t n);
/* Bytes left unread. */
size_t carry_left(const struct carry_in *in);

/* The next record of all: 1 (rec is its payload), 0 at the end, -1 when
 * malformed. */
int carry_next(struct carry_in *all, uint32_t *tag, uint16_t *version, struct carry_in *rec);
/* The record tagged so in all (all is not moved): 1, or 0 when absent (or
 * the buffer is malformed). */
int carry_find(const struct carry_in *all, uint32_t tag, uint16_t *version, struct carry_in *rec);
/* A tag as its four letters, for log lines. */
const char *carry_tag_name(uint32_t tag, char out[5]);

#endif
