%% SPDX-License-Identifier: Apache-2.0
%% Clients talk back: what WebSocket clients send reaches the --inbox
%% process on the master (httpdcnode_inbox calling inbox_test_handler,
%% which passes each message to the test), in order, within the bounds
%% (--max-client-message, --client-rate, the bytes waiting for Erlang);
%% {conn, Conn, Data} answers one connection. Real server, real master
%% node, WebSocket clients on raw sockets.
-module(core_inbox_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [stats/1, wait_stat/4, node_of/1]).
-import(httpdtest_wait, [wait_until/3]).
-import(httpdtest_inbox, [recv_frame/1, frame/2, frame/3, collect/1, nothing_more/0]).

-define(T, 10000).

inbox_test_() ->
    [inbox_test("1,000 messages of one connection arrive in order, each named by its "
                "connection", ["--client-rate", "100000"], fun order/2),
     inbox_test("--max-client-message: at the limit it arrives, past it 1009 (one frame or "
                "fragments)", ["--max-client-message", "100"], fun sizes/2),
     inbox_test("--client-rate: past the burst 1008, counted", ["--client-rate", "10"],
                fun rate/2),
     inbox_test("a suspended inbox: the server stops reading, then resumes; nothing lost",
                ["--client-rate", "1000"], fun slow_inbox/2),
     inbox_test("a WebSocket not read for a slow inbox over 3 heartbeats is not ended as dead; "
                "nothing lost", ["--heartbeat", "1", "--client-rate", "100000",
                                 "--max-client-message", "1048576"],
                fun paused_not_dead/2),
     inbox_test("{conn, Conn, Data} to an open, a closed and an unknown connection", [],
                fun conn/2),
     httpdtest_server:server_test("without --inbox client messages are refused and counted",
                                  #{}, 30, fun no_inbox/1)].

%% A master with an inbox registered as 'inbox' that sends to this test's
%% process, and a server started with --inbox inbox and Args.
inbox_test(Label, Args, Fun) ->
    {Label,
     {setup,
      fun() ->
              M = httpdtest_master:start_master(),
              Node = httpdtest_master:master_node(M),
              %% The test runs in another process than this setup: a sink
              %% here keeps what the inbox passes on till the test takes it.
              Sink = list_to_atom(httpdtest_os:unique("inbox_sink")),
              httpdtest_master:start_sink(Sink),
              {ok, Inbox} = httpdtest_inbox:start_inbox(Node, inbox_test_handler,
                                                        {Sink, node()}),
              S = httpdtest_server:start_server(#{master => M,
                                                  extra_args => ["--inbox", "inbox" | Args]}),
              httpdtest_master:wait_master_sees(M, node_of(S), ?T),
              %% the master sees the link before the C-node counts it as a master's
              httpdtest_server:wait_stat(S, erl_masters, fun(V) -> V =:= 1 end, ?T),
              {M, S, Inbox, Sink}
      end,
      fun({M, S, _, Sink}) -> httpdtest_inbox:stop_all(M, S, Sink) end,
      fun({M, S, Inbox, Sink}) ->
              httpdtest_inbox:sink_test(S, Sink, 120, fun() -> Fun(S, {M, Inbox}) end)
      end}}.

%%% ---------------------------------------------------------------- cases

order(S, _) ->
    A = open(S, 7),
    B = open(S, 8),
    N = 1000,
    [begin
         ok = gen_tcp:send(A, frame(1, <<"a", (integer_to_binary(I))/binary>>)),
         ok = gen_tcp:send(B, frame(2, <<"b", (integer_to_binary(I))/binary>>))
     end || I <- lists:seq(1, N)],
    Got = collect(2 * N),
    {FromA, FromB} = lists:partition(fun({Uid, _, _}) -> Uid =:= 7 end, Got),
    ?assertEqual([<<"a", (integer_to_binary(I))/binary>> || I <- lists:seq(1, N)],
                 [D || {_, _, D} <- FromA]),
    %% B's are binary messages: {binary, Data}.
    ?assertEqual([{binary, <<"b", (integer_to_binary(I))/binary>>} || I <- lists:seq(1, N)],
                 [D || {_, _, D} <- FromB]),
    %% One Conn per connection, {CNode, Id}, not the same for the two.
    [ConnA] = lists:usort([C || {_, C, _} <- FromA]),
    [ConnB] = lists:usort([C || {_, C, _} <- FromB]),
    ?assertMatch({_, Id} when is_integer(Id), ConnA),
    ?assertEqual(node_of(S), element(1, ConnA)),
    ?assertNotEqual(ConnA, ConnB),
    ?assertMatch(#{client_in := 2000, client_in_dropped := 0, ws_ignored := 0}, stats(S)),
    %% A connection that comes after gets an id never given before.
    C = open(S, 7),
    ok = gen_tcp:send(C, frame(1, <<"c">>)),
    [{7, ConnC, <<"c">>}] = collect(1),
    ?assertNotEqual(ConnA, ConnC),
    [gen_tcp:close(X) || X <- [A, B, C]].

sizes(S, _) ->
    A = open(S, 3),
    At = binary:copy(<<"x">>, 100),
    ok = gen_tcp:send(A, frame(2, At)),
    ok = gen_tcp:send(A, [frame(1, binary:copy(<<"y">>, 60), #{fin => 0}),
                          frame(0, binary:copy(<<"y">>, 40))]),
    [{3, _, {binary, At}}, {3, _, Y}] = collect(2),
    ?assertEqual(binary:copy(<<"y">>, 100), Y),
    ok = gen_tcp:send(A, frame(2, binary:copy(<<"x">>, 101))),
    expect_close(A, 1009),
    B = open(S, 3),
    ok = gen_tcp:send(B, [frame(1, binary:copy(<<"y">>, 60), #{fin => 0}),
                          frame(0, binary:copy(<<"y">>, 41))]),
    expect_close(B, 1009),
    ?assertMatch(#{client_in := 2, ws_bad_frames := 2}, stats(S)),
    nothing_more().

rate(S, _) ->
    %% --client-rate 10: a burst of 10 / 4 + 8 = 10 messages, then 10 a second.
    A = open(S, 4),
    ok = gen_tcp:send(A, [frame(1, integer_to_binary(I)) || I <- lists:seq(1, 30)]),
    expect_close(A, 1008),
    #{client_rate_closed := 1, client_in := In} = wait_stat(S, client_rate_closed,
                                                            fun(V) -> V =:= 1 end, ?T),
    ?assert(In >= 10 andalso In < 30),
    ?assertEqual([integer_to_binary(I) || I <- lists:seq(1, In)],
                 [D || {_, _, D} <- collect(In)]),
    %% Within the rate a connection stays.
    B = open(S, 4),
    [begin ok = gen_tcp:send(B, frame(1, <<"ok">>)), [_] = collect(1) end
     || _ <- lists:seq(1, 5)],
    ok = gen_tcp:send(B, frame(9, <<"p">>)),
    ?assertMatch({1, 10, <<"p">>}, recv_frame(B)),
    ?assertMatch(#{client_rate_closed := 1}, stats(S)),
    gen_tcp:close(B).

slow_inbox(S, {M, Inbox}) ->
    Node = httpdtest_master:master_node(M),
    Self = self(),
    Suspender = httpdtest_inbox:suspend(Node, Inbox),
    %% 40 connections x 25 messages of 2,000 bytes: 2 MB, twice what may
    %% wait for Erlang (1 MB) beside the 256 messages the master holds.
    Conns = [open(S, 100 + I) || I <- lists:seq(1, 40)],
    Msg = fun(I, K) -> <<I:64, K:64, (binary:copy(<<"z">>, 1984))/binary>> end,
    [spawn(fun() ->
                   Self ! {sent, lists:usort([gen_tcp:send(C, frame(2, Msg(I, K)))
                                              || K <- lists:seq(1, 25)])}
           end) || {I, C} <- lists:zip(lists:seq(1, 40), Conns)],
    %% The server stops reading: paused, and what it took stays below all.
    wait_stat(S, client_paused, fun(V) -> V > 0 end, ?T),
    #{client_in := Before} = stats(S),
    ?assert(Before < 1000),
    {message_queue_len, Held} = rpc:call(Node, erlang, process_info, [Inbox, message_queue_len]),
    ?assert(Held =< 256),
    Suspender ! resume,
    Got = collect(1000),
    [receive {sent, Sent} -> ?assertEqual([ok], Sent) after ?T -> erlang:error(not_sent) end
     || _ <- Conns],
    [?assertEqual([{binary, Msg(I, K)} || K <- lists:seq(1, 25)],
                  [D || {Uid, _, D} <- Got, Uid =:= 100 + I]) || I <- lists:seq(1, 40)],
    ?assertMatch(#{client_in := 1000, client_in_dropped := 0, in_no_master := 0,
                   ws_policy_closed := 0, client_rate_closed := 0}, stats(S)),
    [gen_tcp:close(C) || C <- Conns].

%% The inbox suspended while one client sends 3 MB (three times what may
%% wait for Erlang) and answers every ping: the server stops reading it,
%% sends pings it cannot read the pongs of for 4 heartbeats and more, and
%% must not take that for a dead peer.
paused_not_dead(S, {M, Inbox}) ->
    Node = httpdtest_master:master_node(M),
    Self = self(),
    Suspender = httpdtest_inbox:suspend(Node, Inbox),
    A = open(S, 21),
    N = 750,
    Msg = fun(K) -> <<K:64, (binary:copy(<<"p">>, 3992))/binary>> end,
    Pings = counters:new(1, []),
    Buffered = get({buf, A}),
    Ponger = spawn_link(fun() -> put({buf, A}, Buffered), pong_loop(A, Pings) end),
    ok = gen_tcp:controlling_process(A, Ponger),
    Sender = spawn_link(fun() ->
                                Self ! {sent, lists:usort([gen_tcp:send(A, frame(2, Msg(K)))
                                                           || K <- lists:seq(1, N)])}
                        end),
    wait_stat(S, client_paused, fun(V) -> V > 0 end, ?T),
    %% Pings are written while the stream is not read: 4 of them are 3
    %% heartbeats and more of not reading its pongs.
    P0 = counters:get(Pings, 1),
    wait_until(fun() -> counters:get(Pings, 1) >= P0 + 4 end, ?T, pings_while_paused),
    #{client_in := Held, ws_dead := 0} = stats(S),
    ?assert(Held < N),
    Suspender ! resume,
    Got = collect(N),
    receive {sent, Sent} -> ?assertEqual([ok], Sent) after ?T -> erlang:error(not_sent) end,
    ?assertEqual([{binary, Msg(K)} || K <- lists:seq(1, N)], [D || {_, _, D} <- Got]),
    %% Alive: two heartbeats later it still takes messages.
    P1 = counters:get(Pings, 1),
    wait_until(fun() -> counters:get(Pings, 1) >= P1 + 2 end, ?T, pings_after),
    ok = gen_tcp:send(A, frame(1, <<"still here">>)),
    [{21, _, <<"still here">>}] = collect(1),
    ?assertMatch(#{ws_dead := 0, client_in := 751, client_in_dropped := 0,
                   ws_policy_closed := 0, streams_open := 1}, stats(S)),
    unlink(Sender),
    unlink(Ponger),
    exit(Ponger, kill),
    gen_tcp:close(A).

%% Reads the server's frames on Sock, answers each ping with a pong and
%% counts it; stops at a close or an error.
pong_loop(Sock, Pings) ->
    case catch recv_frame(Sock) of
        {1, 9, Payload} ->
            counters:add(Pings, 1, 1),
            ok = gen_tcp:send(Sock, frame(10, Payload)),
            pong_loop(Sock, Pings);
        {_, 8, _} -> ok;
        {_, _, _} -> pong_loop(Sock, Pings);
        _ -> ok
    end.

conn(S, _) ->
    A = open(S, 9),
    ok = gen_tcp:send(A, frame(1, <<"hello">>)),
    [{9, Conn, <<"hello">>}] = collect(1),
    ?assertEqual({ok, 1}, rpc:call(node(), httpdcnode, reply_sync, [Conn, <<"just you">>])),
    ?assertEqual({1, 1, <<"just you">>}, recv_frame(A)),
    ok = httpdcnode:reply(Conn, <<255, 0>>),
    ?assertEqual({1, 2, <<255, 0>>}, recv_frame(A)),
    %% Another stream of the same uid gets nothing of it.
    B = open(S, 9),
    ?assertEqual({ok, 1}, httpdcnode:reply_sync(Conn, <<"again">>)),
    ?assertEqual({1, 1, <<"again">>}, recv_frame(A)),
    ?assertEqual({error, timeout}, gen_tcp:recv(B, 0, 300)),
    gen_tcp:close(A),
    wait_stat(S, streams_open, fun(V) -> V =:= 1 end, ?T),
    ?assertEqual({ok, 0}, httpdcnode:reply_sync(Conn, <<"gone">>)),
    {CNode, Id} = Conn,
    ?assertEqual({ok, 0}, httpdcnode:reply_sync({CNode, Id + 1000000}, <<"never">>)),
    %% With ws+meta it says it is no message of the uid's (no id).
    Meta = open(S, 9, ["Sec-WebSocket-Protocol: ws+meta.httpdcnode"]),
    ok = gen_tcp:send(Meta, frame(1, <<"meta">>)),
    [{9, MetaConn, <<"meta">>}] = collect(1),
    ?assertEqual({ok, 1}, httpdcnode:reply_sync(MetaConn, <<"to meta">>)),
    ?assertEqual({1, 1, <<"event: conn\n\nto meta">>}, recv_frame(Meta)),
    ?assertMatch(#{conn_sent := 4, conn_dropped := 2}, stats(S)),
    gen_tcp:close(B),
    gen_tcp:close(Meta).

no_inbox(S) ->
    A = open(S, 5),
    ok = gen_tcp:send(A, [frame(1, <<"one">>), frame(2, <<"two">>), frame(1, <<"three">>)]),
    ok = gen_tcp:send(A, frame(9, <<"p">>)),
    ?assertMatch({1, 10, <<"p">>}, recv_frame(A)),
    ?assertMatch(#{ws_ignored := 3, client_in := 0}, stats(S)),
    gen_tcp:close(A).

%%% ---------------------------------------------------------------- helpers

open(S, Uid) -> httpdtest_inbox:ws_open(S, Uid).

open(S, Uid, Headers) -> httpdtest_inbox:ws_open(S, Uid, Headers).

expect_close(Sock, Code) ->
    {1, 8, <<Got:16, _/binary>>} = recv_frame(Sock),
    ?assertEqual(Code, Got),
    ?assertEqual({error, closed}, gen_tcp:recv(Sock, 0, ?T)).

