%% SPDX-License-Identifier: Apache-2.0
%% The Erlang side of scripts/bench-cluster.sh (compiled by it into its work
%% directory; not part of the application).
%%
%% On a master:  erl -sname M ... -eval 'benchcl:master()' -extra
%%                   --masters M1,M2 [--cnodes C1,C2,C3 --expect N]
%%   starts the httpdcnode application with env `masters' and prints JSON
%%   lines: {"event":"started",...} once it runs; with --expect, also
%%   {"event":"full",...}: the ms from the VM's start until every C-node of
%%   --cnodes was connected (links) and until presence held N (uid, node)
%%   pairs (full). Then it idles until it is killed.
%% From a driver: erl -sname D ... -eval 'benchcl:cli()' -extra CMD ARGS
%%   sends M COUNT FIRST LAST       httpdcnode:send/2 from one process on M
%%   multicast M FIRST LAST REPS    httpdcnode:multicast_sync/3, REPS times
%%   wait_count M1,M2 WANT MS       until presence holds WANT pairs on each
%%   wait_node M1,M2 NODE WANT MS   on each master: until NODE's uids left
%%                                  presence, then until all WANT are back
%%   prints one JSON line per answer and halts (status 1 on an error).
%% Times are os:system_time(millisecond), comparable with `date +%s%3N'.
-module(benchcl).

-export([master/0, cli/0]).
-export([sends/3, multicast/3, wait_count/2, wait_node/3]).

-define(BY_NODE, httpdcnode_presence_by_node).
-define(POLL_MS, 2).

%%% ------------------------------------------------------------ master ----

master() ->
    T0 = now_ms(),
    Opts = opts(init:get_plain_arguments(), #{}),
    Masters = [list_to_atom(M) || M <- split(maps:get("--masters", Opts))],
    ok = application:load(httpdcnode),
    ok = application:set_env(httpdcnode, masters, Masters),
    ok = httpdcnode:start(),
    line(#{event => started, vm_ms => T0, app_ms => now_ms()}),
    case Opts of
        #{"--expect" := N, "--cnodes" := Cs} ->
            watch([list_to_atom(C) || C <- split(Cs)], list_to_integer(N), T0,
                  undefined, T0 + 120000);
        _ -> ok
    end,
    receive after infinity -> ok end.

%% Polls (every POLL_MS) until presence holds N pairs, noting when the last
%% C-node's link came up.
watch(CNodes, N, T0, Links, Deadline) ->
    Now = now_ms(),
    Links1 = case Links =:= undefined andalso CNodes -- erlang:nodes(hidden) =:= [] of
                 true -> Now;
                 false -> Links
             end,
    Count = httpdcnode_presence:count(),
    if
        Count >= N, Links1 =/= undefined ->
            line(#{event => full, vm_ms => T0, links_ms => Links1, full_ms => Now, count => Count});
        Now > Deadline ->
            line(#{event => timeout, vm_ms => T0, count => Count});
        true ->
            timer:sleep(?POLL_MS),
            watch(CNodes, N, T0, Links1, Deadline)
    end.

%%% ------------------------------------------ run on a master by erpc ----

%% COUNT httpdcnode:send/2 calls from this one process, uids FIRST..LAST in
%% turn, each payload "t=<ns>;" (the clients' latency); then stats/0, whose
%% requests each C-node answers after every message before them; then until
%% the C-nodes' deliveries grew by COUNT.
sends(Count, First, Last) ->
    D0 = deliveries(),
    T0 = erlang:monotonic_time(microsecond),
    send_loop(Count, First, Last, First),
    T1 = erlang:monotonic_time(microsecond),
    _ = httpdcnode:stats(30000),
    T2 = erlang:monotonic_time(microsecond),
    Done = until(fun() -> deliveries() - D0 >= Count end, 20, 60000),
    T3 = erlang:monotonic_time(microsecond),
    #{sent => Count, send_us => T1 - T0, synced_us => T2 - T0,
      delivered_us => case Done of true -> T3 - T0; false -> -1 end,
      delivered => deliveries() - D0}.

send_loop(0, _First, _Last, _U) ->
    ok;
send_loop(K, First, Last, U) ->
    ok = httpdcnode:send(U, <<"t=", (integer_to_binary(os:system_time(nanosecond)))/binary, ";">>),
    send_loop(K - 1, First, Last, case U of Last -> First; _ -> U + 1 end).

%% Deliveries of every C-node presence knows, summed.
deliveries() ->
    lists:sum([maps:get(deliveries, S, maps:get(<<"deliveries">>, S, 0))
               || {N, S} <- maps:to_list(httpdcnode:stats(10000)), N =/= app, is_map(S)]).

%% REPS acknowledged multicasts to FIRST..LAST, one after the other: the time
%% to each reply and the connections it reports written.
multicast(First, Last, Reps) ->
    Uids = lists:seq(First, Last),
    Runs = [begin
                T0 = erlang:monotonic_time(microsecond),
                {ok, N} = httpdcnode:multicast_sync(Uids, <<"t=", (integer_to_binary(
                                                                os:system_time(nanosecond)))/binary,
                                                            ";mc">>, 30000),
                {erlang:monotonic_time(microsecond) - T0, N}
            end || _ <- lists:seq(1, Reps)],
    #{us => [U || {U, _} <- Runs], conns => [N || {_, N} <- Runs], uids => length(Uids)}.

wait_count(Want, Ms) ->
    Ok = until(fun() -> httpdcnode_presence:count() =:= Want end, ?POLL_MS, Ms),
    #{ok => Ok, count => httpdcnode_presence:count(), at_ms => now_ms()}.

%% Until Node has fewer than Want uids here (it went down), then until it has
%% Want again: the system time of each.
wait_node(Node, Want, Ms) ->
    End = now_ms() + Ms,
    N = fun() -> ets:select_count(?BY_NODE, [{{{Node, '_'}}, [], [true]}]) end,
    Gone = until(fun() -> N() < Want end, ?POLL_MS, Ms),
    TGone = now_ms(),
    Back = Gone andalso until(fun() -> N() =:= Want end, ?POLL_MS, max(1, End - now_ms())),
    #{ok => Back, gone_ms => TGone, back_ms => now_ms(), count => N()}.

until(F, Every, Ms) ->
    until_1(F, Every, now_ms() + Ms).

until_1(F, Every, End) ->
    case F() of
        true -> true;
        false ->
            case now_ms() > End of
                true -> false;
                false -> timer:sleep(Every), until_1(F, Every, End)
            end
    end.

%%% ------------------------------------------------------------ driver ----

cli() ->
    Code = try run(init:get_plain_arguments()) of
               ok -> 0
           catch
               C:R:St ->
                   io:format(standard_error, "benchcl: ~p:~p ~p~n", [C, R, St]),
                   1
           end,
    halt(Code).

run(["sends", M, Count, First, Last]) ->
    line(call(M, sends, [int(Count), int(First), int(Last)], 300000));
run(["multicast", M, First, Last, Reps]) ->
    line(call(M, multicast, [int(First), int(Last), int(Reps)], 300000));
run(["wait_count", Ms, Want, Timeout]) ->
    each(Ms, wait_count, [int(Want), int(Timeout)], int(Timeout) + 10000);
run(["wait_node", Ms, Node, Want, Timeout]) ->
    each(Ms, wait_node, [list_to_atom(Node), int(Want), int(Timeout)], int(Timeout) + 10000).

%% The same call on every master of the comma list, at once; one line each.
each(Ms, F, Args, Timeout) ->
    Masters = split(Ms),
    [true = net_kernel:connect_node(list_to_atom(M)) || M <- Masters],
    Reqs = [{M, erpc:send_request(list_to_atom(M), ?MODULE, F, Args)} || M <- Masters],
    line(#{event => ready}),
    [line((erpc:receive_response(R, Timeout))#{master => list_to_atom(M)}) || {M, R} <- Reqs],
    ok.

call(M, F, Args, Timeout) ->
    Node = list_to_atom(M),
    true = net_kernel:connect_node(Node),
    erpc:call(Node, ?MODULE, F, Args, Timeout).

%%% ------------------------------------------------------------- bits ----

opts([K, V | T], Acc) -> opts(T, Acc#{K => V});
opts(_, Acc) -> Acc.

split(S) -> string:lexemes(S, ",").

int(S) -> list_to_integer(S).

now_ms() -> os:system_time(millisecond).

%% One flat JSON line on stdout (numbers, atoms, lists of numbers).
line(Map) ->
    Fields = [io_lib:format("\"~s\":~s", [K, json(V)]) || {K, V} <- lists:sort(maps:to_list(Map))],
    io:format("{~s}~n", [lists:join(",", Fields)]),
    ok.

json(V) when is_integer(V) -> integer_to_list(V);
json(V) when is_float(V) -> float_to_list(V, [{decimals, 3}]);
json(true) -> "true";
json(false) -> "false";
json(V) when is_atom(V) -> [$", atom_to_list(V), $"];
json(V) when is_list(V) -> ["[", lists:join(",", [json(X) || X <- V]), "]"].
