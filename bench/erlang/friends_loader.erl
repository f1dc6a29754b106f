%% SPDX-License-Identifier: Apache-2.0
%% The old name of httpdcnode_friends_loader, kept for one release: every function calls
%% httpdcnode_friends_loader's (docs/erlang.md).
-module(friends_loader).

-export([load/1, load/2, parse_line/1]).

load(A1) -> httpdcnode_friends_loader:load(A1).
load(A1, A2) -> httpdcnode_friends_loader:load(A1, A2).
parse_line(A1) -> httpdcnode_friends_loader:parse_line(A1).
