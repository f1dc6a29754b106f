%% The example handler chat_room (tools/erlang/examples) against hostile
%% and odd input: a real master running the application with chat_room as
%% its inbox, a real server with --inbox, a WebSocket client on a raw
%% socket. Every refused command is answered on that connection with
%% chat-error and counted, and the handler keeps going (same inbox process,
%% state kept); the bounds (room name, text size, UTF-8, 16 rooms) hold at
%% their edges.
-module(chat_room_tests).
-include_lib("eunit/include/eunit.hrl").

-define(T, 10000).
-define(INBOX, httpdcnode_inbox).
-define(UPGRADE, ["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13",
                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="]).

chat_room_test_() ->
    {setup, fun start/0, fun stop/1,
     fun(Ctx = #{server := S}) ->
             {timeout, httpdcnode_test_lib:scaled(60),
              {"chat_room: bad input answered with chat-error on its connection, counted, "
               "the handler unharmed; the bounds at their edges",
               fun() -> httpdcnode_test_lib:logged(S, fun(_) -> bad_input(Ctx) end) end}}
     end}.

start() ->
    M = httpdcnode_test_lib:start_master(),
    MNode = httpdcnode_test_lib:master_node(M),
    try
        Ebin = filename:absname(filename:dirname(code:which(httpdcnode))),
        true = m(MNode, code, add_patha, [Ebin]),
        ok = m(MNode, application, load, [httpdcnode]),
        ok = m(MNode, application, set_env, [httpdcnode, inbox, {?INBOX, chat_room, []}]),
        {ok, _} = m(MNode, application, ensure_all_started, [httpdcnode]),
        S = httpdcnode_test_lib:start_server(#{master => M, presence => httpdcnode_presence,
                                               %% more than the default 50 a second: one client
                                               %% sends them all
                                               extra_args => ["--inbox", atom_to_list(?INBOX),
                                                              "--client-rate", "1000"]}),
        CNode = httpdcnode_test_lib:node_of(S),
        httpdcnode_test_lib:wait_until(
          fun() -> lists:member(CNode, m(MNode, httpdcnode, nodes, [])) end, ?T,
          {master_knows, CNode}),
        #{master => M, mnode => MNode, server => S}
    catch C:E:St ->
            httpdcnode_test_lib:stop_master(M),
            erlang:raise(C, E, St)
    end.

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

open(S, Uid) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, httpdcnode_test_lib:port_of(S),
                                 [binary, {active, false}]),
    ok = gen_tcp:send(Sock, httpdcnode_test_lib:request_bytes(
                              "GET", "/ws/" ++ integer_to_list(Uid), "HTTP/1.1", ?UPGRADE)),
    {Head, Rest} = read_until(Sock, <<"\r\n\r\n">>, <<>>),
    ?assertMatch(<<"HTTP/1.1 101 ", _/binary>>, Head),
    put({buf, Sock}, Rest),
    Sock.

read_until(Sock, Sep, Acc) ->
    case binary:split(Acc, Sep) of
        [Before, After] -> {Before, After};
        [_] ->
            {ok, B} = gen_tcp:recv(Sock, 0, ?T),
            read_until(Sock, Sep, <<Acc/binary, B/binary>>)
    end.

take(Sock, N) ->
    Buf = get({buf, Sock}),
    case Buf of
        <<X:N/binary, Rest/binary>> -> put({buf, Sock}, Rest), X;
        _ ->
            {ok, B} = gen_tcp:recv(Sock, 0, ?T),
            put({buf, Sock}, <<Buf/binary, B/binary>>),
            take(Sock, N)
    end.

recv_frame(Sock) ->
    <<Fin:1, _:3, Op:4, _:1, Len0:7>> = take(Sock, 2),
    Len = case Len0 of
              126 -> <<L:16>> = take(Sock, 2), L;
              127 -> <<L:64>> = take(Sock, 8), L;
              _ -> Len0
          end,
    {Fin, Op, take(Sock, Len)}.

%% A masked frame, as a client sends.
frame(Op, Payload) ->
    Len = byte_size(Payload),
    LenBits = if Len < 126 -> <<Len:7>>;
                 true -> <<126:7, Len:16>>
              end,
    Key = <<1, 2, 3, 4>>,
    Pad = binary:copy(Key, Len div 4 + 1),
    Masked = crypto:exor(Payload, binary:part(Pad, 0, Len)),
    <<1:1, 0:3, Op:4, 1:1, LenBits/bits, Key/binary, Masked/binary>>.
