%% SPDX-License-Identifier: Apache-2.0
%% The old name of httpdcnode_subs, kept for one release so that code calling
%% subsmanager:... and nodes of the release before go on working: every
%% function calls httpdcnode_subs's. It goes in the next release (docs/erlang.md).
-module(subsmanager).

-export([ensure_table/0, add_subscriptions/1, remove_subscriptions/1, get_subscribers/1,
         get_subscriptions/1, clear/0, count/0, rejoin/1, copy_tables/1, has_tables/0,
         close_gate/1, open_gate/0, changed_window/3, digest/2, changed_in/3, pair_states/1,
         apply_merge/1, merge_pair/1, expire_tombstones/1, tombstones/0]).

ensure_table() -> httpdcnode_subs:ensure_table().
add_subscriptions(A1) -> httpdcnode_subs:add_subscriptions(A1).
remove_subscriptions(A1) -> httpdcnode_subs:remove_subscriptions(A1).
get_subscribers(A1) -> httpdcnode_subs:get_subscribers(A1).
get_subscriptions(A1) -> httpdcnode_subs:get_subscriptions(A1).
clear() -> httpdcnode_subs:clear().
count() -> httpdcnode_subs:count().
rejoin(A1) -> httpdcnode_subs:rejoin(A1).
copy_tables(A1) -> httpdcnode_subs:copy_tables(A1).
has_tables() -> httpdcnode_subs:has_tables().
close_gate(A1) -> httpdcnode_subs:close_gate(A1).
open_gate() -> httpdcnode_subs:open_gate().
changed_window(A1, A2, A3) -> httpdcnode_subs:changed_window(A1, A2, A3).
digest(A1, A2) -> httpdcnode_subs:digest(A1, A2).
changed_in(A1, A2, A3) -> httpdcnode_subs:changed_in(A1, A2, A3).
pair_states(A1) -> httpdcnode_subs:pair_states(A1).
apply_merge(A1) -> httpdcnode_subs:apply_merge(A1).
merge_pair(A1) -> httpdcnode_subs:merge_pair(A1).
expire_tombstones(A1) -> httpdcnode_subs:expire_tombstones(A1).
tombstones() -> httpdcnode_subs:tombstones().
