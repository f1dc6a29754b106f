%% The example handler chat_room (tools/erlang/examples) against hostile
%% and odd input: a real master running the application with chat_room as
%% its inbox, a real server with --inbox, a WebSocket client on a raw
%% socket. Every refused command is answered on that connection with
%% chat-error and counted, and the handler keeps going (same inbox process,
%% state kept); the bounds (room name, text size, UTF-8, 16 rooms) hold at
%% their edges.
-module(chat_room_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdcnode_inbox_lib, [recv_frame/1, frame/2]).

-define(T, 10000).
-define(INBOX, httpdcnode_inbox).

chat_room_test_() ->
    {setup, fun start/0, fun stop/1,
     fun(Ctx = #{server := S}) ->
             {timeout, httpdcnode_test_lib:scaled(60),
              {"chat_room: bad input answered with chat-error on its connection, counted, "
               "the handler unharmed; the bounds at their edges",
               fun() -> httpdcnode_test_lib:logged(S, fun(_) -> bad_input(Ctx) end) end}}
     end}.

%% More than the default 50 messages a second: one client sends them all.
start() -> httpdcnode_inbox_lib:chat_start(["--client-rate", "1000"], ?T).

stop(#{master := M, server := S}) ->
    httpdcnode_test_lib:stop_server(S),
    httpdcnode_test_lib:stop_master(M).

m(Node, Mod, F, A) -> erpc:call(Node, Mod, F, A, 30000).

bad_input(#{server := S, mnode := MNode}) ->
    Inbox = m(MNode, erlang, whereis, [?INBOX]),
    ?assert(is_pid(Inbox)),
    W = open(S, 301),
    httpdcnode_test_lib:wait_until(fun() -> m(MNode, httpdcnode, online, [301]) =/= [] end,
                                   ?T, {online, 301}),
    Err = fun(Why) -> <<"chat-error ", Why/binary>> end,
    BadRoom = Err(<<"bad room name: 1 to 32 of A-Z a-z 0-9 _ . -">>),
    Room32 = binary:copy(<<"r">>, 32),
    Refused =
        [{<<"hello">>, Err(<<"unknown command: join ROOM, leave ROOM or say ROOM TEXT">>)},
         {<<"JOIN lobby">>, Err(<<"unknown command: join ROOM, leave ROOM or say ROOM TEXT">>)},
         {<<"join">>, Err(<<"unknown command: join ROOM, leave ROOM or say ROOM TEXT">>)},
         {<<"join ">>, BadRoom},
         {<<"join lobby\n">>, BadRoom},
         {<<"join a b">>, BadRoom},
         {<<"join ", Room32/binary, "r">>, BadRoom},
         {<<"join caf", 16#c3, 16#a9>>, BadRoom},
         {<<"say lobby">>, Err(<<"say needs a room and a text: say ROOM TEXT">>)},
         {<<"say lobby hi">>, Err(<<"not in room lobby: join it first">>)},
         {<<"leave lobby">>, Err(<<"not in room lobby">>)},
         {<<0, 255, 1>>, Err(<<"unknown command: join ROOM, leave ROOM or say ROOM TEXT">>)}],
    [?assertEqual({In, Out}, {In, roundtrip(W, In)}) || {In, Out} <- Refused],
    %% Joined: the room tells its members (this uid); again: this connection only.
    ?assertEqual(<<"chat-joined lobby 301">>, roundtrip(W, <<"join lobby">>)),
    ?assertEqual(<<"chat-joined lobby 301">>, roundtrip(W, <<"join lobby">>)),
    ?assertEqual(<<"chat-joined ", Room32/binary, " 301">>, roundtrip(W, <<"join ", Room32/binary>>)),
    Text1000 = binary:copy(<<"x">>, 1000),
    TextBad = [{<<"say lobby ">>, Err(<<"empty text">>)},
               {<<"say lobby ", Text1000/binary, "x">>, Err(<<"text too long (1000 bytes at most)">>)},
               {<<"say lobby caf", 16#e9>>, Err(<<"text not UTF-8">>)},
               {<<"say lobby ", 16#c3>>, Err(<<"text not UTF-8">>)}],
    [?assertEqual({In, Out}, {In, roundtrip(W, In)}) || {In, Out} <- TextBad],
    ?assertEqual(<<"chat lobby 301 ", Text1000/binary>>, roundtrip(W, <<"say lobby ", Text1000/binary>>)),
    ?assertEqual(<<"chat lobby 301 two\nlines, caf", 16#c3, 16#a9>>,
                 roundtrip(W, <<"say lobby two\nlines, caf", 16#c3, 16#a9>>)),
    %% 16 rooms at most: lobby, rrr...r and 14 more; the 17th refused until one is left.
    [?assertEqual(<<"chat-joined r", (integer_to_binary(I))/binary, " 301">>,
                  roundtrip(W, <<"join r", (integer_to_binary(I))/binary>>))
     || I <- lists:seq(1, 14)],
    ?assertEqual(Err(<<"in too many rooms (16): leave one first">>), roundtrip(W, <<"join r15">>)),
    ?assertEqual(<<"chat-left lobby 301">>, roundtrip(W, <<"leave lobby">>)),
    ?assertEqual(<<"chat-joined r15 301">>, roundtrip(W, <<"join r15">>)),
    ?assertEqual(Err(<<"not in room lobby: join it first">>), roundtrip(W, <<"say lobby bye">>)),
    %% One inbox all along, its counts: every refusal counted as bad.
    ?assertEqual(Inbox, m(MNode, erlang, whereis, [?INBOX])),
    Bad = length(Refused) + length(TextBad) + 2,
    ?assertEqual({ok, #{joined => 17, left => 1, said => 2, bad => Bad}},
                 m(MNode, chat_room, stats, [?INBOX])),
    gen_tcp:close(W).

%%% ---------------------------------------------------------------- WebSocket

%% A frame out (text; binary when not UTF-8, as a text frame must be), the
%% next frame in: its payload.
roundtrip(Sock, Payload) ->
    Op = case unicode:characters_to_binary(Payload) of
             Payload -> 1;
             _ -> 2
         end,
    ok = gen_tcp:send(Sock, frame(Op, Payload)),
    {1, _Op, Got} = recv_frame(Sock),
    Got.

open(S, Uid) -> httpdcnode_inbox_lib:ws_open(S, Uid).
