/* SPDX-License-Identifier: Apache-2.0 */
/* What reports why a stream ended: its label, its word, its counter. The
 * reasons themselves, their table and enum, are end_reason-t.h's (which
 * stats.h includes for the counters the table declares). */
#ifndef HTTPDCNODE_END_REASON_H
#define HTTPDCNODE_END_REASON_H

#include "obs/end_reason-t.h"

#include <stdint.h>

/* Its label ("client", "kick", ..., "finished"). */
const char *end_reason_label(uint8_t why);
/* The word its client reads ("drain", "kicked", ...); "drain" when the
 * client is told nothing. */
const char *end_reason_word(uint8_t why);
/* Counts one stream ended so (its counter of stats.h; none for finished). */
void end_reason_count(uint8_t why);

#endif
