/* SPDX-License-Identifier: Apache-2.0 */
/* The token secret from --auth-secret-file, read as erl reads its cookie. */
#ifndef HTTPDCNODE_AUTH_SECRET_H
#define HTTPDCNODE_AUTH_SECRET_H

#include <stddef.h>

/* Longest secret taken; HMAC hashes longer keys down anyway. */
#define AUTH_SECRET_MAX 4096
#define AUTH_SECRET_MAX_TEXT "4096"

/* The file's bytes, one trailing newline removed, into out[AUTH_SECRET_MAX];
 * *len their count. Refuses a file that group or others may access, that is
 * not a regular file, larger than AUTH_SECRET_MAX or empty: -1 after one
 * line on stderr saying why and what to do. */
int auth_secret_read(const char *path, unsigned char *out, size_t *len);

#endif
