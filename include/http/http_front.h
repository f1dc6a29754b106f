/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP front door: evhttp accepts and parses requests, answers errors,
 * and starts streams for the routes the transports registered
 * (/stats and the like are admin.c's). */
#ifndef HTTPDCNODE_HTTP_FRONT_H
#define HTTPDCNODE_HTTP_FRONT_H

#include <event2/event.h>
#include <stdint.h>

#include "lib/carry.h"
#include "http/http_config.h"

struct evhttp_request;

/* How a transport starts a stream for uid: -1 when it could not (503). */
typedef int (*http_stream_start_fn)(struct evhttp_request *req, uint32_t uid);

/* At startup, by a transport: GET or HEAD prefix<uid> starts a stream
 * with start (after the drain, uid and token checks); with cors, OPTIONS
 * prefix... answers a CORS preflight. At most HTTP_FRONT_ROUTES. */
#define HTTP_FRONT_ROUTES 8
int http_front_route(const char *prefix, http_stream_start_fn start, int cors);

/* Configures the door's files (cors, client_addr, client_post, web) from
 * cfg, which must outlive the server, and listens. */
int http_front_start(struct event_base *base, const struct http_config *cfg);
/* Stops accepting and frees evhttp (and streams still in their welcome). */
void http_front_stop(void);

/* A hot upgrade (upgrade/): the listening socket stops accepting while a
 * hand-over is under way (and again if it fails), and goes to the process
 * taking over, which takes it (before http_front_start) instead of
 * binding one: connections waiting in its queue are accepted there. */
#define HTTP_FRONT_CARRY_TAG CARRY_TAG('H', 'T', 'T', 'P')
#define HTTP_FRONT_CARRY_VERSION 1
struct carry_out;
struct carry_in;
void http_front_pause(int paused);
int http_front_carry_export(struct carry_out *o);
int http_front_carry_take(struct carry_in *rec, uint16_t version, const int *fds, uint32_t nfds);

#endif
