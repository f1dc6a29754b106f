/* Where the Erlang cookie comes from when --cookie is not given. */
#ifndef HTTPDCNODE_COOKIE_H
#define HTTPDCNODE_COOKIE_H

#include <stddef.h>

/* $ERLANG_COOKIE, else ~/.erlang.cookie (what erl itself uses). Prints one
 * line saying what to do and returns -1 when neither gives a cookie. */
int cookie_find(char *out, size_t size);

#endif
