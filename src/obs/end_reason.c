/* SPDX-License-Identifier: Apache-2.0 */
/* Why a stream ended: see end_reason.h. */
#include "obs/end_reason.h"
#include "obs/stats.h"

static const char *const labels[END_REASON_KINDS] = {
#define X(counter, name, label, word) [END_##name] = label,
    END_REASONS(X)
#undef X
    [END_FINISHED] = "finished",
};

static const char *const words[END_TOLD_KINDS] = {
#define X(counter, name, label, word) [END_##name] = word,
    END_REASONS_TOLD(X)
#undef X
};

const char *end_reason_label(uint8_t why)
{
    return why < END_REASON_KINDS ? labels[why] : labels[END_FINISHED];
}

const char *end_reason_word(uint8_t why) { return words[end_reason_told(why) ? why : END_DRAIN]; }

void end_reason_count(uint8_t why)
{
    switch (why) {
#define X(counter, name, label, word)                                          \
    case END_##name:                                                           \
        loop_stats.counter++;                                                  \
        return;
        END_REASONS(X)
#undef X
    default:
        return;
    }
}
