%% SPDX-License-Identifier: Apache-2.0
%% The soak publisher (bench/erlang/soak.erl): its command line, what it
%% counts as sent to the stable uids, and publish/1 against a local process
%% registered as `any', which stands in for the C-node and counts what it got.
-module(soak_tests).
-include_lib("eunit/include/eunit.hrl").

parse_args_test() ->
    {ok, O} = soak:parse_args(["--node", "c1@localhost", "--seconds", "60", "--rate", "20000",
                               "--uids", "1-17999", "--stable", "1-2000", "--procs", "4",
                               "--broadcast-ms", "1000", "--slow-uid", "18000",
                               "--slow-rate", "20", "--slow-pad", "32768"]),
    ?assertEqual(#{node => 'c1@localhost', seconds => 60, rate => 20000, uids => {1, 17999},
                   stable => {1, 2000}, procs => 4, broadcast_ms => 1000, slow_uid => 18000,
                   slow_rate => 20, slow_pad => 32768}, O).

parse_args_rejects_bad_values_test_() ->
    [?_assertThrow({bad_arg, _}, soak:parse_args(Args))
     || Args <- [["--seconds", "0"], ["--uids", "5-2"], ["--stable", "7"], ["--rate", "x"],
                 ["--what", "1"], ["--node"]]].

in_range_test() ->
    ?assert(soak:in_range(1, {1, 10})),
    ?assert(soak:in_range(10, {1, 10})),
    ?assertNot(soak:in_range(11, {1, 10})),
    ?assertNot(soak:in_range(0, {1, 10})).

%% Every broadcast reaches every stable stream; unicasts count once.
expected_stable_test() ->
    ?assertEqual(130 + 60 * 2000,
                 soak:expected_stable(#{sent_stable => 130, broadcasts => 60,
                                        stable_uids => 2000})).

%% What publish/1 says it sent to the stable uids is what arrived for them.
publish_counts_what_it_sent_test_() ->
    {timeout, 30, fun publish_counts/0}.

publish_counts() ->
    Sink = spawn(fun() -> sink(#{}) end),
    true = register(any, Sink),
    try
        R = soak:publish(#{node => node(), seconds => 2, rate => 500, uids => {1, 50},
                           stable => {1, 10}, procs => 2, broadcast_ms => 500, slow_uid => 51,
                           slow_rate => 5, slow_pad => 100}),
        Got = sink_counts(Sink),
        ?assertEqual(true, maps:get(synced, R)),
        ?assertEqual(1000, maps:get(sent, R)),
        ?assertEqual(4, maps:get(broadcasts, R)),
        ?assertEqual(10, maps:get(slow_sent, R)),
        ?assertEqual(maps:get(sent_stable, R), maps:get(stable, Got, 0)),
        ?assertEqual(1000, maps:get(stable, Got, 0) + maps:get(other, Got, 0)),
        ?assertEqual(4, maps:get(broadcast, Got, 0)),
        ?assertEqual(10, maps:get(slow, Got, 0)),
        ?assertEqual(maps:get(sent_stable, R) + 4 * 10, maps:get(expected_stable, R))
    after
        unregister(any),
        exit(Sink, kill)
    end.

%% Stands in for the C-node: counts messages by kind, answers stats requests.
sink(Counts) ->
    receive
        {Pid, Ref, stats} when is_pid(Pid) ->
            Pid ! {Ref, #{}},
            sink(Counts);
        {counts, From} ->
            From ! {counts, Counts},
            sink(Counts);
        {broadcast, _} ->
            sink(bump(broadcast, Counts));
        {51, [<<"t=", _/binary>>, <<_:100/binary>>]} ->
            sink(bump(slow, Counts));
        {Uid, <<"t=", _/binary>>} when Uid >= 1, Uid =< 10 ->
            sink(bump(stable, Counts));
        {Uid, <<"t=", _/binary>>} when Uid >= 11, Uid =< 50 ->
            sink(bump(other, Counts))
    end.

bump(K, M) -> maps:update_with(K, fun(V) -> V + 1 end, 1, M).

sink_counts(Sink) ->
    Sink ! {counts, self()},
    receive {counts, C} -> C after 5000 -> error(no_counts) end.
