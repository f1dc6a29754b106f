/* SPDX-License-Identifier: Apache-2.0 */
/* Payloads as JSON strings: exact for text (valid UTF-8), base64 for
 * binary. */
#ifndef HTTPDCNODE_JSON_TEXT_H
#define HTTPDCNODE_JSON_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* The bytes json_message writes at most for a payload of len bytes. */
size_t json_message_max(uint32_t len);
/* {"id":"EPOCH:SEQ","data":"..."} (or "data_base64" when binary, whatever
 * its bytes; data must be valid UTF-8 otherwise) into out; its length. */
size_t json_message(char *out, const char *epoch_hex, uint32_t seq, const char *data,
                    uint32_t len, int binary);

#endif
