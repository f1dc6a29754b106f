/* The HTTP front door: evhttp accepts and parses requests, answers errors,
 * and starts streams for GET /test/N (/stats and the like are admin.c's). */
#ifndef HTTPDCNODE_HTTP_FRONT_H
#define HTTPDCNODE_HTTP_FRONT_H

#include <event2/event.h>

#include "options.h"

int http_front_start(struct event_base *base, const struct options *opts);
/* Stops accepting and frees evhttp (and streams still in their welcome). */
void http_front_stop(void);

#endif
