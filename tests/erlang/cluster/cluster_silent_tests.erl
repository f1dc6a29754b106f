%% SPDX-License-Identifier: Apache-2.0
%% A master link that goes silent: the master node is frozen (SIGSTOP), so
%% it sends no tick and no reset while its kernel still acknowledges, as a
%% partition that drops packets looks from the C-node. A real master with
%% the application (net_ticktime ?TICK), a real C-node
%% (--master M --presence httpdcnode_presence --erl-tick-seconds ?TICK), a
%% real streaming client on uid 5.
%%
%% - The master's link to the C-node has the kernel's TCP_USER_TIMEOUT at
%%   net_ticktime: a link that dies silently while the master writes into
%%   it is dropped, and the node's next connection is not refused.
%% - A healthy idle link stays up over two tick times: ei answers the
%%   master's ticks, and they are what the C-node judges by.
%% - Frozen: the C-node judges the link dead within 1 to 1.25 tick times
%%   (counted in erl_silent_masters and its metric), drops it (erl_masters
%%   0) and dials again.
%% - Running again: the C-node is back on the master, the master's presence
%%   has uid 5 again and a message through the application reaches it.
-module(cluster_silent_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_master, [start_master/2, new_master_name/0, master_node/1, stop_master/1]).
-import(httpdtest_server, [start_server/1, node_of/1, stop_server/1, stats/1, wait_stat/4,
                           metrics/1]).
-import(httpdtest_os, [signal/2, scaled/1]).
-import(httpdtest_http, [open_stream/2, expect_chunk/2, close/1]).
-import(httpdtest_wait, [wait_until/3]).

-define(TICK, 4).
-define(UID, 5).
-define(WAIT, 20000).

silent_master_test_() ->
    {timeout, 240,
     {setup, fun setup/0, fun cleanup/1,
      fun(Ctx) ->
              [httpdtest_cluster:test_case(
                 "a frozen master: the C-node drops the silent link within the tick time, "
                 "and is back with its presence once the master runs again", 180,
                 fun() -> frozen_master(Ctx) end, fun() -> logs(Ctx) end, fun() -> ok end)]
      end}}.

setup() ->
    M = start_master(new_master_name(), #{ticktime => ?TICK}),
    try
        N = master_node(M),
        httpdtest_cluster:start_app(N, [{masters, [N]}]),
        S = start_server(#{master => N, presence => httpdcnode_presence,
                           extra_args => ["--erl-tick-seconds", integer_to_list(?TICK)]}),
        httpdtest_cluster:wait_known(N, [node_of(S)], ?WAIT),
        #{m => M, s => S}
    catch C:E:St ->
            stop_master(M),
            erlang:raise(C, E, St)
    end.

cleanup(#{m := M, s := S}) ->
    _ = signal(M, "CONT"),
    stop_server(S),
    stop_master(M).

logs(#{m := M, s := S}) -> [maps:get(log, M), maps:get(log, S)].

m(M, F, A) -> erpc:call(master_node(M), httpdcnode, F, A, 10000).

frozen_master(#{m := M, s := S}) ->
    Node = node_of(S),
    C = open_stream(S, ?UID),
    wait_online(M, [Node]),
    wait_user_timeout(M, Node),
    %% a healthy idle link is kept: the master's ticks are answered
    Quiet = erlang:monotonic_time(millisecond) + 2 * ?TICK * 1000 + 1000,
    stays_up(S, Quiet),
    #{erl_masters := 1, erl_connects := Connects} = stats(S),

    T0 = erlang:monotonic_time(millisecond),
    ok = signal(M, "STOP"),
    try
        %% judged dead between 1 and 1.25 tick times of silence, and dropped
        wait_stat(S, erl_masters, fun(V) -> V =:= 0 end, scaled(3 * ?TICK * 1000)),
        Detected = erlang:monotonic_time(millisecond) - T0,
        ?assertEqual(1, maps:get(erl_silent_masters, stats(S))),
        ?assertEqual(1, maps:get(<<"httpdcnode_erlang_masters_silent_total">>, metrics(S))),
        io:format(user, "~n  silent master: the C-node dropped the link ~b ms after the "
                  "master froze (tick time ~b s)~n", [Detected, ?TICK]),
        %% not before: the last tick came at most a quarter tick before the freeze
        ?assert(Detected >= ?TICK * 1000 * 3 div 4 - 250)
    after
        ok = signal(M, "CONT")
    end,
    T1 = erlang:monotonic_time(millisecond),
    %% running again: linked anew, and its presence has the uid again
    wait_stat(S, erl_masters, fun(V) -> V =:= 1 end, scaled(?WAIT)),
    wait_online(M, [Node]),
    io:format(user, "  silent master: presence back on the master ~b ms after it ran again~n",
              [erlang:monotonic_time(millisecond) - T1]),
    ?assert(maps:get(erl_connects, stats(S)) > Connects),
    ?assertEqual({ok, 1}, m(M, send_sync, [?UID, <<"back">>])),
    ?assertEqual(<<"back">>, expect_chunk(C, 5000)),
    ?assertEqual(1, maps:get(erl_silent_masters, stats(S))),
    wait_user_timeout(M, Node),                         % the new link's too
    close(C).

%% Until the master's link to Node has TCP_USER_TIMEOUT net_ticktime (set
%% when the node's hello comes).
wait_user_timeout(M, Node) ->
    wait_until(fun() -> user_timeout(M, Node) =:= ?TICK * 1000 end, ?WAIT,
               {tcp_user_timeout, Node}).

%% TCP_USER_TIMEOUT (ms) of the master's link to Node.
user_timeout(M, Node) ->
    erpc:call(master_node(M),
              fun() ->
                      {Node, Port} = lists:keyfind(Node, 1, erlang:system_info(dist_ctrl)),
                      {ok, [{raw, 6, 18, <<V:32/native>>}]} = inet:getopts(Port, [{raw, 6, 18, 4}]),
                      V
              end, 10000).

%% Until the master's presence says uid ?UID is on Nodes.
wait_online(M, Nodes) ->
    wait_until(fun() ->
                       case catch m(M, online, [?UID]) of
                           Nodes -> true;
                           Other -> {false, Other}
                       end
               end, scaled(?WAIT), {online, ?UID, Nodes}).

%% Polls /stats until Deadline: the master link stays up, never judged silent.
stays_up(S, Deadline) ->
    St = stats(S),
    ?assertEqual({1, 0}, {maps:get(erl_masters, St), maps:get(erl_silent_masters, St, 0)}),
    case erlang:monotonic_time(millisecond) >= Deadline of
        true -> ok;
        false -> timer:sleep(200), stays_up(S, Deadline)
    end.
