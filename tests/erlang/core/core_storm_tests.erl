%% SPDX-License-Identifier: Apache-2.0
%% A push storm: 5,000 streams (uids 1..5000), 50,000 messages spread
%% over them at random (fixed seed); every message must reach its uid's
%% stream exactly once and in order, and the server must stay up.
-module(core_storm_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [send/2, stats/1, wait_stat/4, master_server_test/4]).
-import(httpdtest_http, [close/1, collected/1]).
-import(httpdtest_wait, [summarize/1]).

-define(CONNS, 5000).
-define(MSGS, 50000).
-define(IN_FLIGHT, 100).        % connections being opened at once
-define(DELIVER_MS, 60000).
-define(SENTINEL, <<"storm over">>).

storm_test_() ->
    master_server_test("5,000 streams, 50,000 messages, each delivered once and in order",
                       started, 150, fun storm/1).

%% SIGTERM with every stream of the storm's size open.
storm_sigterm_test_() ->
    master_server_test("SIGTERM with 5,000 streams: each gets the terminating chunk, exit 0",
                       started, 90, fun sigterm_many/1).

%% After a burst, the burst's last message must not wait in the server
%% for some later event (a tick, another message) before it goes out.
burst_test_() ->
    master_server_test("bursts of 20,000 messages: the last one arrives within 5 s, every time",
                       started, 90, fun bursts/1).

%% While the loop works through a long backlog of Erlang messages, HTTP
%% clients are still served: before, the drain re-armed itself ahead of the
%% socket poll and /stats (like every accept and EOF) waited for the end.
busy_inbox_test_() ->
    master_server_test("a busy inbox does not starve HTTP clients: /stats answers mid-storm",
                       started, 120, fun busy_inbox/1).

-define(FANOUT, 200).
-define(BROADCASTS, 40000).

busy_inbox(S) ->
    Port = httpdtest_server:port_of(S),
    Sinks = [spawn_link(fun() -> sink(Port, Uid) end) || Uid <- lists:seq(1, ?FANOUT)],
    wait_stat(S, streams_open, fun(V) -> V =:= ?FANOUT end, 30000),
    Msg = binary:copy(<<"b">>, 64),
    [send(S, {broadcast, Msg}) || _ <- lists:seq(1, ?BROADCASTS)],
    %% Answered as soon as the loop polls its sockets again.
    T0 = erlang:monotonic_time(millisecond),
    Applied = maps:get(msgs_applied, stats(S)),
    io:format(user, "~nstats took ~b ms~n", [erlang:monotonic_time(millisecond) - T0]),
    Done = wait_stat(S, msgs_applied, fun(V) -> V >= ?BROADCASTS end, 60000),
    io:format(user, "~n/stats answered with ~b of ~b broadcasts applied~n",
              [Applied, maps:get(msgs_applied, Done)]),
    ?assert(Applied < ?BROADCASTS),
    [P ! stop || P <- Sinks].

%% A stream client that reads and drops everything.
sink(Port, Uid) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, true}]),
    ok = gen_tcp:send(Sock, httpdtest_http:get_request("/test/" ++ integer_to_list(Uid))),
    sink_loop(Sock).

sink_loop(Sock) ->
    receive
        {tcp, Sock, _} -> sink_loop(Sock);
        {tcp_closed, Sock} -> ok;
        stop -> gen_tcp:close(Sock)
    end.

-define(BURST, 20000).
-define(ROUNDS, 6).
-define(MARKER, <<"end of burst">>).

now_ms() -> erlang:monotonic_time(millisecond).

bursts(S) ->
    [{1, C}] = httpdtest_http:open_streams(S, [1], 1, #{forward => 1, sentinel => ?MARKER}),
    Rounds = bursts(S, C, 1),
    Want = lists:append(lists:duplicate(Rounds, [<<I:32>> || I <- lists:seq(1, ?BURST)]
                                                ++ [?MARKER])),
    ?assertEqual({all_in_order, true}, {all_in_order, Want =:= collected(C)}),
    close(C).

%% Runs the rounds; returns how many. Fails at the first late marker,
%% saying how late it came (to tell a delay from a loss; bounded too).
bursts(_S, _C, Round) when Round > ?ROUNDS -> ?ROUNDS;
bursts(S, C, Round) ->
    [send(S, {1, <<I:32>>}) || I <- lists:seq(1, ?BURST)],
    send(S, {1, ?MARKER}),
    T0 = now_ms(),
    receive
        {hc, C, sentinel} -> bursts(S, C, Round + 1);
        {hc, C, Other} -> erlang:error({stream_event, Round, summarize(Other)})
    after 5000 ->
            Late = receive {hc, C, sentinel} -> {came_after_ms, now_ms() - T0}
                   after 40000 -> not_within_45_s
                   end,
            erlang:error({last_message_of_burst_held_back, {round, Round}, Late})
    end.

sigterm_many(S) ->
    Conns = [C || {_, C} <- httpdtest_http:open_streams(S, lists:seq(1, ?CONNS),
                                                       ?IN_FLIGHT, #{})],
    ok = httpdtest_os:signal(S, "TERM"),
    Deadline = now_ms() + 20000,
    Ended = maps:from_list([{C, []} || C <- Conns]),
    NotClean = await_ends(Ended, Deadline, []),
    ?assertEqual({streams_not_ended_cleanly, 0, []},
                 {streams_not_ended_cleanly, length(NotClean), lists:sublist(NotClean, 5)}),
    ?assertMatch({ok, 0, _}, httpdtest_os:wait_exit(S, 5000)),
    [close(C) || C <- Conns].

%% Each connection must report last_chunk, then closed. Returns the ones
%% that reported anything else, with what they reported.
await_ends(Left, _Deadline, Bad) when map_size(Left) =:= 0 -> Bad;
await_ends(Left, Deadline, Bad) ->
    receive
        {hc, C, Ev} when is_map_key(C, Left) ->
            case {maps:get(C, Left), Ev} of
                {[], last_chunk} -> await_ends(Left#{C => [last_chunk]}, Deadline, Bad);
                {[last_chunk], closed} -> await_ends(maps:remove(C, Left), Deadline, Bad);
                {Seen, _} ->
                    await_ends(maps:remove(C, Left), Deadline,
                               [{lists:reverse([summarize(Ev) | Seen])} | Bad])
            end
    after max(0, Deadline - now_ms()) ->
            [{not_ended_in_time, map_size(Left)} | Bad]
    end.

storm(S) ->
    T0 = now_ms(),
    Conns = open_all(S),
    T1 = now_ms(),
    wait_stat(S, streams_open, fun(V) -> V =:= ?CONNS end, 10000),
    St0 = stats(S),
    rand:seed(exsss, {17, 65536, 2008}),
    Plan = [{Seq, rand:uniform(?CONNS)} || Seq <- lists:seq(1, ?MSGS)],
    [send(S, {Uid, payload(Seq, Uid)}) || {Seq, Uid} <- Plan],
    send(S, {broadcast, ?SENTINEL}),
    T2 = now_ms(),
    wait_sentinels(maps:from_list([{C, U} || {U, C} <- maps:to_list(Conns)]),
                   now_ms() + ?DELIVER_MS),
    T3 = now_ms(),
    Expected = expected(Plan),
    Bad = lists:foldl(
            fun(Uid, Acc) ->
                    Want = maps:get(Uid, Expected, []) ++ [?SENTINEL],
                    case collected(maps:get(Uid, Conns)) of
                        Want -> Acc;
                        Got -> [{uid, Uid, diff(Want, Got)} | Acc]
                    end
            end, [], lists:seq(1, ?CONNS)),
    St1 = stats(S),
    io:format(user, " [open ~b ms, send ~b ms, delivered ~b ms, backpressure waits ~b] ",
              [T1 - T0, T2 - T1, T3 - T2,
               maps:get(backpressure, St1) - maps:get(backpressure, St0)]),
    ?assertEqual({streams_with_wrong_messages, 0, []},
                 {streams_with_wrong_messages, length(Bad), lists:sublist(Bad, 5)}),
    ?assertEqual(?CONNS, maps:get(streams_open, St1)),
    ?assertEqual(?MSGS + ?CONNS, maps:get(deliveries, St1) - maps:get(deliveries, St0)),
    [close(C) || C <- maps:values(Conns)],
    wait_stat(S, streams_open, fun(V) -> V =:= 0 end, 20000).

payload(Seq, Uid) -> <<"storm ", Seq:32, Uid:32>>.

expected(Plan) ->
    M = lists:foldl(fun({Seq, Uid}, Acc) ->
                            maps:update_with(Uid, fun(L) -> [payload(Seq, Uid) | L] end,
                                             [payload(Seq, Uid)], Acc)
                    end, #{}, Plan),
    maps:map(fun(_, L) -> lists:reverse(L) end, M).

%% What differs, briefly: counts, first position that differs.
diff(Want, Got) ->
    {want, length(Want), got, length(Got), first_difference(Want, Got, 1)}.

first_difference([W | Ws], [W | Gs], I) -> first_difference(Ws, Gs, I + 1);
first_difference([W | _], [G | _], I) -> {at, I, want, summarize(W), got, summarize(G)};
first_difference([], [G | _], I) -> {extra_at, I, summarize(G)};
first_difference([W | _], [], I) -> {missing_from, I, summarize(W)};
first_difference([], [], _) -> none.

%% #{Uid => Conn}: the streams keep every chunk after the welcome.
open_all(S) ->
    maps:from_list(httpdtest_http:open_streams(S, lists:seq(1, ?CONNS), ?IN_FLIGHT,
                                               #{forward => 1, sentinel => ?SENTINEL})).

%% Every connection reports the sentinel chunk once; anything else it
%% reports now (a close, an end) is a failure.
wait_sentinels(Left, _Deadline) when map_size(Left) =:= 0 -> ok;
wait_sentinels(Left, Deadline) ->
    receive
        {hc, C, sentinel} when is_map_key(C, Left) ->
            wait_sentinels(maps:remove(C, Left), Deadline);
        {hc, C, Ev} ->
            erlang:error({stream_event_during_storm, maps:get(C, Left, done), summarize(Ev)})
    after max(0, Deadline - now_ms()) ->
            Uids = lists:sort(maps:values(Left)),
            erlang:error({not_all_delivered_in_time, {streams_waiting, length(Uids)},
                          {some, lists:sublist(Uids, 10)},
                          {kept_by_first,
                           length(collected(hd([C || {C, U} <- maps:to_list(Left),
                                                     U =:= hd(Uids)])))}})
    end.
