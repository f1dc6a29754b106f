/* SPDX-License-Identifier: Apache-2.0 */
/* httpclient: load client for streaming (chunked) HTTP servers. */
#include "coordinator.h"
#include "options.h"
#include "plan.h"

int main(int argc, char **argv)
{
    static struct client_opts o;
    int rc = opts_parse(&o, argc, argv);
    if (rc > 0)
        return 0;
    if (rc < 0 || plan_check(&o))
        return 2;
    return coordinator_run(&o);
}
