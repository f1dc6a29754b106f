%% SPDX-License-Identifier: Apache-2.0
%% The old name of httpdcnode_router, kept for one release so that code calling
%% router:... and nodes of the release before go on working: every
%% function calls httpdcnode_router's. It goes in the next release (docs/erlang.md).
-module(router).

-export([send/2, send/3, send_async/2, recipients/1]).

send(A1, A2) -> httpdcnode_router:send(A1, A2).
send(A1, A2, A3) -> httpdcnode_router:send(A1, A2, A3).
send_async(A1, A2) -> httpdcnode_router:send_async(A1, A2).
recipients(A1) -> httpdcnode_router:recipients(A1).
