%% SPDX-License-Identifier: Apache-2.0
%% An httpdcnode_handler for the tests with handle_conn_down: every client
%% message goes to the test's process as {in, Uid, Conn, Data}, every
%% connection's end as {conn_down, Uid, Conn, Reason}.
-module(conn_test_handler).
%% (-behaviour(httpdcnode_handler): not declared, the tests compile apart from the application.)

-export([init/1, handle_in/4, handle_conn_down/4]).

init(Dest) -> {ok, Dest}.

handle_in(Uid, Conn, Data, Dest) ->
    Dest ! {in, Uid, Conn, Data},
    {ok, Dest}.

handle_conn_down(Uid, Conn, Reason, Dest) ->
    Dest ! {conn_down, Uid, Conn, Reason},
    {ok, Dest}.
