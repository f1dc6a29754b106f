/* SPDX-License-Identifier: Apache-2.0 */
/* Resource plan: see plan.h. */
#include "plan.h"

#include <stdio.h>
#include <sys/resource.h>

#include "conn.h"

/* Descriptors a worker needs besides its sockets: stdio, its socket pair,
 * libevent's epoll and signal fds. */
#define FD_RESERVE 32

static unsigned long socket_budget(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl))
        return CONN_MAX_PER_PROC;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    unsigned long budget = rl.rlim_cur > FD_RESERVE ? (unsigned long)rl.rlim_cur - FD_RESERVE : 0;
    return budget < CONN_MAX_PER_PROC ? budget : CONN_MAX_PER_PROC;
}

static unsigned long port_range(void)
{
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    unsigned long lo = 32768, hi = 60999;
    if (f) {
        if (fscanf(f, "%lu %lu", &lo, &hi) != 2 || hi < lo)
            lo = 32768, hi = 60999;
        fclose(f);
    }
    return hi - lo + 1;
}

int plan_check(struct client_opts *o)
{
    unsigned long budget = socket_budget();
    if (budget == 0) {
        fprintf(stderr, "httpclient: the open-files limit leaves no room for sockets\n");
        return -1;
    }
    unsigned long need = (o->conns + budget - 1) / budget;
    if (o->procs == 0) {
        if (need > 256) {
            fprintf(stderr,
                    "httpclient: %lu connections need %lu processes of %lu sockets, over 256\n",
                    o->conns, need, budget);
            return -1;
        }
        o->procs = (unsigned)need;
    } else if ((o->conns + o->procs - 1) / o->procs > budget) {
        fprintf(stderr,
                "httpclient: %lu connections in %u processes is %lu sockets per process, over the "
                "limit of %lu per process (open-files limit): use --procs %lu or more\n",
                o->conns, o->procs, (o->conns + o->procs - 1) / o->procs, budget, need);
        return -1;
    }
    if (o->procs > o->conns)
        o->procs = (unsigned)o->conns;

    unsigned long ports = port_range();
    unsigned long nsrc = o->nsrc ? o->nsrc : 1;
    unsigned long per_src = (o->conns + nsrc - 1) / nsrc;
    if (per_src > ports) {
        fprintf(stderr,
                "httpclient: %lu connections from %lu source address%s is %lu per address, "
                "over the %lu local ports (ip_local_port_range): give --src with at least %lu "
                "addresses\n",
                o->conns, nsrc, nsrc == 1 ? "" : "es", per_src, ports,
                (o->conns + ports - 1) / ports);
        return -1;
    }
    return 0;
}
