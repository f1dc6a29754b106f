/* SPDX-License-Identifier: Apache-2.0 */
/* The subscriber-token gate of every transport that opens a stream. */
#ifndef HTTPDCNODE_AUTH_HTTP_H
#define HTTPDCNODE_AUTH_HTTP_H

#include <stdint.h>

struct evhttp_request;

/* Loads --auth-secret-file (secret_file, "" for none); without it, says
 * once that anyone who reaches a non-loopback listen_host may read any
 * uid. -1 after one line on stderr (exit 2). */
int auth_http_configure(const char *secret_file, const char *listen_host, uint16_t listen_port);
void auth_http_free(void);

/* Call before opening uid's stream (GET or HEAD, any transport): 1 to go
 * on (the token's exp is handed to expiry.h for the stream opened next);
 * 0 when the request was refused, answered 403 with the reason, and
 * counted. Always 1 without --auth-secret-file. */
int auth_admit(struct evhttp_request *req, uint32_t uid);

#endif
