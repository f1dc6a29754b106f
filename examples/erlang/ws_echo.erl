%% SPDX-License-Identifier: Apache-2.0
%% An example handler of client messages (httpdcnode_handler), the
%% smallest there is: each message a WebSocket client sends goes back to
%% that connection alone (httpdcnode:reply/2) as it came: a text message
%% as a text frame, a binary one ({binary, Data}, whatever its bytes) as a
%% binary frame, an empty one as an empty frame. Shipped beside the
%% application, not in its .app: `make` builds it into tools/erlang/ebin.
%%
%% It is the server the WebSocket conformance cases of `make test` talk to
%% (tests/erlang/transport/ws_conformance_tests.erl), and the one to run an outside
%% conformance suite against: `make ws-echo` starts epmd, a master with the
%% application and this handler as the inbox httpdcnode_inbox, and a server
%% on 127.0.0.1 with --inbox httpdcnode_inbox (docs/testing.md).
%%
%% State: the number of messages echoed.
-module(ws_echo).
-behaviour(httpdcnode_handler).

-export([init/1, handle_in/4]).

init(_Args) ->
    {ok, 0}.

handle_in(_Uid, Conn, Data, Echoed) ->
    httpdcnode:reply(Conn, Data),
    {ok, Echoed + 1}.
