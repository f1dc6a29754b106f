%% SPDX-License-Identifier: Apache-2.0
%% Erlang side of scripts/soak.sh.
%%
%% publish: for a fixed time, sends {Uid, Data} to uniformly random uids at a
%% steady rate, {broadcast, Data} once a period, and large messages to one
%% "slow" uid (a client that never reads), all straight to the C-node from
%% this node, so that the master going away does not touch publishing. It
%% counts exactly what it sent to the stable uids (a range the churn never
%% touches): the unicasts that fell in that range, and every broadcast. After
%% the last message it waits for the C-node to answer a stats request, which
%% it handles after every message before it.
%%
%% master: starts the httpdcnode application (presence included) on this node
%% and reports how long it took until every stable uid was online at the
%% C-node again: the C-node's snapshot after it reconnected.
%%
%% From a shell script:
%%   erl -noshell -sname pub@localhost -setcookie C -pa tools/erlang/ebin \
%%       -eval 'soak:publish_cli()' -extra --node c1@localhost --seconds 60 ...
%%   erl -noshell -sname master@localhost -setcookie C -pa tools/erlang/ebin \
%%       -eval 'soak:master_cli()' -extra --node c1@localhost --stable 1-2000
-module(soak).

-export([publish/1, publish_cli/0, master/1, master_cli/0]).
%% Pure parts, exported for the tests.
-export([parse_args/1, in_range/2, expected_stable/1]).

-define(REPLY_TIMEOUT, 30000).
-define(PRESENCE_POLL_MS, 100).

%%% ----------------------------------------------------------- publish ----

%% Opts: node, seconds, rate (unicasts/s), uids {First, Last} (random range),
%% stable {First, Last}, procs, broadcast_ms (0: none), slow_uid (0: none),
%% slow_rate, slow_pad.
%% Returns #{sent, sent_stable, broadcasts, slow_sent, stable_uids,
%% expected_stable, synced, elapsed_us}.
-spec publish(map()) -> map().
publish(Opts0) ->
    Opts = maps:merge(#{procs => 4, broadcast_ms => 1000, slow_uid => 0, slow_rate => 20,
                        slow_pad => 32768},
                      Opts0),
    #{node := Node, seconds := Seconds, rate := Rate, uids := Uids, stable := Stable,
      procs := Procs, broadcast_ms := BcastMs, slow_uid := SlowUid, slow_rate := SlowRate,
      slow_pad := SlowPad} = Opts,
    ok = connect(Node),
    T0 = erlang:monotonic_time(microsecond),
    Total = round(Rate * Seconds),
    Unicast = [{unicast, Share, Rate / Procs} || Share <- msggen:split(Total, Procs)],
    Bcast = [{broadcast, Seconds * 1000 div BcastMs, 1000 / BcastMs} || BcastMs > 0],
    Slow = [{slow, round(SlowRate * Seconds), SlowRate} || SlowUid > 0],
    Ctx = #{node => Node, uids => Uids, stable => Stable, slow_uid => SlowUid,
            slow_data => binary:copy(<<"s">>, SlowPad)},
    Parent = self(),
    Workers = [spawn_monitor(fun() -> Parent ! {soak_done, self(), sender(Job, Ctx)} end)
               || Job <- Unicast ++ Bcast ++ Slow],
    Counts = collect(Workers, #{sent => 0, sent_stable => 0, broadcasts => 0, slow_sent => 0}),
    Synced = sync(Node),
    StableUids = element(2, Stable) - element(1, Stable) + 1,
    Counts#{stable_uids => StableUids,
            expected_stable => expected_stable(Counts#{stable_uids => StableUids}),
            synced => Synced, elapsed_us => erlang:monotonic_time(microsecond) - T0}.

connect(Node) when Node =:= node() ->
    ok;
connect(Node) ->
    case net_kernel:connect_node(Node) of
        true -> ok;
        _ -> erlang:error({cannot_connect, Node})
    end.

%% What the stable connections (one per stable uid) must receive in all.
-spec expected_stable(map()) -> non_neg_integer().
expected_stable(#{sent_stable := S, broadcasts := B, stable_uids := N}) ->
    S + B * N.

collect([], Acc) ->
    Acc;
collect([{Pid, Mref} | Rest], Acc) ->
    receive
        {soak_done, Pid, Counts} ->
            erlang:demonitor(Mref, [flush]),
            collect(Rest, maps:fold(fun(K, V, A) -> maps:update_with(K, fun(X) -> X + V end, A)
                                    end, Acc, Counts));
        {'DOWN', Mref, process, Pid, Reason} ->
            [exit(P, kill) || {P, _} <- Rest],
            erlang:error({sender_failed, Reason})
    end.

%% One paced job; returns its counts.
sender({unicast, Share, Rate}, Ctx) ->
    rand:seed(exsss),
    paced(Share, Rate, fun(Acc) -> unicast(Ctx, Acc) end, #{sent => 0, sent_stable => 0});
sender({broadcast, Count, Rate}, #{node := Node}) ->
    paced(Count, Rate, fun(#{broadcasts := B}) ->
                               erlang:send({any, Node}, {broadcast, payload()}),
                               #{broadcasts => B + 1}
                       end, #{broadcasts => 0});
sender({slow, Count, Rate}, #{node := Node, slow_uid := Uid, slow_data := Data}) ->
    paced(Count, Rate, fun(#{slow_sent := S}) ->
                               erlang:send({any, Node}, {Uid, [payload(), Data]}),
                               #{slow_sent => S + 1}
                       end, #{slow_sent => 0}).

unicast(#{node := Node, uids := {First, Last}, stable := Stable}, #{sent := S, sent_stable := SS}) ->
    Uid = First + rand:uniform(Last - First + 1) - 1,
    erlang:send({any, Node}, {Uid, payload()}),
    ToStable = case in_range(Uid, Stable) of
                   true -> 1;
                   false -> 0
               end,
    #{sent => S + 1, sent_stable => SS + ToStable}.

payload() ->
    msggen:payload(os:system_time(nanosecond), <<>>).

-spec in_range(integer(), {integer(), integer()}) -> boolean().
in_range(U, {First, Last}) ->
    U >= First andalso U =< Last.

%% Sends Total times at Rate per second, in bursts of what is due, sleeping
%% with an absolute timer in between (as msggen does).
paced(Total, Rate, Send, Acc) ->
    paced(Total, Rate, Send, Acc, erlang:monotonic_time(microsecond), 0).

paced(Total, _Rate, _Send, Acc, _T0, Sent) when Sent >= Total ->
    Acc;
paced(Total, Rate, Send, Acc, T0, Sent) ->
    Due = msggen:due(Rate, erlang:monotonic_time(microsecond) - T0, Total),
    Acc1 = send_n(Send, Acc, Due - Sent),
    Sent1 = max(Sent, Due),
    case Sent1 >= Total of
        true ->
            Acc1;
        false ->
            Timer = erlang:start_timer(msggen:wake_ms(Rate, T0, Sent1), self(), soak_tick,
                                       [{abs, true}]),
            receive {timeout, Timer, soak_tick} -> ok end,
            paced(Total, Rate, Send, Acc1, T0, Sent1)
    end.

send_n(_Send, Acc, N) when N =< 0 -> Acc;
send_n(Send, Acc, N) -> send_n(Send, Send(Acc), N - 1).

%% The C-node answers a stats request after handling every message before it.
sync(Node) ->
    Ref = make_ref(),
    erlang:send({any, Node}, {self(), Ref, stats}),
    receive
        {Ref, Map} when is_map(Map) -> true
    after ?REPLY_TIMEOUT -> false
    end.

%%% ------------------------------------------------------------ master ----

%% Starts the application; prints one line once every uid of Stable is
%% online at Node ("presence: ok ...") or when TimeoutMs passed first
%% ("presence: missing ..."). The node keeps running.
-spec master(map()) -> ok.
master(#{node := Node, stable := {First, Last}, timeout_ms := TimeoutMs}) ->
    T0 = erlang:monotonic_time(millisecond),
    {ok, _} = application:ensure_all_started(httpdcnode),
    Missing = await_online(Node, lists:seq(First, Last), T0 + TimeoutMs),
    Ms = erlang:monotonic_time(millisecond) - T0,
    case Missing of
        [] -> io:format("presence: ok ~b stable uids online at ~s after ~b ms~n",
                        [Last - First + 1, Node, Ms]);
        _ -> io:format("presence: missing ~b of ~b stable uids at ~s after ~b ms (first ~p)~n",
                       [length(Missing), Last - First + 1, Node, Ms, hd(Missing)])
    end.

await_online(Node, Uids, Deadline) ->
    Missing = [U || U <- Uids, not lists:member(Node, httpdcnode:online(U))],
    case Missing =:= [] orelse erlang:monotonic_time(millisecond) >= Deadline of
        true ->
            Missing;
        false ->
            timer:sleep(?PRESENCE_POLL_MS),
            await_online(Node, Missing, Deadline)
    end.

%%% --------------------------------------------------------------- CLI ----

%% erl ... -eval 'soak:publish_cli()' -extra ARGS: prints one JSON line, halts
%% (status 1 when the C-node did not answer the final stats request).
publish_cli() ->
    run_cli(fun(Opts) ->
                    R = publish(Opts),
                    io:format("~s~n", [msggen:to_json(R)]),
                    case maps:get(synced, R) of true -> 0; false -> 1 end
            end).

%% erl ... -eval 'soak:master_cli()' -extra ARGS: starts the application,
%% prints the presence line, keeps the node running.
master_cli() ->
    {ok, Opts} = parse_args(init:get_plain_arguments()),
    master(maps:merge(#{timeout_ms => 30000}, Opts)).

run_cli(Fun) ->
    Code = try
               {ok, Opts} = parse_args(init:get_plain_arguments()),
               Fun(Opts)
           catch
               throw:{bad_arg, Msg} ->
                   io:format(standard_error, "soak: ~s~n", [Msg]),
                   2;
               Class:Reason ->
                   io:format(standard_error, "soak: ~p:~p~n", [Class, Reason]),
                   1
           end,
    halt(Code).

%% --node N --seconds S --rate R --uids A-B --stable A-B --procs P
%% --broadcast-ms MS --slow-uid U --slow-rate R --slow-pad BYTES --timeout-ms MS
-spec parse_args([string()]) -> {ok, map()}.
parse_args(Args) ->
    {ok, parse_args(Args, #{})}.

parse_args([], Opts) ->
    Opts;
parse_args([Flag, V | T], Opts) ->
    parse_args(T, option(Flag, V, Opts));
parse_args([Flag], _) ->
    throw({bad_arg, "missing value or unknown option " ++ Flag}).

option("--node", V, O) -> O#{node => list_to_atom(V)};
option("--seconds", V, O) -> O#{seconds => int(V, 1, "--seconds")};
option("--rate", V, O) -> O#{rate => int(V, 1, "--rate")};
option("--uids", V, O) -> O#{uids => range(V, "--uids")};
option("--stable", V, O) -> O#{stable => range(V, "--stable")};
option("--procs", V, O) -> O#{procs => int(V, 1, "--procs")};
option("--broadcast-ms", V, O) -> O#{broadcast_ms => int(V, 0, "--broadcast-ms")};
option("--slow-uid", V, O) -> O#{slow_uid => int(V, 0, "--slow-uid")};
option("--slow-rate", V, O) -> O#{slow_rate => int(V, 1, "--slow-rate")};
option("--slow-pad", V, O) -> O#{slow_pad => int(V, 0, "--slow-pad")};
option("--timeout-ms", V, O) -> O#{timeout_ms => int(V, 1, "--timeout-ms")};
option(Flag, V, _) -> throw({bad_arg, "bad option " ++ Flag ++ " " ++ V}).

range(V, Flag) ->
    case string:split(V, "-") of
        [A, B] ->
            First = int(A, 1, Flag),
            {First, int(B, First, Flag)};
        _ ->
            throw({bad_arg, "bad " ++ Flag ++ " " ++ V ++ " (want A-B)"})
    end.

int(S, Min, Flag) ->
    case string:to_integer(S) of
        {N, ""} when is_integer(N), N >= Min -> N;
        _ -> throw({bad_arg, "bad " ++ Flag ++ " " ++ S})
    end.
