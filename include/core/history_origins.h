/* SPDX-License-Identifier: Apache-2.0 */
/* Where each master's numbered stream (erl/erl_seq.h) stands, kept with
 * the history, so that a node restarted with its --history-file applies
 * every numbered message exactly once: what the file holds is not applied
 * again, what it lacks is asked for again (the node's hello tells each
 * master the last number the file holds all of) and applied once.
 *
 * The loop keeps, per origin slot of the C-node, the master (a hash of its
 * name) and its run, the last number applied in full, and, while a command
 * is being applied, how far it went in its list of history slots: one
 * 8-byte store before each slot is given the message, which a restart reads
 * with the slot's last id (did it change since?) to know whether that slot
 * has it. The list: a unicast's uid, a multicast's uids, a publish's topic
 * (its slot after the uids', history.h: it keeps its index across a
 * restart), a gap's uids then its topics (a gap is an id too: history_skip);
 * a topic not held here names slot 0, none (nothing given, nothing to
 * skip). A command a kill cut short is applied, when its master sends it
 * again, to the slots that lack it only. The history's own stores
 * (history.c) make each slot's message and id count with one store: so
 * does this.
 *
 * Only with a --history-file: in memory nothing outlives the process (a
 * hot upgrade hands the masters' streams over, erl_seq.h). Loop thread
 * only (history_origin_found: before the C-node thread starts). */
#ifndef HTTPDCNODE_HISTORY_ORIGINS_H
#define HTTPDCNODE_HISTORY_ORIGINS_H

#include <stdint.h>

/* After history_init (the server's start): the records of its file, for
 * history slots 1..slots (the uids', then the topics'). When it resumed a file an earlier run left, each
 * command a kill cut short is settled, and how far it went remembered for
 * when it comes again. */
void history_origins_start(uint32_t slots);
/* Before history_free. */
void history_origins_stop(void);

/* What the restart found of origin slot k: 1 with the hash of its master's
 * node name, its run, and the last number all of whose messages are in; 0
 * when none (or no restart). */
int history_origin_found(uint32_t k, uint64_t *name_hash, uint64_t *inc, uint64_t *applied);

/* Origin slot k is now the stream of the master name_hash's run inc, every
 * number up to base settled (core/cmd.h's CMD_SEQ_RUN). */
void history_origin_run(uint32_t k, uint64_t name_hash, uint64_t inc, uint64_t base);

/* Whether they are kept (a --history-file): else the calls below do
 * nothing, and a multicast need not make one per uid. */
int history_origins_kept(void);

/* A numbered command of origin k (its numbers up to last, of kind, listing
 * nuids slots, as above) is to be applied: the index in its list to start
 * from, 0 but after a restart that found it cut short. Then
 * history_origin_at before each slot from there (uid: the slot, 0 for
 * none), and history_origin_end. */
uint32_t history_origin_begin(uint32_t k, uint64_t last, uint32_t kind, uint32_t nuids);
void history_origin_at(uint32_t k, uint32_t index, uint32_t uid);
void history_origin_end(uint32_t k, uint64_t last);

#endif
