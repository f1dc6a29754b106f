/* SPDX-License-Identifier: Apache-2.0 */
/* What the load client sends up a WebSocket (--send-rate, --request-rate):
 * client frames masked as RFC 6455 section 5.3 wants, and the payload
 * "q=SEQ;t=NS;" (a message) or "r=SEQ;t=NS;" (a request, which the bench's
 * inbox answers with {conn, Conn, <<"t=NS;">>}): SEQ counts the messages of
 * one connection from 0, NS is CLOCK_REALTIME at the send. Pure functions,
 * no state: the caller keeps the sequence and draws the mask. */
#ifndef HTTPCLIENT_WS_SEND_H
#define HTTPCLIENT_WS_SEND_H

#include <stddef.h>
#include <stdint.h>

#define WS_OP_TEXT 0x1u
/* "r=" + 10 digits + ";t=" + 20 digits + ";" fits, and a short header (2
 * bytes, a 4-byte mask): one frame is at most this long. */
#define WS_UP_PAYLOAD_MAX 40
#define WS_UP_FRAME_MAX (6 + WS_UP_PAYLOAD_MAX)

/* A final client frame of opcode op carrying payload[0..n), masked with
 * mask (its bytes most significant first), into out[0..cap). Returns its
 * length, 0 when cap is too small. */
size_t ws_client_frame(uint8_t *out, size_t cap, unsigned op, const uint8_t *payload, size_t n,
                       uint32_t mask);

/* The payload of message seq sent at ns into out[0..cap); request picks
 * "r=" over "q=". Returns its length, 0 when cap is too small. */
size_t ws_up_payload(char *out, size_t cap, int request, uint32_t seq, uint64_t ns);

#endif
