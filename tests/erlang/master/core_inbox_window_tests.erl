%% SPDX-License-Identifier: Apache-2.0
%% An inbox whose window is full (256 client messages it has not
%% acknowledged) holds back its own client messages only: presence, the
%% replies to send_sync and stats, and the other masters' client messages
%% go on; once it acknowledges, what waited reaches it in order, none lost;
%% what waits is bounded (4 MiB parked, the rest dropped and counted).
%% Real server, real master nodes; the inbox on each master is a process
%% of this module that does not acknowledge until told to.
-module(core_inbox_window_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [stats/1, wait_stat/4, node_of/1, send/2]).
-import(httpdtest_wait, [wait_until/3]).
-import(httpdtest_http, [open_stream/2, expect_chunk/2]).
-import(httpdtest_inbox, [frame/2]).
-export([inbox_init/4]).

-define(T, 10000).
-define(ARGS, ["--inbox", "inbox", "--client-rate", "100000",
               "--max-client-message", "1048576"]).

window_test_() ->
    [one_master("a full window holds back neither presence nor replies; after the acks "
                "all 300 arrive in order", fun window/3),
     one_master("126,000 one-byte messages against a held inbox pause their clients (the "
                "loop weighs them as the park does): none dropped, all delivered in order once "
                "it acknowledges; memory stays bounded", fun tiny/3),
     {"two masters: one inbox stuck, the other's uids still reach theirs at once; a master "
      "that goes passes what waited for it to the other",
      {setup, fun two_setup/0, fun two_cleanup/1,
       fun(Ctx = {_, _, S}) ->
               {timeout, httpdtest_os:scaled(120),
                fun() -> httpdtest_server:logged(S, fun(_) -> two_masters(Ctx) end) end}
       end}}].

%% A master whose presence process and stuck inbox ('inbox') both pass
%% what they get to a sink here; a server with --presence and --inbox.
one_master(Label, Fun) ->
    {Label,
     {setup,
      fun() ->
              {Sink, M, Node} = httpdtest_inbox:presence_master("window_sink"),
              ok = start_inbox(Node, {Sink, node()}, a),
              S = httpdtest_server:start_server(#{master => M, presence => presence,
                                                  extra_args => ?ARGS}),
              httpdtest_master:wait_master_sees(M, node_of(S), ?T),
              wait_stat(S, erl_masters, fun(V) -> V =:= 1 end, ?T),
              {M, S, Sink}
      end,
      fun({M, S, Sink}) -> httpdtest_inbox:stop_all(M, S, Sink) end,
      fun({M, S, Sink}) ->
              httpdtest_inbox:sink_test(
                S, Sink, 120, fun() -> Fun(S, httpdtest_master:master_node(M), Sink) end)
      end}}.

%%% ---------------------------------------------------------------- cases

window(S, MNode, _) ->
    A = open(S, 7),
    Msgs = [<<"m", (integer_to_binary(I))/binary>> || I <- lists:seq(1, 300)],
    ok = gen_tcp:send(A, [frame(1, D) || D <- Msgs]),
    wait_stat(S, client_in, fun(V) -> V =:= 300 end, ?T),
    First = collect(a, 256),
    %% A stream of another uid opens after the 300: its up comes through.
    B = open_stream(S, 8),
    wait_up(8),
    %% send_sync to it: {Ref, 1}; a stats call answers.
    Ref = make_ref(),
    send(S, {self(), Ref, 8, <<"hi">>}),
    ?assertEqual({reply, 1}, await_reply(Ref)),
    ?assertEqual(<<"hi">>, expect_chunk(B, ?T)),
    Ref2 = make_ref(),
    send(S, {self(), Ref2, stats}),
    {reply, Map} = await_reply(Ref2),
    ?assertMatch(#{client_in := 300, in_no_master := 0, in_park_dropped := 0}, Map),
    %% The window held: what came after the up and the replies is no more.
    ?assertEqual(0, length(take_now(a))),
    %% The inbox acknowledges: the other 44 follow, in order, once each.
    {inbox, MNode} ! ack,
    Rest = collect(a, 44),
    ?assertEqual(Msgs, [D || {7, _, D} <- First ++ Rest]),
    [Conn] = lists:usort([C || {_, C, _} <- First ++ Rest]),
    %% And what comes now goes straight through.
    ok = gen_tcp:send(A, frame(1, <<"after">>)),
    ?assertMatch([{7, Conn, <<"after">>}], collect(a, 1)),
    nothing_more(a),
    ?assertMatch(#{client_in := 301, client_in_dropped := 0, in_park_dropped := 0,
                   in_no_master := 0, ws_policy_closed := 0}, stats(S)),
    gen_tcp:close(A),
    httpdtest_http:close(B).

%% 12 connections x 10,500 one-byte messages: 126,000 records of 41
%% bytes (5 MB) parked for an inbox that does not acknowledge, were they
%% all read. They are not: past 1 MB of them waiting (41 bytes each, as
%% the park counts them) the clients are paused, far below the park's
%% 4 MiB, so none is dropped; once the inbox acknowledges, all arrive, each
%% connection's in order.
tiny(S, MNode, _) ->
    N = 12, K = 10500,
    #{memory := Mem0} = stats(S),
    Conns = [{100 + I, open(S, 100 + I)} || I <- lists:seq(1, N)],
    Bytes = [<<(I rem 256)>> || I <- lists:seq(1, K)],
    One = iolist_to_binary([frame(2, B) || B <- Bytes]),
    Self = self(),
    [spawn_link(fun() -> Self ! {sent, C, gen_tcp:send(C, One)} end) || {_, C} <- Conns],
    put(peak, Mem0),
    Peak = fun() -> #{memory := M} = X = stats(S), put(peak, max(M, get(peak))), X end,
    Paused = wait_until(fun() -> X = Peak(), {maps:get(client_paused, X) > 0, X} end, ?T,
                        clients_paused),
    ?assertMatch(#{in_park_dropped := 0, client_in_dropped := 0}, Paused),
    ?assert(maps:get(client_in, Paused) < N * K),
    {inbox, MNode} ! ack,
    [receive {sent, C, R} -> ?assertEqual(ok, R) after ?T -> erlang:error(not_sent) end
     || {_, C} <- Conns],
    Got = collect(a, N * K),
    St = Peak(),
    io:format(user, "~ntiny: ~p read before the first pause, paused ~p times, memory ~p -> "
              "peak ~p~n", [maps:get(client_in, Paused), maps:get(client_paused, St), Mem0,
                            get(peak)]),
    ?assertMatch(#{in_park_dropped := 0, client_in_dropped := 0, in_no_master := 0,
                   ws_policy_closed := 0, client_rate_closed := 0, streams_open := N}, St),
    ?assertEqual(N * K, maps:get(client_in, St)),
    [?assertEqual({Uid, [{binary, B} || B <- Bytes]}, {Uid, [D || {U, _, D} <- Got, U =:= Uid]})
     || {Uid, _} <- Conns],
    case httpdtest_os:memory_judged() of
        true -> ?assert(get(peak) - Mem0 < 48 bsl 20);
        false -> ok
    end,
    nothing_more(a),
    [gen_tcp:close(C) || {_, C} <- Conns].

two_setup() ->
    Sink = list_to_atom(httpdtest_os:unique("window2_sink")),
    httpdtest_master:start_sink(Sink),
    Ms = [{T, httpdtest_master:start_master()} || T <- [a, b]],
    [ok = start_inbox(httpdtest_master:master_node(M), {Sink, node()}, T) || {T, M} <- Ms],
    List = lists:join(",", [atom_to_list(httpdtest_master:master_node(M)) || {_, M} <- Ms]),
    S = httpdtest_server:start_server(#{master => list_to_atom(lists:flatten(List)),
                                        extra_args => ?ARGS}),
    wait_stat(S, erl_masters, fun(V) -> V =:= 2 end, ?T),
    {Sink, Ms, S}.

two_cleanup({Sink, Ms, S}) ->
    httpdtest_server:stop_server(S),
    [httpdtest_master:stop_master(M) || {_, M} <- Ms],
    httpdtest_master:stop_sink(Sink).

two_masters({Sink, Ms, S}) ->
    httpdtest_master:sink_subscribe(Sink),
    %% Which master each of two uids goes to (uid mod 2, in link order).
    C10 = open(S, 10),
    C11 = open(S, 11),
    ok = gen_tcp:send(C10, frame(1, <<"hello">>)),
    ok = gen_tcp:send(C11, frame(1, <<"hello">>)),
    Tag10 = receive {in, T1, 10, _, <<"hello">>} -> T1 after ?T -> erlang:error(no_hello) end,
    Tag11 = receive {in, T2, 11, _, <<"hello">>} -> T2 after ?T -> erlang:error(no_hello) end,
    ?assertNotEqual(Tag10, Tag11),
    %% uid 10's inbox does not acknowledge: 300 more fill its window.
    Msgs = [integer_to_binary(I) || I <- lists:seq(1, 300)],
    ok = gen_tcp:send(C10, [frame(1, D) || D <- Msgs]),
    wait_stat(S, client_in, fun(V) -> V =:= 302 end, ?T),
    First = collect(Tag10, 255),
    %% uid 11's messages, read after those, reach the other inbox.
    Other = [<<"o", (integer_to_binary(I))/binary>> || I <- lists:seq(1, 50)],
    ok = gen_tcp:send(C11, [frame(1, D) || D <- Other]),
    ?assertEqual(Other, [D || {11, _, D} <- collect(Tag11, 50)]),
    ?assertEqual(0, length(take_now(Tag10))),
    %% Acknowledged, the 45 parked follow in order.
    {inbox, httpdtest_master:master_node(proplists:get_value(Tag10, Ms))} ! ack,
    ?assertEqual(Msgs, [D || {10, _, D} <- First ++ collect(Tag10, 45)]),
    nothing_more(Tag10),
    ?assertMatch(#{client_in := 352, client_in_dropped := 0, in_park_dropped := 0,
                   in_no_master := 0}, stats(S)),
    %% uid 11's master goes while 45 of its messages wait for the window:
    %% they go to the master left, in order, after the 205 it had.
    More = [<<"p", (integer_to_binary(I))/binary>> || I <- lists:seq(1, 250)],
    ok = gen_tcp:send(C11, [frame(1, D) || D <- More]),
    wait_stat(S, client_in, fun(V) -> V =:= 602 end, ?T),
    Sent = collect(Tag11, 205),
    httpdtest_master:stop_master(proplists:get_value(Tag11, Ms)),
    wait_stat(S, erl_masters, fun(V) -> V =:= 1 end, ?T),
    ?assertEqual(More, [D || {11, _, D} <- Sent ++ collect(Tag10, 45)]),
    ?assertMatch(#{in_park_dropped := 0, in_no_master := 0}, stats(S)),
    [gen_tcp:close(C) || C <- [C10, C11]].

%%% ---------------------------------------------------------------- the inbox

%% On master Node: a process registered as inbox that passes each client
%% message to Dest as {in, Tag, Uid, Conn, Data}, acknowledges nothing
%% until it gets ack, then everything (and from then on each message).
start_inbox(Node, Dest, Tag) ->
    Self = self(),
    spawn(Node, ?MODULE, inbox_init, [Self, inbox, Dest, Tag]),
    receive {inbox_registered, Tag} -> ok after ?T -> {error, inbox_not_started} end.

inbox_init(Parent, Name, Dest, Tag) ->
    true = register(Name, self()),
    Parent ! {inbox_registered, Tag},
    inbox_loop(stuck, Dest, Tag, #{}).

inbox_loop(Mode, Dest, Tag, Unacked) ->
    receive
        {httpdcnode_in, CNode, Uid, Id, Data} ->
            Dest ! {in, Tag, Uid, {CNode, Id}, Data},
            case Mode of
                stuck ->
                    inbox_loop(Mode, Dest, Tag, maps:update_with(CNode, fun(N) -> N + 1 end,
                                                                 1, Unacked));
                acking ->
                    {any, CNode} ! {httpdcnode_in_ack, 1},
                    inbox_loop(Mode, Dest, Tag, Unacked)
            end;
        ack ->
            maps:foreach(fun(C, N) -> {any, C} ! {httpdcnode_in_ack, N} end, Unacked),
            inbox_loop(acking, Dest, Tag, #{});
        _ ->
            inbox_loop(Mode, Dest, Tag, Unacked)
    end.

%%% ---------------------------------------------------------------- helpers

%% The presence process learns that Uid came online.
wait_up(Uid) ->
    receive
        {forwarded, presence, {httpdcnode, _, up, Uid}} -> ok;
        {forwarded, presence, {httpdcnode, _, up, Uids}} when is_list(Uids) ->
            case lists:member(Uid, Uids) of
                true -> ok;
                false -> wait_up(Uid)
            end
    after ?T -> erlang:error({no_presence_up, Uid})
    end.

await_reply(Ref) ->
    receive {Ref, V} -> {reply, V}
    after ?T -> {no_reply_within_ms, ?T}
    end.

%% N {Uid, Conn, Data} from inbox Tag, in the order they came.
collect(Tag, N) -> collect(Tag, N, []).

collect(_, 0, Acc) -> lists:reverse(Acc);
collect(Tag, N, Acc) ->
    receive {in, Tag, Uid, Conn, Data} -> collect(Tag, N - 1, [{Uid, Conn, Data} | Acc])
    after ?T -> erlang:error({inbox_got_only, Tag, length(Acc), N})
    end.

%% What inbox Tag passed on that is here already.
take_now(Tag) ->
    receive {in, Tag, Uid, Conn, Data} -> [{Uid, Conn, Data} | take_now(Tag)]
    after 0 -> []
    end.

nothing_more(Tag) ->
    receive {in, Tag, _, _, _} = M -> erlang:error({unexpected, M}) after 200 -> ok end.

open(S, Uid) -> httpdtest_inbox:ws_open(S, Uid).
