/* SPDX-License-Identifier: Apache-2.0 */
/* The private admin listener (--admin-listen, default 127.0.0.1:8001):
 * GET /stats (JSON counters), /metrics (Prometheus) and /probe (the latency
 * probe). The public listener answers these only when --admin-listen is the
 * same address as --listen. */
#ifndef HTTPDCNODE_ADMIN_H
#define HTTPDCNODE_ADMIN_H

#include <event2/event.h>
#include <event2/http.h>

#include "lib/carry.h"
#include "http/http_config.h"

/* Binds and serves the admin address. The default address being in use
 * (several servers on one host) is logged and the server runs without one.
 * Returns 0, or the exit status to end with: 2 when an address given with
 * --admin-listen cannot be bound. */
int admin_start(struct event_base *base, const struct admin_config *cfg);
/* Stops accepting and frees the admin listener's evhttp. */
void admin_stop(void);

/* A hot upgrade (upgrade/): as http_front.h's listening socket; a process
 * that ran without one hands over none, and the new one runs without. */
#define ADMIN_CARRY_TAG CARRY_TAG('A', 'D', 'M', 'N')
#define ADMIN_CARRY_VERSION 1
struct carry_out;
struct carry_in;
void admin_pause(int paused);
int admin_carry_export(struct carry_out *o);
int admin_carry_take(struct carry_in *rec, uint16_t version, const int *fds, uint32_t nfds);

/* Whether --admin-listen is --listen: the public listener then routes
 * through admin_route too. */
int admin_on_public(void);
/* Answers GET /stats, /metrics or /probe and returns 1; 0 for another path. */
int admin_route(struct evhttp_request *req, const char *path);

#endif
