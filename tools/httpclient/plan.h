/* SPDX-License-Identifier: Apache-2.0 */
/* Checks that a run fits this host before anything is opened: sockets per
 * process under the open-files limit, connections per source address within
 * the local port range. */
#ifndef HTTPCLIENT_PLAN_H
#define HTTPCLIENT_PLAN_H

#include "options.h"

/* Raises the open-files limit to its hard limit and sets o->procs when it is
 * 0. Returns 0, or -1 after printing why the plan cannot work. */
int plan_check(struct client_opts *o);

#endif
