/* SPDX-License-Identifier: Apache-2.0 */
/* GET /metrics: the counters of stats.h and the delivery-time histogram in
 * the Prometheus text exposition format (version 0.0.4), every name
 * prefixed httpdcnode_. Loop thread only. */
#ifndef HTTPDCNODE_METRICS_H
#define HTTPDCNODE_METRICS_H

#include <stddef.h>
#include <stdio.h>

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
/* Room for the whole exposition, with margin. */
#define METRICS_MAX_BYTES 32768

/* Writes the exposition into buf; returns its length, 0 if size is too small. */
size_t metrics_format(char *buf, size_t size);

/* The first counter the metric table names that stats_collect does not
 * give, or NULL: a table out of step with stats.h (the unit test checks). */
const char *metrics_unknown_stat(void);

/* --list-counters: every counter of GET /stats ("counter NAME"), every
 * metric family ("metric httpdcnode_NAME TYPE") and each of its reason
 * labels ("label httpdcnode_NAME reason=R"), one a line, to out. */
void metrics_list(FILE *out);

#endif
