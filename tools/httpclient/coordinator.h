/* SPDX-License-Identifier: Apache-2.0 */
/* The parent process: forks the workers, adds up their reports, prints a
 * progress line every second, decides when the run ends (--until-msgs,
 * --hold, every connection ended, SIGINT/SIGTERM, --max-time) and prints
 * the summary. */
#ifndef HTTPCLIENT_COORDINATOR_H
#define HTTPCLIENT_COORDINATOR_H

#include "options.h"

/* Returns the process exit code. */
int coordinator_run(const struct client_opts *o);

#endif
