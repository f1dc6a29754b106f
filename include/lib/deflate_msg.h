/* SPDX-License-Identifier: Apache-2.0 */
/* One message at a time through zlib's raw deflate, as permessage-deflate
 * (RFC 7692) carries it with no context takeover either way: each message
 * compressed or inflated on its own, so one deflater and one inflater
 * serve every connection in turn, and a message compressed once can go to
 * every receiver. The message is the deflate blocks without the 4 bytes
 * 00 00 ff ff of the final empty block (7.2.1); inflating appends them.
 *
 * Both contexts are made at first use and kept: the deflater ~268 KB
 * (zlib's default window and memory level), the inflater ~44 KB. One
 * thread only (the event loop's). */
#ifndef HTTPDCNODE_DEFLATE_MSG_H
#define HTTPDCNODE_DEFLATE_MSG_H

#include <stddef.h>

/* Room the compressed form of len bytes may need (out of deflate_msg). */
size_t deflate_msg_bound(size_t len);

/* in[0..len) compressed into out[0..cap): its length, or 0 when it would
 * not fit in cap or zlib failed (out of memory: logged once). */
size_t deflate_msg(const void *in, size_t len, void *out, size_t cap);

enum inflate_msg_result {
    INFLATE_MSG_OK = 0,
    INFLATE_MSG_TOO_BIG,        /* more than cap bytes: inflating stopped there */
    INFLATE_MSG_BAD,            /* not deflate data, or more after its end */
    INFLATE_MSG_NO_MEMORY,
};

/* The message in[0..len) inflated into out (room for cap + 1 bytes), *n
 * its length (at most cap). However much the input would make, inflating
 * stops at cap + 1 bytes (a bomb costs no more than that). */
enum inflate_msg_result inflate_msg(const void *in, size_t len, void *out, size_t cap, size_t *n);

/* Frees both contexts (at exit). */
void deflate_msg_free(void);

#endif
