%% SPDX-License-Identifier: Apache-2.0
%% Message publisher for load tests: sends timestamped messages to a C-node
%% (or through httpdcnode_router:send/2) at a given rate, from one or more processes.
%%
%% Each payload is <<"t=", SystemTimeNs, ";", Pad>>, built at send time, so
%% a client can take now - t as the message's latency. With seq => true it
%% is <<"t=", Ns, ";n=", N, ";", Pad>>, N the message's number in the run
%% (0, 1, ...; in sequential order its uid is First + N rem the range's
%% size), so a checker can tell which messages a client missed
%% (httpclient --record, scripts/cluster-sim.sh).
%%
%% Pacing: every sender compares the messages it has sent with the number
%% due since its start (rate * elapsed) and sends the difference in one burst,
%% then sleeps until the millisecond in which the next message is due, with
%% an absolute timer: `receive after 1` would sleep about 2 ms here and
%% double every burst. Late wake-ups are caught up by the next burst, so the
%% rate does not drift and nothing busy-loops.
%%
%% With topics => {A, B} the messages are published to topics instead of
%% sent to uids: message N to the topic <<"t:", I>>, I = A + N rem the
%% range's size (sequential) or uniform in it (random), as {topic, Topic,
%% Data} (direct) or httpdcnode:publish/2 (app); httpclient --topics
%% subscribes to those names.
%%
%% From a shell script:
%%   erl -noshell -sname pub_$$@localhost -setcookie C -pa tools/erlang/ebin \
%%       -eval 'msggen:cli()' -extra --node c1@localhost --count 200000 --rate max
%% prints one JSON line with the result and halts (see usage/0). As an escript:
%%   main(Args) -> msggen:main(Args).
%% with --sname NAME --cookie C among the arguments to start distribution.
-module(msggen).

-export([run/1, once/1, cli/0, main/1, usage/0]).
%% Pure parts, exported for the tests.
-export([payload/2, payload/3, due/3, wake_ms/3, split/2, rate_share/2, uids_for/5, burst_percentile/2,
         parse_args/1, to_json/1, topic_name/1]).

-define(CONNECT_TIMEOUT, 5000).
-define(REPLY_TIMEOUT, 10000).

-type uid() :: pos_integer().
-type opts() :: #{node => node(),      % required unless via => router
                  count => non_neg_integer(),
                  rate => number() | max,
                  uids => {uid(), uid()},
                  order => random | sequential,
                  multicast => single | pos_integer(),
                  pad => non_neg_integer(),
                  procs => pos_integer(),
                  via => direct | router | app,
                  topics => {non_neg_integer(), non_neg_integer()} | none,
                  seq => boolean(),
                  sync => boolean()}.

%%% ---------------------------------------------------------------- run ----

%% Sends Opts.count messages and returns what was sent and how fast:
%% #{sent, elapsed_us, rate} (plus, with sync => true, synced and synced_us: the time until
%% the C-node answered a stats request sent after the last message, which it
%% handles after every message before it; plus deliveries with via => router;
%% plus cpu_us, the CPU time this Erlang node spent meanwhile, all threads).
-spec run(opts()) -> map().
run(Opts) ->
    Cpu0 = os_cpu_us(),
    Result = send_all(defaults(Opts)),
    case {Cpu0, os_cpu_us()} of
        {C0, C1} when is_integer(C0), is_integer(C1) -> Result#{cpu_us => C1 - C0};
        _ -> Result
    end.

%% User + system CPU time of this OS process from /proc/self/stat, or
%% undefined off Linux. Not erlang:statistics(runtime): that leaves out the
%% distribution's socket writes and the schedulers' busy waiting.
os_cpu_us() ->
    case file:read_file("/proc/self/stat") of
        {ok, Stat} ->
            %% Fields after the command name, which is in parentheses;
            %% utime and stime are fields 14 and 15 of the whole line.
            [_, After] = string:split(Stat, <<")">>, trailing),
            [_State | Fields] = string:lexemes(After, " "),
            Utime = binary_to_integer(lists:nth(11, Fields)),
            Stime = binary_to_integer(lists:nth(12, Fields)),
            (Utime + Stime) * 1000000 div clock_ticks();
        {error, _} ->
            undefined
    end.

clock_ticks() ->
    case persistent_term:get({?MODULE, clk_tck}, undefined) of
        undefined ->
            T = case string:to_integer(os:cmd("getconf CLK_TCK")) of
                    {N, _} when is_integer(N), N > 0 -> N;
                    _ -> 100         % USER_HZ on every Linux architecture
                end,
            persistent_term:put({?MODULE, clk_tck}, T),
            T;
        T ->
            T
    end.

send_all(Opts) ->
    #{node := Node, count := Count, procs := Procs, rate := Rate, via := Via} = Opts,
    ok = check(Opts),
    ok = connect(Via, Node),
    Pad = binary:copy(<<"x">>, maps:get(pad, Opts)),
    Parent = self(),
    T0 = erlang:monotonic_time(microsecond),
    Shares = split(Count, Procs),
    Workers = [spawn_monitor(fun() -> sender(Parent, Opts, Pad, I, Procs, Share,
                                              rate_share(Rate, Procs)) end)
               || {I, Share} <- lists:zip(lists:seq(0, Procs - 1), Shares)],
    {Sent, Deliveries, Bursts} = collect(Workers, 0, 0, #{}),
    T1 = erlang:monotonic_time(microsecond),
    Elapsed = max(1, T1 - T0),
    Result = maps:merge(#{sent => Sent, elapsed_us => Elapsed, rate => Sent * 1000000 / Elapsed,
                          procs => Procs},
                        burst_figures(Bursts)),
    R1 = case Via of
             router -> Result#{deliveries => Deliveries};
             _ -> Result
         end,
    case maps:get(sync, Opts) andalso Via =:= direct of
        true ->
            try stats(Node) of
                _ -> R1#{synced => true,
                         synced_us => erlang:monotonic_time(microsecond) - T0}
            catch
                error:{no_reply, _} -> R1#{synced => false}
            end;
        false ->
            R1
    end.

defaults(Opts) ->
    maps:merge(#{node => undefined, count => 1000, rate => max, uids => {1, 1},
                 order => sequential, multicast => single, pad => 0, procs => 1,
                 via => direct, seq => false, sync => false, topics => none},
               Opts).

check(#{node := Node, count := Count, rate := Rate, uids := {First, Last}, order := Order,
        multicast := Multi, pad := Pad, procs := Procs, via := Via, topics := Topics})
  when is_atom(Node), (Node =/= undefined orelse Via =/= direct),
       is_integer(Count), Count >= 0,
       (Rate =:= max orelse (is_number(Rate) andalso Rate > 0)),
       is_integer(First), is_integer(Last), First >= 1, Last >= First,
       (Order =:= random orelse Order =:= sequential),
       (Multi =:= single orelse (is_integer(Multi) andalso Multi >= 1)),
       is_integer(Pad), Pad >= 0, is_integer(Procs), Procs >= 1,
       (Via =:= direct orelse Via =:= router orelse Via =:= app),
       (Topics =:= none orelse (Via =/= router andalso Multi =:= single)) ->
    ok;
check(Opts) ->
    erlang:error({bad_options, Opts}).

connect(Via, _Node) when Via =:= router; Via =:= app ->
    ok;
connect(direct, Node) when Node =:= node() ->
    ok;
connect(direct, Node) ->
    case net_kernel:connect_node(Node) of
        true -> ok;
        _ -> erlang:error({cannot_connect, Node})
    end.

collect([], Sent, Deliveries, Bursts) ->
    {Sent, Deliveries, Bursts};
collect([{Pid, Mref} | Rest], Sent, Deliveries, Bursts) ->
    receive
        {msggen_done, Pid, S, D, B} ->
            erlang:demonitor(Mref, [flush]),
            collect(Rest, Sent + S, Deliveries + D, merge_bursts(Bursts, B));
        {'DOWN', Mref, process, Pid, Reason} ->
            [exit(P, kill) || {P, _} <- Rest],
            erlang:error({sender_failed, Reason})
    end.

%%% ------------------------------------------------------------ senders ----

%% Sender I of Procs sends Share messages; its k-th message is message
%% I + k * Procs of the whole run (that number picks the uids in sequential
%% order).
sender(Parent, Opts, Pad, I, Procs, Share, Rate) ->
    rand:seed(exsss),
    Ctx = #{opts => Opts, pad => Pad, index => I, procs => Procs, deliveries => 0,
            bursts => #{}},
    T0 = erlang:monotonic_time(microsecond),
    Ctx1 = case Rate of
               max -> send_range(Ctx, 0, Share);
               _ -> paced(Ctx, Share, Rate, T0, 0)
           end,
    Parent ! {msggen_done, self(), Share, maps:get(deliveries, Ctx1), maps:get(bursts, Ctx1)}.

paced(Ctx, Share, _Rate, _T0, Sent) when Sent >= Share ->
    Ctx;
paced(Ctx, Share, Rate, T0, Sent) ->
    Elapsed = erlang:monotonic_time(microsecond) - T0,
    Due = due(Rate, Elapsed, Share),
    Ctx1 = count_burst(send_range(Ctx, Sent, Due), Due - Sent),
    Sent1 = max(Sent, Due),
    case Sent1 >= Share of
        true ->
            Ctx1;
        false ->
            Timer = erlang:start_timer(wake_ms(Rate, T0, Sent1), self(), msggen_tick,
                                       [{abs, true}]),
            receive {timeout, Timer, msggen_tick} -> ok end,
            paced(Ctx1, Share, Rate, T0, Sent1)
    end.

%% Paced senders count how many messages each wake-up sent at once.
count_burst(Ctx, N) when N =< 0 ->
    Ctx;
count_burst(#{bursts := B} = Ctx, N) ->
    Ctx#{bursts := maps:update_with(N, fun(C) -> C + 1 end, 1, B)}.

merge_bursts(A, B) ->
    maps:fold(fun(N, C, Acc) -> maps:update_with(N, fun(X) -> X + C end, C, Acc) end, A, B).

%% For a paced run: half the messages went out in bursts of at most
%% burst_p50 messages, 99 % in bursts of at most burst_p99; the largest burst.
burst_figures(Bursts) when map_size(Bursts) =:= 0 ->
    #{};
burst_figures(Bursts) ->
    #{burst_p50 => burst_percentile(Bursts, 50), burst_p99 => burst_percentile(Bursts, 99),
      burst_max => lists:max(maps:keys(Bursts))}.

%% Bursts: #{Size => how many bursts of that size}. The size of the burst
%% holding the message at percentile P when messages are ordered by the size
%% of their burst: a message-weighted percentile.
-spec burst_percentile(#{pos_integer() => pos_integer()}, number()) -> pos_integer().
burst_percentile(Bursts, P) ->
    Sizes = lists:sort(maps:to_list(Bursts)),
    Total = lists:sum([N * C || {N, C} <- Sizes]),
    Rank = max(1, ceil(P / 100 * Total)),
    burst_at(Sizes, Rank, 0).

burst_at([{N, C} | Rest], Rank, Seen) ->
    case Seen + N * C >= Rank of
        true -> N;
        false -> burst_at(Rest, Rank, Seen + N * C)
    end.

%% Sends this sender's messages From..To-1.
send_range(Ctx, From, To) when From >= To ->
    Ctx;
send_range(#{opts := Opts, pad := Pad, index := I, procs := Procs} = Ctx, From, To) ->
    #{uids := Range, order := Order, multicast := Multi} = Opts,
    N = I + From * Procs,
    Uids = case maps:get(topics, Opts) of
               none -> uids_for(Order, Range, Multi, N, rand);
               {A, B} -> {topic, topic_name(uids_for(Order, {A, B}, single, N, rand))}
           end,
    Data = case maps:get(seq, Opts) of
               true -> payload(os:system_time(nanosecond), N, Pad);
               false -> payload(os:system_time(nanosecond), Pad)
           end,
    send_to(Ctx, Uids, Data),
    send_range(Ctx, From + 1, To).

send_to(#{opts := #{via := direct, node := Node}}, {topic, Topic}, Data) ->
    erlang:send({any, Node}, {topic, Topic, Data});
send_to(#{opts := #{via := app}}, {topic, Topic}, Data) ->
    ok = httpdcnode:publish(Topic, Data);
send_to(#{opts := #{via := direct, node := Node}}, Uids, Data) ->
    erlang:send({any, Node}, {Uids, Data});
send_to(#{opts := #{via := app}}, Uids, Data) when is_list(Uids) ->
    ok = httpdcnode:multicast(Uids, Data);
send_to(#{opts := #{via := app}}, Uid, Data) ->
    ok = httpdcnode:send(Uid, Data);
send_to(#{opts := #{via := router}} = Ctx, Uids, Data) when is_list(Uids) ->
    lists:foldl(fun(U, C) -> send_to(C, U, Data) end, Ctx, Uids);
send_to(#{opts := #{via := router}, deliveries := D} = Ctx, Uid, Data) ->
    {ok, N} = httpdcnode_router:send(Uid, Data),
    Ctx#{deliveries := D + N}.

%%% --------------------------------------------------------- once ----

%% Sends one message and times it until the C-node has handled it.
%%   #{node, uids => [Uid] | {First, Last}, pad}: a multicast {Pid, Ref,
%%     Uids, Data}; returns #{conns => N written to, elapsed_us}.
%%   #{node, broadcast => true, pad}: {broadcast, Data} followed by a stats
%%     request; returns #{conns => deliveries it made, elapsed_us}.
%%   #{node, topic => Topic, pad}: {Pid, Ref, topic, Topic, Data}; returns
%%     #{conns => N written to, elapsed_us}.
-spec once(map()) -> map().
once(#{node := Node} = Opts) ->
    ok = connect(direct, Node),
    Pad = binary:copy(<<"x">>, maps:get(pad, Opts, 0)),
    case {maps:get(broadcast, Opts, false), maps:get(topic, Opts, none)} of
        {false, Topic} when Topic =/= none ->
            Ref = make_ref(),
            T0 = erlang:monotonic_time(microsecond),
            erlang:send({any, Node}, {self(), Ref, topic, Topic,
                                      payload(os:system_time(nanosecond), Pad)}),
            receive
                {Ref, N} -> #{conns => N, elapsed_us => erlang:monotonic_time(microsecond) - T0}
            after ?REPLY_TIMEOUT ->
                    erlang:error({no_reply, Node})
            end;
        {true, _} ->
            Before = deliveries(stats(Node)),
            T0 = erlang:monotonic_time(microsecond),
            erlang:send({any, Node}, {broadcast, payload(os:system_time(nanosecond), Pad)}),
            After = deliveries(stats(Node)),
            #{conns => After - Before, elapsed_us => erlang:monotonic_time(microsecond) - T0};
        {false, none} ->
            Uids = case maps:get(uids, Opts, {1, 1}) of
                       {First, Last} -> lists:seq(First, Last);
                       List when is_list(List) -> List
                   end,
            Ref = make_ref(),
            T0 = erlang:monotonic_time(microsecond),
            erlang:send({any, Node}, {self(), Ref, Uids, payload(os:system_time(nanosecond), Pad)}),
            receive
                {Ref, N} ->
                    #{conns => N, uids => length(Uids),
                      elapsed_us => erlang:monotonic_time(microsecond) - T0}
            after ?REPLY_TIMEOUT ->
                    erlang:error({no_reply, Node})
            end
    end.

stats(Node) ->
    Ref = make_ref(),
    erlang:send({any, Node}, {self(), Ref, stats}),
    receive
        {Ref, Map} when is_map(Map) -> Map
    after ?REPLY_TIMEOUT ->
            erlang:error({no_reply, Node})
    end.

deliveries(Stats) ->
    maps:get(deliveries, Stats, maps:get(<<"deliveries">>, Stats, 0)).

%%% -------------------------------------------------------- pure parts ----

%% Topic I of --topics: the name httpclient --topics subscribes to.
-spec topic_name(non_neg_integer()) -> binary().
topic_name(I) ->
    <<"t:", (integer_to_binary(I))/binary>>.

%% The payload of a message sent at NowNs (CLOCK_REALTIME ns).
-spec payload(integer(), binary()) -> binary().
payload(NowNs, Pad) ->
    <<"t=", (integer_to_binary(NowNs))/binary, ";", Pad/binary>>.

%% The same with the message's number N after the stamp (seq => true).
-spec payload(integer(), non_neg_integer(), binary()) -> binary().
payload(NowNs, N, Pad) ->
    <<"t=", (integer_to_binary(NowNs))/binary, ";n=", (integer_to_binary(N))/binary, ";",
      Pad/binary>>.

%% Messages due ElapsedUs after the start at Rate per second, at most Total.
-spec due(number(), integer(), non_neg_integer()) -> non_neg_integer().
due(Rate, ElapsedUs, Total) ->
    min(Total, floor(Rate * max(0, ElapsedUs) / 1000000)).

%% When a sender that started at T0Us (erlang:monotonic_time(microsecond))
%% and has sent Sent messages wakes next: the monotonic millisecond in which
%% message Sent + 1 is due, rounded up so that it is due by then.
-spec wake_ms(number(), integer(), non_neg_integer()) -> integer().
wake_ms(Rate, T0Us, Sent) ->
    ceil((T0Us + (Sent + 1) * 1000000 / Rate) / 1000).

%% Count split over Procs senders: shares differ by at most one.
-spec split(non_neg_integer(), pos_integer()) -> [non_neg_integer()].
split(Count, Procs) ->
    Base = Count div Procs,
    Extra = Count rem Procs,
    [Base + (if I < Extra -> 1; true -> 0 end) || I <- lists:seq(0, Procs - 1)].

%% Each sender's share of the rate.
-spec rate_share(number() | max, pos_integer()) -> number() | max.
rate_share(max, _Procs) -> max;
rate_share(Rate, Procs) -> Rate / Procs.

%% The uid (single) or uids (multicast K) of message number N of the run.
%% Sequential: uids follow each other through the range, wrapping around.
%% Random: uniform over the range (RandMod: a module with uniform/1).
-spec uids_for(random | sequential, {uid(), uid()}, single | pos_integer(),
               non_neg_integer(), module()) -> uid() | [uid()].
uids_for(Order, Range, single, N, RandMod) ->
    hd(uids_for(Order, Range, 1, N, RandMod));
uids_for(sequential, {First, Last}, K, N, _RandMod) ->
    Size = Last - First + 1,
    [First + (N * K + J) rem Size || J <- lists:seq(0, K - 1)];
uids_for(random, {First, Last}, K, _N, RandMod) ->
    Size = Last - First + 1,
    [First + RandMod:uniform(Size) - 1 || _ <- lists:seq(1, K)].

%%% ---------------------------------------------------------------- CLI ----

usage() ->
    "msggen: sends timestamped messages to an httpdcnode C-node\n"
    "  erl -noshell -sname pub_$$@localhost -setcookie C -pa tools/erlang/ebin \\\n"
    "      -eval 'msggen:cli()' -extra [options]\n"
    "  --node NODE          C-node to send to (required unless --via router)\n"
    "  --count N            messages (default 1000)\n"
    "  --rate R|max         messages per second over all senders (default max)\n"
    "  --uids A-B           uid range (default 1-1)\n"
    "  --order random|sequential   (default sequential)\n"
    "  --multicast K        each message {[Uid x K], Data} (default {Uid, Data})\n"
    "  --topics A-B         publish to the topics t:A .. t:B (in --order) instead\n"
    "                       of sending to uids (not with --multicast, --via router)\n"
    "  --pad BYTES          payload padding after \"t=<ns>;\" (default 0)\n"
    "  --procs P            sending processes (default 1)\n"
    "  --via direct|router|app  send to the C-node, with httpdcnode_router:send/2, or with\n"
    "                       httpdcnode:send/2 (the application, on this node)\n"
    "  --seq                \"n=N;\" after the stamp: the message's number in the run\n"
    "  --sync               after the last message, wait for a stats reply\n"
    "  --once               one message to every uid of --uids, acknowledged\n"
    "  --broadcast          one {broadcast, Data}, timed until handled\n"
    "  --topic T            with --once: one {Pid, Ref, topic, T, Data}, acknowledged\n"
    "  --sname NAME --cookie C   start distribution when not started (main/1)\n"
    "Prints one JSON line: {\"sent\":..,\"elapsed_us\":..,\"rate\":..,\"cpu_us\":..}\n"
    "(paced: also burst_p50, burst_p99, burst_max, the messages sent at once per\n"
    "wake-up, message-weighted; or the result of --once / --broadcast).\n"
    "Exit status 2 on bad options, 1 on errors.\n".

%% Entry point for erl -eval 'msggen:cli()' -extra ARGS.
cli() ->
    main(init:get_plain_arguments()).

%% Entry point for an escript (or cli/0): runs, prints, halts.
main(Args) ->
    Code = try
               main_1(parse_args(Args))
           catch
               throw:{bad_arg, Msg} ->
                   io:format(standard_error, "msggen: ~s (see --help)~n", [Msg]),
                   2;
               Class:Reason ->
                   io:format(standard_error, "msggen: ~p:~p~n", [Class, Reason]),
                   1
           end,
    halt(Code).

main_1({help, _}) ->
    io:put_chars(usage()),
    0;
main_1({Mode, Opts}) ->
    start_dist(Opts),
    Result = case Mode of
                 run -> run(maps:without([sname, cookie], Opts));
                 once -> once(Opts)
             end,
    io:format("~s~n", [to_json(Result)]),
    %% What was sent is printed either way; an unanswered sync is a failure.
    case maps:get(synced, Result, true) of
        true -> 0;
        false -> io:format(standard_error, "msggen: no reply from the C-node~n", []), 1
    end.

start_dist(Opts) ->
    case node() of
        nonode@nohost ->
            Name = maps:get(sname, Opts, "msggen_" ++ os:getpid()),
            {ok, _} = net_kernel:start([list_to_atom(Name), shortnames]);
        _ ->
            ok
    end,
    case maps:find(cookie, Opts) of
        {ok, C} -> erlang:set_cookie(node(), list_to_atom(C));
        error -> ok
    end.

%% Command line to {run | once | help, Opts}; throws {bad_arg, Text}.
-spec parse_args([string()]) -> {run | once | help, map()}.
parse_args(Args) ->
    {Mode, Opts} = parse_args(Args, {run, #{}}),
    NeedsNode = Mode =:= once orelse maps:get(via, Opts, direct) =:= direct,
    case Mode =/= help andalso NeedsNode andalso not maps:is_key(node, Opts) of
        true -> throw({bad_arg, "--node is required"});
        false -> {Mode, Opts}
    end.

parse_args([], Acc) ->
    Acc;
parse_args([H | T], {_, Opts}) when H =:= "-h"; H =:= "--help" ->
    parse_args(T, {help, Opts});
parse_args(["--once" | T], {_, Opts}) ->
    parse_args(T, {once, Opts});
parse_args(["--broadcast" | T], {_, Opts}) ->
    parse_args(T, {once, Opts#{broadcast => true}});
parse_args(["--seq" | T], {Mode, Opts}) ->
    parse_args(T, {Mode, Opts#{seq => true}});
parse_args(["--sync" | T], {Mode, Opts}) ->
    parse_args(T, {Mode, Opts#{sync => true}});
parse_args([Flag, Value | T], {Mode, Opts}) ->
    parse_args(T, {Mode, option(Flag, Value, Opts)});
parse_args([Flag], _) ->
    throw({bad_arg, "missing value or unknown option " ++ Flag}).

option("--node", V, O) -> O#{node => list_to_atom(V)};
option("--count", V, O) -> O#{count => int(V, 0, "--count")};
option("--rate", "max", O) -> O#{rate => max};
option("--rate", V, O) -> O#{rate => positive_number(V, "--rate")};
option("--uids", V, O) ->
    case string:split(V, "-") of
        [A, B] ->
            First = int(A, 1, "--uids"),
            Last = int(B, First, "--uids"),
            O#{uids => {First, Last}};
        [A] ->
            U = int(A, 1, "--uids"),
            O#{uids => {U, U}}
    end;
option("--order", "random", O) -> O#{order => random};
option("--order", "sequential", O) -> O#{order => sequential};
option("--topics", V, O) ->
    case string:split(V, "-") of
        [A, B] ->
            First = int(A, 0, "--topics"),
            O#{topics => {First, int(B, First, "--topics")}};
        [A] ->
            T = int(A, 0, "--topics"),
            O#{topics => {T, T}}
    end;
option("--topic", V, O) -> O#{topic => list_to_binary(V)};
option("--multicast", V, O) -> O#{multicast => int(V, 1, "--multicast")};
option("--pad", V, O) -> O#{pad => int(V, 0, "--pad")};
option("--procs", V, O) -> O#{procs => int(V, 1, "--procs")};
option("--via", "direct", O) -> O#{via => direct};
option("--via", "router", O) -> O#{via => router};
option("--via", "app", O) -> O#{via => app};
option("--sname", V, O) -> O#{sname => V};
option("--cookie", V, O) -> O#{cookie => V};
option(Flag, V, _) -> throw({bad_arg, "bad option " ++ Flag ++ " " ++ V}).

int(S, Min, Flag) ->
    case string:to_integer(S) of
        {N, ""} when is_integer(N), N >= Min -> N;
        _ -> throw({bad_arg, "bad " ++ Flag ++ " " ++ S})
    end.

positive_number(S, Flag) ->
    N = case string:to_float(S) of
            {F, ""} -> F;
            _ -> case string:to_integer(S) of
                     {I, ""} -> I;
                     _ -> error
                 end
        end,
    case is_number(N) andalso N > 0 of
        true -> N;
        false -> throw({bad_arg, "bad " ++ Flag ++ " " ++ S})
    end.

%% A flat map with atom keys and number/atom/binary values as one JSON object.
-spec to_json(map()) -> iolist().
to_json(Map) ->
    Fields = [[$", atom_to_list(K), "\":", json_value(V)]
              || {K, V} <- lists:sort(maps:to_list(Map))],
    [${, lists:join($,, Fields), $}].

json_value(V) when is_integer(V) -> integer_to_list(V);
json_value(V) when is_float(V) -> float_to_list(V, [{decimals, 1}]);
json_value(true) -> "true";
json_value(false) -> "false";
json_value(V) when is_atom(V) -> [$", atom_to_list(V), $"];
json_value(V) when is_binary(V) -> [$", V, $"].
