%% SPDX-License-Identifier: Apache-2.0
%% The link to the Erlang master: the server works without one, finds one
%% that starts late, survives one killed under it and finds it again;
%% presence messages go to the master.
-module(core_master_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_http, [open_stream/2, close/1, expect_chunk/2]).
-import(httpdtest_server, [send/2, stats/1, wait_stat/4, node_of/1, master_server_test/4]).
-import(httpdtest_master, [master_sees/2]).
-import(httpdtest_wait, [wait_until/3]).

-define(T, 5000).
-define(LINK_WAIT, 30000).   % ms for the server to (re)connect to a master

master_test_() ->
    [master_server_test("master started after the server", absent, 60, fun late_master/2),
     master_server_test("master killed and restarted under open streams", restartable, 90,
                        fun master_restart/2),
     master_server_test("master found while 2,000 streams are open (descriptors above 1024)",
                        absent, 90, fun late_master_many/2),
     master_server_test("a node connects while 2,000 streams are open (descriptors above 1024)",
                        started, 90, fun new_node_many/1),
     {"presence messages to the master",
      {setup,
       fun() ->
               Sink = list_to_atom(httpdtest_os:unique("presence_sink")),
               httpdtest_master:start_sink(Sink),
               M = httpdtest_master:start_master(httpdtest_master:new_master_name(),
                                                 #{forwarder => {presence, {Sink, node()}}}),
               {Sink, M, httpdtest_server:start_server(#{master => M, presence => presence})}
       end,
       fun({Sink, M, S}) -> httpdtest_server:stop_server(S),
                            httpdtest_master:kill_master_by_name(maps:get(node, M)),
                            httpdtest_master:stop_sink(Sink) end,
       fun({Sink, M, S}) ->
               {timeout, 90, fun() -> logged(S, fun() -> presence(S, M, Sink) end) end}
       end}}].

logged(S, F) -> httpdtest_server:logged(S, fun(_) -> F() end).

%% One message through the stream, sent and received in turn; a stream
%% that ended or lost one fails here.
flow(S, C) ->
    I = case get(seq) of undefined -> 1; N -> N + 1 end,
    put(seq, I),
    B = <<"seq ", (integer_to_binary(I))/binary>>,
    send(S, {3, B}),
    ?assertEqual(B, expect_chunk(C, ?T)).

flow(S, C, N) -> [flow(S, C) || _ <- lists:seq(1, N)], ok.

late_master(S, MNode) ->
    CNode = node_of(S),
    C = open_stream(S, 3),
    flow(S, C, 5),
    ?assertEqual(pang, net_adm:ping(MNode)),
    M = httpdtest_master:start_master(MNode),
    try
        %% messages keep flowing while the server finds the master
        wait_until(fun() -> flow(S, C), master_sees(M, CNode) end, ?LINK_WAIT,
                   {master_sees, CNode}),
        flow(S, C, 5),
        St = stats(S),
        ?assert(maps:get(erl_nodes, St) >= 2),
        ?assertEqual(1, maps:get(streams_open, St))
    after
        httpdtest_master:stop_master(M)
    end,
    close(C).

master_restart(S, M) ->
    CNode = node_of(S),
    httpdtest_master:wait_master_sees(M, CNode, ?LINK_WAIT),
    C = open_stream(S, 3),
    flow(S, C, 10),
    St0 = stats(S),
    E0 = maps:get(erl_nodes, St0),
    ?assert(E0 >= 2),
    httpdtest_master:kill_master(M),
    %% the server notices the master is gone; the stream does not
    wait_until(fun() -> flow(S, C), maps:get(erl_nodes, stats(S)) < E0 end, ?T,
               erl_nodes_drop),
    flow(S, C, 10),
    M2 = httpdtest_master:restart_master(M),
    wait_until(fun() -> flow(S, C), master_sees(M2, CNode) end, ?LINK_WAIT,
               {new_master_sees, CNode}),
    flow(S, C, 10),
    St1 = stats(S),
    ?assert(maps:get(erl_connects, St1) > maps:get(erl_connects, St0)),
    ?assertEqual(1, maps:get(streams_open, St1)),
    %% and a second time, to be sure the reconnect can repeat
    httpdtest_master:kill_master(M2),
    flow(S, C, 5),
    M3 = httpdtest_master:restart_master(M2),
    wait_until(fun() -> flow(S, C), master_sees(M3, CNode) end, ?LINK_WAIT,
               {third_master_sees, CNode}),
    flow(S, C, 5),
    close(C).

%%% many descriptors: the server's Erlang sockets get numbers above 1024

-define(MANY, 2000).

open_many(S) ->
    [C || {_, C} <- httpdtest_http:open_streams(S, lists:seq(1, ?MANY), 50, #{})].

all_get(S, Cs, B) ->
    send(S, {broadcast, B}),
    [?assertEqual(B, expect_chunk(C, ?T)) || C <- Cs],
    ok.

late_master_many(S, MNode) ->
    Cs = open_many(S),
    M = httpdtest_master:start_master(MNode),
    try
        wait_until(fun() ->
                           case httpdtest_os:proc_status(S) of
                               running -> master_sees(M, node_of(S));
                               Died -> erlang:error({server_died_waiting_for_master, Died})
                           end
                   end, ?LINK_WAIT, {master_sees, node_of(S)}),
        all_get(S, Cs, <<"master found">>),
        ?assertEqual(running, httpdtest_os:proc_status(S))
    after
        httpdtest_master:stop_master(M)
    end,
    [close(C) || C <- Cs].

new_node_many(S) ->
    CNode = node_of(S),
    Cs = open_many(S),
    all_get(S, Cs, <<"before">>),
    %% this node's connection to the C-node goes; the next is made anew
    true = erlang:disconnect_node(CNode),
    wait_stat(S, erl_nodes, fun(V) -> V =:= 1 end, ?T),
    ?assertEqual(true, net_kernel:connect_node(CNode)),
    all_get(S, Cs, <<"after">>),
    ?assertEqual(running, httpdtest_os:proc_status(S)),
    [close(C) || C <- Cs].

%%% presence

%% The next presence message, with Uid | [Uid] made a sorted list.
next_presence(CNode) ->
    receive
        {forwarded, presence, {httpdcnode, CNode, What, Uids}} ->
            {What, lists:sort(if is_list(Uids) -> Uids; true -> [Uids] end)};
        {forwarded, presence, Other} -> {unexpected, Other}
    after ?LINK_WAIT -> no_presence_message
    end.

presence(S, M, Sink) ->
    CNode = node_of(S),
    httpdtest_master:sink_subscribe(Sink),
    ?assertMatch({hello, [#{history_ttl := 120}]}, next_presence(CNode)),
    ?assertEqual({snapshot, []}, next_presence(CNode)),
    A = open_stream(S, 5),
    ?assertEqual({up, [5]}, next_presence(CNode)),
    B = open_stream(S, 5),
    C6 = open_stream(S, 6),
    %% a second stream of uid 5 said nothing: the next word is about 6
    ?assertEqual({up, [6]}, next_presence(CNode)),
    close(A),
    wait_stat(S, streams_open, fun(V) -> V =:= 2 end, ?T),
    close(C6),
    ?assertEqual({down, [6]}, next_presence(CNode)),
    close(B),
    ?assertEqual({down, [5]}, next_presence(CNode)),
    C7 = open_stream(S, 7),
    ?assertEqual({up, [7]}, next_presence(CNode)),
    %% a new master gets the whole picture
    httpdtest_master:kill_master(M),
    M2 = httpdtest_master:restart_master(M),
    httpdtest_master:wait_master_sees(M2, CNode, ?LINK_WAIT),
    ?assertMatch({hello, [#{}]}, next_presence(CNode)),
    ?assertEqual({snapshot, [7]}, next_presence(CNode)),
    close(C7),
    ?assertEqual({down, [7]}, next_presence(CNode)).
