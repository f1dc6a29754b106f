%% SPDX-License-Identifier: Apache-2.0
%% Numbered messages ({httpdcnode_seq, Master, Inc, Seq, Inner}) straight to a
%% real C-node from this node, its --master, and real SSE clients on plain
%% sockets: each number applied once and in order, acknowledged; a master's
%% gap told to live clients and to those that come back across it, of uids
%% and of topics; a hole nothing fills given up after 10 s, every uid and
%% topic told a gap; a message of a master's older run told as a gap to its
%% uids or its topic. A hole of a master that is
%% not linked to the node (its messages came through another) waits past
%% the 10 s, and what that master sends once linked again fills it.
-module(core_numbered_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [start_server/1, logged/2, send/2, stats/1, wait_stat/4, node_of/1]).
-import(httpdtest_master, [new_master_name/0, start_master/1, stop_master/1]).
-import(httpdtest_wait, [wait_until/3]).
-import(httpdtest_json, [json_decode/1]).
-import(httpdtest_os, [scaled/1]).

-define(F, cluster_failure_tests).
-define(ACK_TO, core_numbered_acks).
-define(WAIT, 15000).

numbered_test_() ->
    {setup, fun() -> start_server(#{master => node()}) end, fun httpdtest_server:stop_server/1,
     fun(S) ->
             {inorder,
              [t(S, "once and in order, duplicates dropped, acknowledged", fun in_order/1),
               t(S, "a master's gap: told to a live client and to one coming back",
                 fun master_gap/1),
               t(S, "a topic's messages numbered, and a master's gap for a topic: told to a "
                 "live client of the topic and to one coming back", fun topic_gap/1),
               t(S, "a hole nothing fills: given up after 10 s, every uid and topic told "
                 "a gap", fun hole/1),
               t(S, "a message of a master's older run: a gap for its uid or topic",
                 fun stale/1)]}
     end}.

%% The C-node's masters: this node, and one not running at first.
unlinked_hole_test_() ->
    Away = new_master_name(),
    Masters = list_to_atom(atom_to_list(node()) ++ "," ++ atom_to_list(Away)),
    {setup, fun() -> start_server(#{master => Masters}) end, fun httpdtest_server:stop_server/1,
     fun(S) ->
             [{"a hole of a master not linked waits for it past 10 s; linked again, "
               "what it sends fills the hole: nothing given up",
               {timeout, 120, fun() -> logged(S, fun(_) -> unlinked_hole(S, Away) end) end}}]
     end}.

t(S, Label, Fun) ->
    {Label, {timeout, 60, fun() -> logged(S, fun(_) -> Fun(S) end) end}}.

%% This test's run of "master" node(): each case its own, greater than the last.
run() ->
    erlang:system_time(microsecond).

seq(S, Inc, Seq, Inner) ->
    send(S, {httpdcnode_seq, node(), Inc, Seq, Inner}).

base(S, Inc, Base) ->
    send(S, {httpdcnode_seq_base, node(), Inc, Base, ?ACK_TO}).

stat(S, K) -> maps:get(K, stats(S)).

data(Evs) -> [{T, D} || {_, T, D} <- Evs].

in_order(S) ->
    true = register(?ACK_TO, self()),
    try
        Inc = run(),
        C = ?F:sse_client(S, 11, []),
        Dup0 = stat(S, seq_duplicates),
        base(S, Inc, 0),
        [seq(S, Inc, N, {11, D}) || {N, D} <- [{1, <<"a">>}, {3, <<"c">>}, {2, <<"b">>},
                                               {2, <<"b">>}, {1, <<"a">>}]],
        Evs = ?F:wait_events(C, 3),
        ?assertEqual([{message, <<"a">>}, {message, <<"b">>}, {message, <<"c">>}], data(Evs)),
        wait_stat(S, seq_duplicates, fun(D) -> D =:= Dup0 + 2 end, ?WAIT),
        ?assert(stat(S, seq_reordered) >= 1),
        %% acknowledged up to 3, to the name the base gave
        CNode = node_of(S),
        wait_until(fun() -> receive {httpdcnode_ack, CNode, _, Inc, 3} -> true
                            after 100 -> false
                            end
                   end, ?WAIT, ack),
        ?assertEqual(3, length(element(1, ?F:events(C)))),
        ?F:close_client(C)
    after
        unregister(?ACK_TO)
    end.

master_gap(S) ->
    Inc = run(),
    base(S, Inc, 0),
    C = ?F:sse_client(S, 12, []),
    seq(S, Inc, 1, {12, <<"x">>}),
    [{Id1, message, <<"x">>}] = ?F:wait_events(C, 1),
    seq(S, Inc, 2, {httpdcnode_gap, 3, [12, 13]}),
    seq(S, Inc, 4, {12, <<"y">>}),
    Evs = ?F:wait_events(C, 3),
    ?assertMatch([{_, message, <<"x">>}, {_, gap, _}, {_, message, <<"y">>}], Evs),
    {E, 1} = ?F:split_id(Id1),
    ?assertEqual({E, 3}, ?F:split_id(element(1, lists:nth(3, Evs)))),
    %% one that had x comes back: told the gap, then y
    C2 = ?F:sse_client(S, 12, ["Last-Event-ID: " ++ binary_to_list(Id1)]),
    ?assertMatch([{_, gap, _}, {_, message, <<"y">>}], ?F:wait_events(C2, 2)),
    ?assert(stat(S, seq_gap_uids) >= 2),
    [?F:close_client(X) || X <- [C, C2]].

%% An SSE client of topic T (uid U): its events once it was told it joined.
topic_client(S, U, T) ->
    C = ?F:sse_client(S, {path, "/sse/" ++ integer_to_list(U) ++ "?topics=" ++ T}, []),
    [{_, joined, _}] = ?F:wait_events(C, 1),
    C.

topic_gap(S) ->
    Inc = run(),
    base(S, Inc, 0),
    C = topic_client(S, 17, "ng"),
    seq(S, Inc, 1, {topic, <<"ng">>, <<"x">>}),
    [_, {Id1, message, <<"x">>}] = ?F:wait_events(C, 2),
    Gaps0 = stat(S, seq_gap_topics),
    seq(S, Inc, 2, {httpdcnode_gap, 3, [], [<<"elsewhere">>, <<"ng">>]}),
    seq(S, Inc, 4, {topic, <<"ng">>, <<"y">>}),
    Evs = ?F:wait_events(C, 4),
    ?assertMatch([_, {_, message, <<"x">>}, {_, gap, _}, {_, message, <<"y">>}], Evs),
    %% ng@E:1, then E:2 named no message, then ng@E:3
    <<"ng@", E1/binary>> = Id1,
    {E, 1} = ?F:split_id(E1),
    ?assertEqual(<<"ng@", E/binary, ":3">>, element(1, lists:nth(4, Evs))),
    ?assertMatch(#{<<"topic">> := <<"ng">>, <<"next">> := _},
                 json_decode(element(3, lists:nth(3, Evs)))),
    %% one that had x comes back: told the gap, then y
    C2 = ?F:sse_client(S, {path, "/sse/18?topics=" ++ binary_to_list(Id1)}, []),
    ?assertMatch([{_, joined, _}, {_, gap, _}, {_, message, <<"y">>}], ?F:wait_events(C2, 3)),
    %% the topic held here, not the other
    ?assertEqual(Gaps0 + 1, stat(S, seq_gap_topics)),
    %% numbered with {Pid, Ref}: the streams written to, once though sent twice
    Ref = make_ref(),
    Five = {httpdcnode_seq, node(), Inc, 5, {self(), Ref, topic, <<"ng">>, <<"z">>}},
    send(S, Five),
    send(S, Five),
    receive {Ref, 2} -> ok after ?WAIT -> error(no_reply) end,
    receive {Ref, 0} -> ok after ?WAIT -> error(no_reply_to_the_copy) end,
    ?assertMatch({_, message, <<"z">>}, lists:last(?F:wait_events(C2, 4))),
    ?assertEqual(5, length(element(1, ?F:events(C)))),
    [?F:close_client(X) || X <- [C, C2]].

hole(S) ->
    Inc = run(),
    base(S, Inc, 0),
    C = ?F:sse_client(S, 14, []),
    T = topic_client(S, 19, "hole"),
    seq(S, Inc, 1, {14, <<"one">>}),
    [{_, message, <<"one">>}] = ?F:wait_events(C, 1),
    Reordered0 = stat(S, seq_reordered),
    Skipped0 = stat(S, seq_skipped),
    seq(S, Inc, 3, {14, <<"three">>}),       % 2 never comes
    %% held meanwhile: nothing given up yet
    wait_stat(S, seq_reordered, fun(R) -> R =:= Reordered0 + 1 end, ?WAIT),
    ?assertEqual(Skipped0, stat(S, seq_skipped)),
    Evs = ?F:wait_events(C, 3),
    ?assertMatch([_, {_, gap, _}, {_, message, <<"three">>}], Evs),
    ?assertEqual(Skipped0 + 1, stat(S, seq_skipped)),
    %% whose number 2 was, nobody knows: the topic too is told a gap (and
    %% the client's uid)
    TEvs = ?F:wait_events(T, 3),
    ?assertMatch([{<<"hole@", _/binary>>, gap, _}],
                 [Ev || {<<"hole@", _/binary>>, _, _} = Ev <- TEvs]),
    [?F:close_client(X) || X <- [C, T]].

%% Master Away's stream, its numbers passed on by this node as another
%% master does while Away's own link to the node is down.
unlinked_hole(S, Away) ->
    Inc = run(),
    Seq = fun(N, Inner) -> send(S, {httpdcnode_seq, Away, Inc, N, Inner}) end,
    send(S, {httpdcnode_seq_base, Away, Inc, 0, ?ACK_TO}),
    C = ?F:sse_client(S, 16, []),
    Seq(1, {16, <<"one">>}),
    [{_, message, <<"one">>}] = ?F:wait_events(C, 1),
    Reordered0 = stat(S, seq_reordered),
    Skipped0 = stat(S, seq_skipped),
    Seq(3, {16, <<"three">>}),               % 2 went down with Away's link
    wait_stat(S, seq_reordered, fun(R) -> R =:= Reordered0 + 1 end, ?WAIT),
    %% past the 10 s a hole of a linked master waits (before: given up,
    %% every uid told a gap), not given up while Away is not linked
    T0 = erlang:monotonic_time(millisecond),
    wait_until(fun() ->
                       stat(S, seq_skipped) > Skipped0 orelse
                           erlang:monotonic_time(millisecond) - T0 > 12000
               end, 30000, hole_waited),
    ?assertEqual(Skipped0, stat(S, seq_skipped)),
    ?assertEqual(1, length(element(1, ?F:events(C)))),
    %% Away is back, linked: it sends 2 again on its own link
    M = start_master(Away),
    try
        wait_stat(S, erl_masters, fun(V) -> V =:= 2 end, scaled(?WAIT)),
        CNode = node_of(S),
        Two = {httpdcnode_seq, Away, Inc, 2, {16, <<"two">>}},
        Two = erpc:call(Away, erlang, send, [{any, CNode}, Two], 5000),
        ?assertMatch([{_, message, <<"one">>}, {_, message, <<"two">>},
                      {_, message, <<"three">>}], ?F:wait_events(C, 3)),
        ?assertEqual(Skipped0, stat(S, seq_skipped)),
        ?F:close_client(C)
    after
        stop_master(M)
    end.

stale(S) ->
    Old = run(),
    base(S, Old, 0),
    New = run(),
    base(S, New, 0),
    C = ?F:sse_client(S, 15, []),
    T = topic_client(S, 20, "stale"),
    seq(S, New, 1, {15, <<"new">>}),
    seq(S, Old, 1, {15, <<"old">>}),
    seq(S, New, 2, {15, <<"new2">>}),
    ?assertMatch([{_, message, <<"new">>}, {_, gap, _}, {_, message, <<"new2">>}],
                 ?F:wait_events(C, 3)),
    seq(S, Old, 2, {topic, <<"stale">>, <<"old">>}),
    seq(S, New, 3, {topic, <<"stale">>, <<"new3">>}),
    ?assertMatch([_, {_, gap, _}, {_, message, <<"new3">>}], ?F:wait_events(T, 3)),
    [?F:close_client(X) || X <- [C, T]].
