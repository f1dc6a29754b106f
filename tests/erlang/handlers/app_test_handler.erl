%% SPDX-License-Identifier: Apache-2.0
%% An httpdcnode_handler for the tests that run the application: every
%% client message goes to Dest as {in, Uid, Conn, Data}, then
%%   "echo TEXT"  is answered to that connection alone with TEXT, which may
%%                be empty (httpdcnode:reply/2);
%%   "hold"       keeps the inbox busy, so that its window fills, until it
%%                is sent release (or 60 s pass, or it is killed).
-module(app_test_handler).
%% (-behaviour(httpdcnode_handler): not declared, the tests compile apart from the application.)

-export([init/1, handle_in/4]).

init(Dest) -> {ok, Dest}.

handle_in(Uid, Conn, Data, Dest) ->
    Dest ! {in, Uid, Conn, Data},
    case Data of
        <<"echo ", Text/binary>> -> ok = httpdcnode:reply(Conn, Text);
        <<"hold">> -> receive release -> ok after 60000 -> ok end;
        _ -> ok
    end,
    {ok, Dest}.
