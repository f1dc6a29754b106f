# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# The per-transport parts of BENCHMARKS.md (sourced; write_report calls
# them): target rows and section 6, from the figures of transports.sh.

# Delivered/s of PROTO against the chunked median of section 2.
t_vs_chunked() { ratio "$(get "t_$1_blast_1_delivered_per_s")" "$(get blast_delivered_per_s)"; }

# Messages lost or doubled on resume (lost + duplicates), or nothing.
t_resume_bad() {
  local l d
  l=$(get "t_$1_resume_loss") d=$(get "t_$1_resume_dup")
  isnum "$l" && isnum "$d" && echo $((l + d))
}

# Each transport's cells of one row: t_cells FORMAT-FUNCTION.
t_cells() {
  local p
  for p in $(get t_list); do printf '%s | ' "$("$1" "$p")"; done
}

t_heap() { echo "$(n0 "$(get "t_$1_mem_slope")") B"; }
t_rss18() { isnum "$(get "t_$1_mem_18k")" && echo "$(calc "$(get "t_$1_mem_18k") / 1e6" %.2f) MB" || echo n/a; }
t_rate() { n0 "$(get "t_$1_blast_1_delivered_per_s")"; }
t_loss() { n0 "$(get "t_$1_blast_1_loss")"; }
t_ids() { echo "$(get "t_$1_blast_id_errors") / $(get "t_$1_blast_dup") / $(get "t_$1_blast_gaps")"; }
t_lat() { echo "$(ms "$(get "t_$1_blast_1_p50")") / $(ms "$(get "t_$1_blast_1_p99")")"; }
t_cpu() { echo "$(get "t_$1_blast_1_cpu_msg_us") µs"; }
t_caught_up() {
  local s
  s=$(get "t_$1_resume_resume_s")
  isnum "$s" && echo "$(calc "$s * 1000" %.0f) ms" || echo n/a
}
t_received() { echo "$(n0 "$(get "t_$1_resume_received")") of $(n0 "$(get "t_$1_resume_expected")")"; }
t_resume_ids() {
  echo "$(n0 "$(get "t_$1_resume_loss")") / $(get "t_$1_resume_dup") / $(get "t_$1_resume_gaps") / $(get "t_$1_resume_id_errors")"
}
t_kept() { n0 "$(get "t_$1_resume_kept")"; }

transport_target_rows() {
  local p
  for p in $(get t_list); do
    printf '| %s: server heap ≤ 256 B per idle stream (section 6) | %s B | %s |\n' "$p" \
      "$(n0 "$(get "t_${p}_mem_slope")")" "$(verdict "$(get "t_${p}_mem_slope")" "<=" 256)"
    printf '| %s: delivered/s ≥ 0.9 × chunked (flat out, 10k streams) | %s × | %s |\n' "$p" \
      "$(t_vs_chunked "$p")" "$(verdict "$(t_vs_chunked "$p")" ">=" 0.9)"
    printf '| %s: resume of 10k clients, none lost or doubled | %s lost or doubled | %s |\n' "$p" \
      "$(n0 "$(t_resume_bad "$p")")" "$(verdict "$(t_resume_bad "$p")" "==" 0)"
  done
  [[ $(get t_ws_status) == available ]] || echo "| ws | $(get t_ws_status) | not measured |"
}

transport_section() {
  local p
  cat <<TEXT
## 6. Transports

The same measurements for each way a browser can receive its messages, each on servers
of its own in this run, with the load client's \`--proto\`: \`chunked\` (\`GET /test/N\`,
sections 1 and 2), \`sse\` (Server-Sent Events, \`GET /sse/N\`), \`ws\` (WebSocket,
\`GET /ws/N\`, subprotocol \`ws+meta.httpdcnode\`), \`poll\` (long-poll, \`GET /poll/N\` in a
loop, each poll with \`since=\` the last id). WebSocket: $(get t_ws_status).

- **Heap per idle stream**: server RSS slope from 2,000 to 18,000 idle streams, as in
  section 1 (long-polls with \`--poll-timeout 600\`, so that they stay idle).
- **Flat out**: one run as in section 2: 10,000 streams, 200,000 messages \`--rate max\`,
  \`--probe-latency\` on; the chunked figure is section 2's median of three.
- **Resume**: 10,000 clients (\`--reconnect-after 5 --reconnect-on-signal\`) each get 5
  messages and drop; 20 more per uid are sent while they are away (the server keeps them,
  \`--history 32\`); then SIGUSR1 makes them all reconnect (at most 100 connecting at a
  time), each from the last id it saw (\`Last-Event-ID\` for sse, \`?since=\` for ws and
  poll). "Caught up" is the time from the signal to the last of the 250,000 messages. The
  client checks every id on every connection: +1 within the epoch unless the server
  reported a gap first; a duplicate, a missing id or an unannounced jump is counted.

TEXT
  printf '| | chunked | %s\n' "$(for p in $(get t_list); do printf '%s | ' "$p"; done)"
  printf '|---|---:|%s\n' "$(for p in $(get t_list); do printf -- '---:|'; done)"
  printf '| server heap per idle stream (≤ 256 B) | %s B | %s\n' "$(n0 "$(get mem_server_slope)")" "$(t_cells t_heap)"
  printf '| server RSS at 18,000 idle streams | %s MB | %s\n' "$(isnum "$(get mem_server_18k)" && calc "$(get mem_server_18k) / 1e6" %.2f)" "$(t_cells t_rss18)"
  printf '| delivered/s, 10,000 streams, flat out | %s | %s\n' "$(n0 "$(get blast_delivered_per_s)")" "$(t_cells t_rate)"
  printf '| ÷ chunked (≥ 0.9) | 1 | %s\n' "$(t_cells t_vs_chunked)"
  printf '| flat out: lost | %s | %s\n' "$(n0 "$(get blast_loss_total)")" "$(t_cells t_loss)"
  printf '| flat out: id errors / duplicates / gaps | no ids | %s\n' "$(t_cells t_ids)"
  printf '| flat out: latency p50 / p99 | %s / %s | %s\n' "$(ms "$(get blast_p50)")" "$(ms "$(get blast_p99)")" "$(t_cells t_lat)"
  printf '| flat out: server CPU per message received (all its threads) | %s µs | %s\n' "$(get blast_cpu_msg_us)" "$(t_cells t_cpu)"
  printf '| resume: all caught up after | no ids: cannot resume | %s\n' "$(t_cells t_caught_up)"
  printf '| resume: received of expected | | %s\n' "$(t_cells t_received)"
  printf '| resume: lost / doubled / gaps / id errors | | %s\n' "$(t_cells t_resume_ids)"
  printf '| resume: messages the server kept before the signal | | %s\n' "$(t_cells t_kept)"
  cat <<'TEXT'

The commands (each server `./httpdcnode --master ""` on loopback, `$PORT` its port;
msggen as in section 2):

TEXT
  echo "- chunked: sections 1 and 2."
  for p in $(get t_list); do
    echo "- $p, heap: \`$(get "t_${p}_mem_cmd")\`"
    echo "- $p, flat out: \`$(get "t_${p}_blast_cmd")\`"
    echo "- $p, resume: \`$(get "t_${p}_resume_cmd")\`"
  done
  echo
}
