/* SPDX-License-Identifier: Apache-2.0 */
/* Where the Erlang cookie comes from: --cookie-file, $ERLANG_COOKIE or
 * ~/.erlang.cookie. */
#ifndef HTTPDCNODE_ERL_COOKIE_H
#define HTTPDCNODE_ERL_COOKIE_H

#include <stddef.h>

#define COOKIE_MAX 255

/* Reads a cookie file: one trailing newline removed; refused (one line on
 * stderr, -1) when group or others have any permission bit on it, as erl
 * refuses ~/.erlang.cookie, or when it is unreadable, empty, longer than
 * COOKIE_MAX or holds anything but printable ASCII. */
int erl_cookie_read_file(const char *path, char *out, size_t size);

/* $ERLANG_COOKIE, else ~/.erlang.cookie (what erl itself uses, with the same
 * permission check). Prints one line saying what to do and returns -1 when
 * neither gives a cookie or the file is refused. */
int erl_cookie_find(char *out, size_t size);

#endif
