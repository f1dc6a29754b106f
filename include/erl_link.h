/* The Erlang connections of the C-node thread (only that thread uses them). */
#ifndef HTTPDCNODE_ERL_LINK_H
#define HTTPDCNODE_ERL_LINK_H

#include <ei.h>

#define ERL_LINK_MAX 64

struct erl_socket;

struct erl_link {
    int fd;
    const struct erl_socket *sock;   /* its buffered socket (erl_socket.h) */
    int is_master;
    int broken;          /* a send failed or timed out: drop it, send no more */
    char node[MAXNODELEN + 1];
};

/* Returns the new link's index, or -1 when the table is full (logged). */
int erl_link_add(int fd, const char *node, int is_master);
/* Closes link i; the last link moves into slot i. */
void erl_link_remove(int i);
int erl_link_count(void);
struct erl_link *erl_link_at(int i);
struct erl_link *erl_link_find(const char *node);
/* Sends a distribution tick on every link (used while we cannot read). A
 * tick the socket takes only in part is completed within
 * ERL_LINK_TICK_REST_MS, or the link is shut down and marked broken: a
 * partial packet followed by anything else would corrupt the stream. */
void erl_link_tick_all(void);

#define ERL_LINK_TICK_REST_MS 1000
void erl_link_close_all(void);

#endif
