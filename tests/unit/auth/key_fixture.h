/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The signing key both token tests share: a cmocka group setup and teardown
 * that make it from SECRET and free it.
 */
#ifndef TEST_AUTH_KEY_FIXTURE_H
#define TEST_AUTH_KEY_FIXTURE_H

#include <string.h>

#include "auth/auth_key.h"

#define SECRET "s3cret"
#define NOW 1700000000
#define EXP 1700000600

static struct auth_key *key;

static int setup(void **state)
{
    (void)state;
    key = auth_key_new(SECRET, strlen(SECRET));
    return key ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    auth_key_free(key);
    return 0;
}

#endif
