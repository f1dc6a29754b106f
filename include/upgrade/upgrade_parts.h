/* SPDX-License-Identifier: Apache-2.0 */
/* Inside a hot upgrade (upgrade.h): what both sides share. The records a
 * hand-over carries, each of its module and version, and the hello in
 * which the new process says what it reads and with what options it runs.
 * Not for the rest of the server. */
#ifndef HTTPDCNODE_UPGRADE_PARTS_H
#define HTTPDCNODE_UPGRADE_PARTS_H

#include "lib/carry.h"

#include <stddef.h>
#include <stdint.h>

/* The control socket itself, handed over so that its name never goes. */
#define UPGRADE_CARRY_TAG CARRY_TAG('U', 'P', 'G', 'R')
#define UPGRADE_CARRY_VERSION 1

struct upgrade_part {
    uint32_t tag;
    uint16_t version;            /* the one this build writes, and the newest it reads */
    const char *what;
};

extern const struct upgrade_part upgrade_parts[];
extern const size_t upgrade_nparts;
const struct upgrade_part *upgrade_part_find(uint32_t tag);

/* The format this process says it writes and reads: UPGRADE_FORMAT, or
 * $HTTPDCNODE_TAKEOVER_FORMAT (tests make a process of another format
 * with it, to see it refused). */
uint32_t upgrade_format(void);

/* Messages on the control socket: their first byte. */
enum {
    MSG_HELLO = 'H',     /* new: format, descriptors it may hold, parts it reads, options */
    MSG_REFUSED = 'R',   /* running: why not (text); it serves on */
    MSG_ACCEPTED = 'A',  /* running: the state follows */
    MSG_FDS = 'F',       /* running: descriptors (SCM_RIGHTS), in order */
    MSG_STATE = 'S',     /* running: the state, in a memory file (its descriptor), after
                          * the other descriptors; its bytes (u64) */
    MSG_END = 'E',       /* running: all sent (bytes u64, descriptors u32) */
    MSG_FAILED = 'N',    /* either: the hand-over failed (text); the running one serves on */
    MSG_TAKEN = 'T',     /* new: all taken, nothing touched yet */
    MSG_GO = 'X',        /* running: it is leaving, the new one goes on */
};

/* The options compared: argv without argv[0] and --takeover, as one
 * buffer of NUL-terminated strings; its length. */
size_t upgrade_options(int argc, char **argv, char *out, size_t size);

/* The control socket handed over (upgrade_take.c), for upgrade_serve;
 * -1 when none (this process did not take over). */
int upgrade_take_control_fd(void);

/* Milliseconds every step of a hand-over may take at most. */
#define UPGRADE_HELLO_MS 5000
#define UPGRADE_SETTLE_MS 100      /* requests being read finish, listeners paused */
#define UPGRADE_QUIET_MS 10000     /* the running process stops reading */
#define UPGRADE_SEND_MS 30000      /* the state goes */
#define UPGRADE_TAKE_MS 60000      /* the new process takes it */
#define UPGRADE_GO_MS 10000        /* the new process is told to go on */

#endif
