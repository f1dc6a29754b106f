%% SPDX-License-Identifier: Apache-2.0
%% The publisher's pure parts (payload, pacing schedule, splitting, uid
%% choice, command line, JSON) and run/1 and once/1 against a local
%% process registered as `any', which stands in for the C-node.
-module(msggen_tests).
-include_lib("eunit/include/eunit.hrl").

payload_is_t_equals_ns_semicolon_pad_test() ->
    ?assertEqual(<<"t=1700000000123456789;">>, msggen:payload(1700000000123456789, <<>>)),
    ?assertEqual(<<"t=5;xxx">>, msggen:payload(5, <<"xxx">>)).

%% --seq: the message's number after the stamp, for httpclient --record.
payload_with_seq_has_n_after_the_stamp_test() ->
    ?assertEqual(<<"t=5;n=0;">>, msggen:payload(5, 0, <<>>)),
    ?assertEqual(<<"t=5;n=123;xx">>, msggen:payload(5, 123, <<"xx">>)).

parse_args_seq_and_via_app_test() ->
    ?assertMatch({run, #{seq := true, via := app}},
                 msggen:parse_args(["--seq", "--via", "app", "--count", "3"])).

due_follows_rate_times_elapsed_test() ->
    ?assertEqual(0, msggen:due(1000, 0, 100)),
    ?assertEqual(0, msggen:due(1000, 999, 100)),
    ?assertEqual(1, msggen:due(1000, 1000, 100)),
    ?assertEqual(50, msggen:due(1000, 50000, 100)),
    %% Capped by the total, never negative.
    ?assertEqual(100, msggen:due(1000, 10000000, 100)),
    ?assertEqual(0, msggen:due(1000, -5, 100)),
    ?assertEqual(3, msggen:due(2.5, 1200000, 100)).

%% Ticks that come late are caught up in one burst: after any sequence of
%% wake-ups, exactly the due count has been sent (no drift).
late_ticks_catch_up_without_drift_test() ->
    Rate = 10000,
    Wakeups = [0, 1000, 2000, 2500, 9000, 9100, 20000, 20001, 1000000],
    {Sent, Bursts} = lists:foldl(
                       fun(T, {S, Acc}) ->
                               D = msggen:due(Rate, T, 100000),
                               {max(S, D), [D - S | Acc]}
                       end, {0, []}, Wakeups),
    ?assertEqual(10000, Sent),
    ?assert(lists:all(fun(B) -> B >= 0 end, Bursts)),
    ?assertEqual(Sent, lists:sum(Bursts)).

wake_in_the_millisecond_the_next_message_is_due_test() ->
    %% 10 msg/s from 0: message 2 is due at 200 ms.
    ?assertEqual(200, msggen:wake_ms(10, 0, 1)),
    %% 20k msg/s: 20 sent by 1 ms, message 21 is due at 1.05 ms: wake at 2 ms
    %% and send the 20 due by then, one burst per millisecond.
    ?assertEqual(2, msggen:wake_ms(20000, 0, 20)),
    ?assertEqual(3, msggen:wake_ms(20000, 0, 40)),
    %% Monotonic time may be negative; the start offset counts.
    ?assertEqual(-4, msggen:wake_ms(1000, -5000, 0)),
    ?assertEqual(9, msggen:wake_ms(1000, 2500, 5)),   % due at 8.5 ms
    %% Rounded up: never wakes before the message is due.
    ?assertEqual(2, msggen:wake_ms(1000, 500, 0)).   % due at 1.5 ms

split_shares_differ_by_at_most_one_test() ->
    ?assertEqual([4, 3, 3], msggen:split(10, 3)),
    ?assertEqual([0, 0], msggen:split(0, 2)),
    ?assertEqual([7], msggen:split(7, 1)),
    [begin
         Shares = msggen:split(C, P),
         ?assertEqual(P, length(Shares)),
         ?assertEqual(C, lists:sum(Shares)),
         ?assert(lists:max(Shares) - lists:min(Shares) =< 1)
     end || C <- [0, 1, 5, 99, 100, 12345], P <- [1, 2, 3, 7, 16]].

rate_is_shared_between_senders_test() ->
    ?assertEqual(max, msggen:rate_share(max, 4)),
    ?assertEqual(2500.0, msggen:rate_share(10000, 4)).

sequential_uids_walk_the_range_and_wrap_test() ->
    ?assertEqual([10, 11, 12, 10, 11], [msggen:uids_for(sequential, {10, 12}, single, N, rand)
                                        || N <- lists:seq(0, 4)]),
    ?assertEqual([5, 6, 7], msggen:uids_for(sequential, {5, 9}, 3, 0, rand)),
    ?assertEqual([8, 9, 5], msggen:uids_for(sequential, {5, 9}, 3, 1, rand)).

random_uids_stay_in_range_test() ->
    Uids = lists:append([msggen:uids_for(random, {100, 104}, 4, N, rand)
                         || N <- lists:seq(1, 200)]),
    ?assertEqual(800, length(Uids)),
    ?assert(lists:all(fun(U) -> U >= 100 andalso U =< 104 end, Uids)),
    %% 800 draws over 5 uids hit every one.
    ?assertEqual([100, 101, 102, 103, 104], lists:usort(Uids)),
    ?assert(is_integer(msggen:uids_for(random, {1, 1}, single, 0, rand))).

%% The names httpclient --topics subscribes to.
topic_name_test() ->
    ?assertEqual(<<"t:0">>, msggen:topic_name(0)),
    ?assertEqual(<<"t:99999">>, msggen:topic_name(99999)).

parse_args_test() ->
    ?assertEqual({run, #{node => 'c1@localhost', count => 200000, rate => max}},
                 msggen:parse_args(["--node", "c1@localhost", "--count", "200000",
                                    "--rate", "max"])),
    ?assertEqual({run, #{node => n@h, rate => 2500, uids => {3, 9}, order => random,
                         multicast => 4, pad => 100, procs => 8, via => router, sync => true}},
                 msggen:parse_args(["--node", "n@h", "--rate", "2500", "--uids", "3-9",
                                    "--order", "random", "--multicast", "4", "--pad", "100",
                                    "--procs", "8", "--via", "router", "--sync"])),
    ?assertEqual({run, #{node => n@h, rate => 0.5}},
                 msggen:parse_args(["--node", "n@h", "--rate", "0.5"])),
    ?assertEqual({once, #{node => n@h, broadcast => true}},
                 msggen:parse_args(["--broadcast", "--node", "n@h"])),
    ?assertEqual({once, #{node => n@h, uids => {7, 7}}},
                 msggen:parse_args(["--once", "--node", "n@h", "--uids", "7"])),
    ?assertEqual({run, #{node => n@h, topics => {0, 9999}}},
                 msggen:parse_args(["--node", "n@h", "--topics", "0-9999"])),
    ?assertEqual({once, #{node => n@h, topic => <<"t:3">>}},
                 msggen:parse_args(["--once", "--node", "n@h", "--topic", "t:3"])),
    ?assertError({bad_options, _}, msggen:run(#{node => n@h, topics => {0, 1}, multicast => 2})),
    ?assertMatch({help, _}, msggen:parse_args(["--help"])),
    %% Through the router the C-nodes are the router's business.
    ?assertEqual({run, #{via => router}}, msggen:parse_args(["--via", "router"])),
    ?assertError({bad_options, _}, msggen:run(#{count => 1})),
    [?assertThrow({bad_arg, _}, msggen:parse_args(Bad))
     || Bad <- [[], ["--count", "5"], ["--node", "n@h", "--count", "-1"],
                ["--node", "n@h", "--rate", "0"], ["--node", "n@h", "--uids", "9-3"],
                ["--node", "n@h", "--order", "backwards"], ["--node", "n@h", "--bogus", "1"],
                ["--node", "n@h", "--procs"], ["--node", "n@h", "--procs", "0"]]].

to_json_test() ->
    ?assertEqual(<<"{\"elapsed_us\":1500,\"rate\":133333.3,\"sent\":200,\"via\":\"router\"}">>,
                 iolist_to_binary(msggen:to_json(#{sent => 200, elapsed_us => 1500,
                                                   rate => 133333.33, via => router}))).

%% A stand-in C-node: the process registered as `any' on this node collects
%% what arrives and answers the replying forms.
with_fake_cnode(Fun) ->
    Self = self(),
    Pid = spawn(fun() -> fake_cnode(Self, []) end),
    true = register(any, Pid),
    try
        Fun(Pid)
    after
        exit(Pid, kill),
        catch unregister(any)
    end.

fake_cnode(Owner, Got) ->
    receive
        {collect, From} ->
            From ! {collected, lists:reverse(Got)},
            fake_cnode(Owner, Got);
        {Pid, Ref, stats} ->
            Pid ! {Ref, #{deliveries => length(Got)}},
            fake_cnode(Owner, Got);
        {Pid, Ref, Uids, Data} when is_pid(Pid), is_list(Uids) ->
            Pid ! {Ref, length(Uids)},
            fake_cnode(Owner, [{Uids, Data} | Got]);
        Msg ->
            fake_cnode(Owner, [Msg | Got])
    end.

collected(Pid) ->
    Pid ! {collect, self()},
    receive {collected, Got} -> Got after 5000 -> error(no_answer) end.

%% Message-weighted: 10 messages sent alone, 20 in one burst of 20.
burst_percentile_test() ->
    B = #{1 => 10, 20 => 1},
    ?assertEqual(1, msggen:burst_percentile(B, 30)),
    ?assertEqual(1, msggen:burst_percentile(B, 33)),
    ?assertEqual(20, msggen:burst_percentile(B, 34)),
    ?assertEqual(20, msggen:burst_percentile(B, 50)),
    ?assertEqual(20, msggen:burst_percentile(B, 100)),
    ?assertEqual(1, msggen:burst_percentile(B, 0)),
    ?assertEqual(3, msggen:burst_percentile(#{3 => 5}, 99)).

%% With 3 senders the whole run still covers each message number once, so
%% sequential uids over a range of exactly Count uids hit each uid once.
run_sends_count_messages_over_procs_test_() ->
    {timeout, 30, fun() ->
        with_fake_cnode(
          fun(Pid) ->
                  R = msggen:run(#{node => node(), count => 300, rate => 3000,
                                   uids => {1, 300}, procs => 3, pad => 4, sync => true}),
                  ?assertMatch(#{sent := 300, procs := 3}, R),
                  ?assert(maps:get(synced_us, R) >= maps:get(elapsed_us, R)),
                  %% paced: how many messages each wake-up sent at once
                  #{burst_p50 := B50, burst_p99 := B99, burst_max := BMax} = R,
                  ?assert(1 =< B50 andalso B50 =< B99 andalso B99 =< BMax andalso BMax =< 100),
                  %% CPU of this node over the run: counted, and not more than
                  %% every core could spend in that time (+ 2 clock ticks).
                  Cpu = maps:get(cpu_us, R),
                  ?assert(is_integer(Cpu) andalso Cpu >= 0),
                  ?assert(Cpu =< maps:get(synced_us, R) * erlang:system_info(logical_processors)
                                 + 20000),
                  Got = collected(Pid),
                  ?assertEqual(300, length(Got)),
                  ?assertEqual(lists:seq(1, 300), lists:sort([U || {U, _} <- Got])),
                  [?assertMatch(<<"t=", _/binary>>, D) || {_, D} <- Got],
                  [?assertMatch([_, <<"xxxx">>], binary:split(D, <<";">>)) || {_, D} <- Got],
                  Now = os:system_time(nanosecond),
                  [begin
                       [<<"t=", Ns/binary>>, _] = binary:split(D, <<";">>),
                       T = binary_to_integer(Ns),
                       ?assert(T =< Now andalso T > Now - 60000000000)
                   end || {_, D} <- Got]
          end)
    end}.

run_multicast_sends_lists_of_k_uids_test() ->
    with_fake_cnode(
      fun(Pid) ->
              #{sent := 10} = msggen:run(#{node => node(), count => 10, uids => {1, 1000},
                                           order => random, multicast => 5}),
              Got = collected(Pid),
              ?assertEqual(10, length(Got)),
              [?assertEqual(5, length(Uids)) || {Uids, _} <- Got]
      end).

once_multicast_gets_the_count_back_test() ->
    with_fake_cnode(
      fun(_Pid) ->
              ?assertMatch(#{conns := 3, uids := 3},
                           msggen:once(#{node => node(), uids => [4, 5, 6]}))
      end).

once_broadcast_counts_deliveries_test() ->
    with_fake_cnode(
      fun(Pid) ->
              R = msggen:once(#{node => node(), broadcast => true}),
              %% The stand-in counts every message it got as a delivery.
              ?assertMatch(#{conns := 1}, R),
              ?assertMatch([{broadcast, <<"t=", _/binary>>}], collected(Pid))
      end).
