/* SPDX-License-Identifier: Apache-2.0 */
/* What a restart checks in the history a previous run left in its
 * --history-file (history_layout.h), before using any of it: the published
 * positions, every entry from head to tail as it was written (its check),
 * every link and uid slot. Each check returns NULL when all is well, else
 * why not (one line, for the log); any refusal starts the file afresh.
 * core/history.c completes what the killed process was doing in between
 * (a move, a uid's slot), so the checks come in this order:
 * history_check_state, history_check_entries, history_check_links, then
 * history_check_end. O(entries kept + uids). Loop thread only. */
#ifndef HTTPDCNODE_HISTORY_CHECK_H
#define HTTPDCNODE_HISTORY_CHECK_H

#include "core/history_layout.h"

struct history_view {
    const struct history_head *hd;
    const struct uid_history *uids;
    const char *arena;
    const char *room;
    uint64_t arena_size;
    size_t room_size;
    uint32_t max_users;
};

/* The published head, tail and move credit, and the move under way (its
 * entry in the room, where it goes from and to). */
const char *history_check_state(const struct history_view *v);

/* Every entry from head to tail: its length, uid and check; and where
 * each starts, for history_check_link_ok. */
const char *history_check_entries(const struct history_view *v, uint64_t head, uint64_t tail);

/* Whether the position + 1 p is safe to follow once the entries are
 * checked: 0, gone (before head), or an entry's start. */
int history_check_link_ok(uint64_t p);

/* The links both ways between a uid's entries, a multicast's entries and
 * their payload, every uid's slot (its newest entry, its last id); the
 * bytes and messages kept. */
const char *history_check_links(const struct history_view *v, uint64_t head, uint64_t tail,
                                uint64_t *bytes, uint64_t *messages);

/* What the checks held is freed. */
void history_check_end(void);

#endif
