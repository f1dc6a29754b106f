/* SPDX-License-Identifier: Apache-2.0 */
/* Where the history lives (history_layout.h): in the process's memory, or
 * in a --history-file mapped shared, so that it outlives the process. The
 * file is locked while mapped: one process at a time. Loop thread only. */
#ifndef HTTPDCNODE_HISTORY_MAP_H
#define HTTPDCNODE_HISTORY_MAP_H

#include "core/history_layout.h"

struct history_map {
    struct history_head *head;
    struct uid_history *uids;       /* max_users + max_topics + 1 slots */
    struct topic_name *names;       /* max_topics: the topic of each topic slot */
    char *arena;
    char *room;                     /* where a moved entry waits: a quarter of the arena */
    size_t bytes;                   /* the whole mapping */
    int fd;                         /* the file, -1: in memory */
    int resumed;                    /* a previous run's state, made as this run
                                       would make it: to be checked before use */
    const char *file;
};

/* Maps the history for uids 1..max_users and max_topics topics, an arena of arena_size bytes
 * (0: ids only) and a room for the largest entry that moves: in memory when file is NULL, else in file, created (mode
 * 0600) if missing; a file another node, other sizes, another format or an
 * earlier boot made is logged and started afresh. A new history gets a new
 * epoch. -1 (logged) when it cannot be used at all: the file is in use by
 * another process, is not ours, or cannot be mapped. */
int history_map_open(struct history_map *m, const char *file, const char *node,
                     uint32_t max_users, uint32_t max_topics, uint64_t arena_size,
                     size_t room_size);

/* The file's state was refused (why, logged): it starts afresh, a new
 * epoch. -1 (logged) when the file cannot be written. */
int history_map_renew(struct history_map *m, const char *why);

/* A hot upgrade: the history the previous process handed over, fd (its
 * --history-file, locked through this very descriptor, or a memory file
 * from history_map_copy when file is NULL), mapped shared as it is: the
 * previous process stopped writing it. -1 (logged) when it does not fit
 * these options. */
int history_map_adopt(struct history_map *m, int fd, const char *file, const char *node,
                      uint32_t max_users, uint32_t max_topics, uint64_t arena_size,
                      size_t room_size);
/* A history in memory, copied to a memory file to hand over: its
 * descriptor (the caller closes it), or -1 (logged). */
int history_map_copy(const struct history_map *m);

/* Unmapped, and the file unlocked (it stays, for the next run). */
void history_map_close(struct history_map *m);

#endif
