/* SPDX-License-Identifier: Apache-2.0 */
/* What the setup files share: see erl_setup_int.h. */
#include "erl/erl_setup_int.h"

#include <unistd.h>

ei_cnode erl_setup_ec;
int erl_setup_listen_fd = -1, erl_setup_listen_port;
int erl_setup_stop_fd = -1;
int erl_setup_wake_fd = -1;
int erl_setup_queue_fd = -1;
pthread_mutex_t erl_setup_lock = PTHREAD_MUTEX_INITIALIZER;
int erl_setup_stopping;

void erl_setup_poke(int efd)
{
    uint64_t one = 1;
    (void)!write(efd, &one, sizeof one);    /* a counter far from overflow: cannot fail */
}
