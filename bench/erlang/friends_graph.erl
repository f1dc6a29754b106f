%% SPDX-License-Identifier: Apache-2.0
%% The old name of httpdcnode_friends_graph, kept for one release: every function calls
%% httpdcnode_friends_graph's (docs/erlang.md).
-module(friends_graph).

-export([fold/5, edges/3, write/4, main/1]).

fold(A1, A2, A3, A4, A5) -> httpdcnode_friends_graph:fold(A1, A2, A3, A4, A5).
edges(A1, A2, A3) -> httpdcnode_friends_graph:edges(A1, A2, A3).
write(A1, A2, A3, A4) -> httpdcnode_friends_graph:write(A1, A2, A3, A4).
main(A1) -> httpdcnode_friends_graph:main(A1).
