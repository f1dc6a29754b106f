%% SPDX-License-Identifier: Apache-2.0
%% The Erlang side of `make bench-million' (scripts/bench-million.sh).
%%
%% On the master (started with -eval 'million:master_cli()' -extra FILE
%% [TOPIC]): the httpdcnode application, and a sampler that appends "WallMs
%% Count" to FILE every 50 ms, Count being httpdcnode_presence:count() (the
%% (uid, node) pairs the master knows), so that the script can tell to 50 ms
%% when the master knew every uid, and when it did again after a C-node came
%% back; with TOPIC, "WallMs Count TopicCount", TopicCount being
%% httpdcnode:topic_count(TOPIC) (its streams, as the topic presence told).
%%
%% From a one-shot node (-eval 'million:cli()' -extra CMD --master M ...),
%% each command runs on the master through rpc and prints one JSON line:
%%   paced --rate R --seconds S --uids N --per-node P [--stamp 1]
%%       httpdcnode:send/2 to random uids 1..N, R a second for S s, paced by
%%       a 1 ms clock; with --stamp the payload starts "t=<ns since the
%%       epoch>;" (the load client's latency stamp). Prints sent and, per
%%       C-node index (uid - 1) div P, how many went to it (per_node).
%%   multicast --count K --uids N
%%       httpdcnode:multicast_sync/3 to K distinct random uids of 1..N: the
%%       wall-clock ms just before the call (t0_ms), the reply time and the
%%       connections written to.
%%   broadcast
%%       httpdcnode:broadcast/1: t0_ms, the wall-clock ms before the call.
%%   uids --uids N
%%       keeps the list of uids 1..N on the master (persistent_term), made
%%       once, for multicast_all.
%%   publish --topic T
%%       httpdcnode:publish/2 to T: t0_ms; call_us, the call's own time on
%%       the master; cpu_us, the master's CPU over the call (its threads'
%%       /proc/self/task/*/schedstat just before and just after it: see
%%       cpu_ns/0; reading them costs some, and varies); busy_us, its
%%       schedulers' busy time over the call (scheduler_wall_time: finer);
%%       reductions, the calling process's.
%%   multicast_all
%%       httpdcnode:multicast/2 to the uids kept by uids (made before the
%%       clock starts): the same figures, and uids.
%%   noop
%%       nothing, measured the same way: the baseline of the two above (what
%%       reading the CPU costs, and what the master did meanwhile anyway).
%% Their payloads other than paced's stamped ones carry no stamp: the
%% clients' latency figures are the stamped phase's alone.
-module(million).

-export([master_cli/0, cli/0]).
-export([paced/5, multicast/2, broadcast/0, keep_uids/1, publish/1, multicast_all/0, noop/0,
         sample_loop/3]).

-define(SAMPLE_MS, 50).

%%% ------------------------------------------------------------ master ----

master_cli() ->
    [File | Topic] = init:get_plain_arguments(),
    {ok, _} = application:ensure_all_started(httpdcnode),
    %% Not linked to the -eval process, which ends here; a raw file is
    %% the opening process's own.
    Pid = spawn(fun() ->
                        {ok, F} = file:open(File, [write, raw]),
                        sample_loop(F, [list_to_binary(T) || T <- Topic], -1)
                end),
    register(million_sampler, Pid),
    io:format("million master up~n").

%% Writes a line when the counts changed, and at least once a second.
sample_loop(F, Topic, Last) ->
    N = [httpdcnode_presence:count() | [httpdcnode:topic_count(T) || T <- Topic]],
    Now = os:system_time(millisecond),
    Next = case N =/= Last orelse Now rem 1000 < ?SAMPLE_MS of
               true ->
                   ok = file:write(F, [integer_to_list(Now),
                                       [[$\s, integer_to_list(C)] || C <- N], $\n]),
                   N;
               false ->
                   Last
           end,
    timer:sleep(?SAMPLE_MS),
    sample_loop(F, Topic, Next).

%%% -------------------------------------------------------------- phases ----

%% Rate msg/s to random uids 1..NUids for Seconds; Stamp: payloads stamped.
paced(Rate, Seconds, NUids, PerNode, Stamp) ->
    NNodes = (NUids + PerNode - 1) div PerNode,
    C = counters:new(NNodes, []),
    Total = round(Rate * Seconds),
    T0 = erlang:monotonic_time(microsecond),
    Sent = pace(T0, Rate, Total, 0, NUids, PerNode, Stamp, C),
    #{sent => Sent, elapsed_us => erlang:monotonic_time(microsecond) - T0,
      per_node => [counters:get(C, I) || I <- lists:seq(1, NNodes)]}.

pace(_T0, _Rate, Total, Sent, _N, _P, _Stamp, _C) when Sent >= Total ->
    Sent;
pace(T0, Rate, Total, Sent, N, P, Stamp, C) ->
    Due = min(Total, (erlang:monotonic_time(microsecond) - T0) * Rate div 1000000),
    send_n(Due - Sent, N, P, Stamp, C),
    %% 1 ms ticks: at 20,000 msg/s, 20 messages each.
    receive after 1 -> ok end,
    pace(T0, Rate, Total, max(Sent, Due), N, P, Stamp, C).

send_n(K, _N, _P, _Stamp, _C) when K =< 0 ->
    ok;
send_n(K, N, P, Stamp, C) ->
    Uid = rand:uniform(N),
    ok = httpdcnode:send(Uid, payload(Stamp)),
    counters:add(C, (Uid - 1) div P + 1, 1),
    send_n(K - 1, N, P, Stamp, C).

payload(true) ->
    <<"t=", (integer_to_binary(os:system_time(nanosecond)))/binary, ";paced">>;
payload(false) ->
    <<"paced">>.

%% K distinct random uids of 1..NUids, acknowledged.
multicast(K, NUids) ->
    Uids = distinct(K, NUids, #{}),
    T0 = os:system_time(millisecond),
    M0 = erlang:monotonic_time(microsecond),
    {ok, Written} = httpdcnode:multicast_sync(Uids, <<"multicast">>, 60000),
    #{t0_ms => T0, reply_us => erlang:monotonic_time(microsecond) - M0,
      uids => K, written => Written}.

distinct(K, _N, Acc) when map_size(Acc) >= K ->
    maps:keys(Acc);
distinct(K, N, Acc) ->
    distinct(K, N, Acc#{rand:uniform(N) => true}).

broadcast() ->
    T0 = os:system_time(millisecond),
    ok = httpdcnode:broadcast(<<"broadcast">>),
    #{t0_ms => T0}.

%% The uids of multicast_all, kept where reading them copies nothing.
keep_uids(N) ->
    persistent_term:put({?MODULE, uids}, {N, lists:seq(1, N)}),
    cpu_tasks(),
    #{uids => N}.

publish(Topic) ->
    timed(fun() -> httpdcnode:publish(Topic, <<"topic">>) end).

multicast_all() ->
    {N, Uids} = persistent_term:get({?MODULE, uids}),
    maps:put(uids, N, timed(fun() -> httpdcnode:multicast(Uids, <<"multicast">>) end)).

noop() ->
    timed(fun() -> ok end).

timed(Call) ->
    %% On while this process lives.
    erlang:system_flag(scheduler_wall_time, true),
    T0 = os:system_time(millisecond),
    C0 = cpu_ns(),
    S0 = erlang:statistics(scheduler_wall_time_all),
    {reductions, R0} = process_info(self(), reductions),
    M0 = erlang:monotonic_time(microsecond),
    {Us, ok} = timer:tc(Call),
    {reductions, R1} = process_info(self(), reductions),
    S1 = erlang:statistics(scheduler_wall_time_all),
    Wall = erlang:monotonic_time(microsecond) - M0,
    C1 = cpu_ns(),
    #{t0_ms => T0, call_us => Us, cpu_us => (C1 - C0) div 1000, reductions => R1 - R0,
      busy_us => round(busy(S0, S1) * Wall)}.

%% The schedulers (dirty ones too) busy between two samples, as a number of
%% schedulers: each one's active share of its time, added up (their unit is
%% not given; their ratio is).
busy(S0, S1) ->
    lists:sum([case lists:keyfind(I, 1, S0) of
                   {I, A0, T0} when T1 > T0 -> (A1 - A0) / (T1 - T0);
                   _ -> 0
               end || {I, A1, T1} <- S1]).

%% This node's CPU so far, in ns (the first field of a thread's schedstat:
%% its time on a CPU), all its threads but the dirty I/O schedulers': those
%% read the files here (a publish or a multicast does no file I/O), and so
%% what the reading costs stays out of the figure.
cpu_ns() ->
    lists:sum([task_ns(T) || T <- cpu_tasks()]).

cpu_tasks() ->
    case persistent_term:get({?MODULE, cpu_tasks}, none) of
        none ->
            {ok, All} = file:list_dir("/proc/self/task"),
            Tasks = [T || T <- All, not dirty_io(T)],
            persistent_term:put({?MODULE, cpu_tasks}, Tasks),
            Tasks;
        Tasks ->
            Tasks
    end.

dirty_io(T) ->
    case file:read_file(["/proc/self/task/", T, "/comm"]) of
        {ok, Comm} -> binary:match(Comm, <<"dirty_io">>) =/= nomatch;
        {error, _} -> true
    end.

task_ns(T) ->
    {ok, B} = prim_file:read_file(["/proc/self/task/", T, "/schedstat"]),
    binary_to_integer(hd(binary:split(B, <<" ">>))).

%%% ----------------------------------------------------------------- CLI ----

cli() ->
    Code = try
               [Cmd | Args] = init:get_plain_arguments(),
               Opts = opts(Args, #{}),
               Master = list_to_atom(maps:get("master", Opts)),
               true = net_kernel:connect_node(Master),
               R = run(Cmd, Opts, Master),
               io:format("~s~n", [json(R)]),
               0
           catch
               Class:Reason:St ->
                   io:format(standard_error, "million: ~p:~p ~p~n", [Class, Reason, St]),
                   1
           end,
    halt(Code).

run("paced", O, M) ->
    call(M, paced, [int(O, "rate"), int(O, "seconds"), int(O, "uids"), int(O, "per-node"),
                    maps:get("stamp", O, "0") =:= "1"]);
run("multicast", O, M) ->
    call(M, multicast, [int(O, "count"), int(O, "uids")]);
run("broadcast", _O, M) ->
    call(M, broadcast, []);
run("uids", O, M) ->
    call(M, keep_uids, [int(O, "uids")]);
run("publish", O, M) ->
    call(M, publish, [list_to_binary(maps:get("topic", O))]);
run("multicast_all", _O, M) ->
    call(M, multicast_all, []);
run("noop", _O, M) ->
    call(M, noop, []).

call(M, F, A) ->
    case rpc:call(M, ?MODULE, F, A, infinity) of
        {badrpc, Why} -> erlang:error({badrpc, Why});
        R -> R
    end.

opts(["--" ++ K, V | Rest], Acc) -> opts(Rest, Acc#{K => V});
opts([], Acc) -> Acc.

int(O, K) -> list_to_integer(maps:get(K, O)).

json(M) ->
    Fields = [[$", atom_to_list(K), "\":", value(V)] || {K, V} <- lists:sort(maps:to_list(M))],
    ["{", lists:join(",", Fields), "}"].

value(L) when is_list(L) -> ["[", lists:join(",", [integer_to_list(I) || I <- L]), "]"];
value(I) when is_integer(I) -> integer_to_list(I).
