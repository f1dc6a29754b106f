%% SPDX-License-Identifier: Apache-2.0
%% The old name of httpdcnode_subs_heal, kept for one release so that code calling
%% subsmanager_heal:... and nodes of the release before go on working: every
%% function calls httpdcnode_subs_heal's. It goes in the next release (docs/erlang.md).
-module(subsmanager_heal).

-export([start_link/0, sweep/0, create_table/0, bound/1, ready/0]).

start_link() -> httpdcnode_subs_heal:start_link().
sweep() -> httpdcnode_subs_heal:sweep().
create_table() -> httpdcnode_subs_heal:create_table().
bound(A1) -> httpdcnode_subs_heal:bound(A1).
ready() -> httpdcnode_subs_heal:ready().
