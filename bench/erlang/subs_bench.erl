%% SPDX-License-Identifier: Apache-2.0
%% The subscription table at scale: bulk load, memory, reads, and the merge
%% after a partition between two masters.
%%
%%   erl -sname subsbench -noshell -pa tools/erlang/ebin -eval 'subs_bench:cli()' \
%%       -extra [--users 500000] [--m 10] [--masters 2] [--reads 200000] \
%%              [--store mnesia|ets] [--cut 1000] [--settle 0] [--ebin DIR]
%%
%% Starts --masters master nodes of its own (peer, on this host), each with
%% the httpdcnode application (env masters = all of them), from this ebin or
%% --ebin DIR (an older build of the application, to compare). Writes a
%% friends graph of --users users, --m edges each (httpdcnode_friends_graph; 2 rows an
%% edge: --users 500000 --m 10 is 10 M rows) once in build/subs-bench, then
%% on master 1:
%% - load: httpdcnode_friends_loader:load/1, rows a second; with two masters also the
%%   time until the second has every row;
%% - memory: ETS bytes on master 1 after the load, a row;
%% - reads: get_subscribers/1 of random users, one process, a second;
%% - cut (mnesia, two masters, --cut K > 0): --settle s after the load, cuts
%%   the masters from each other (a cookie of their own for each other),
%%   adds K new pairs and removes K loaded ones on each side, lets them
%%   back, and times until the merge is done; then counts the subscribees
%%   touched whose subscribers still differ, and the difference of the
%%   row counts (both 0 when the merge is right).
%% --store ets runs the other design for comparison: the rows in plain ETS
%% tables on each master (a set of pairs with their clock and a bag
%% subscribee -> subscriber), each batch sent to the other masters as one
%% message, as a replicated store of one's own would (no merge: load, memory
%% and reads only).
%% Prints one JSON object.
-module(subs_bench).

-export([cli/0, run/1]).
%% On the masters.
-export([load/2, ets_start/1, ets_apply/1, reads/3, ets_count/0]).

-define(CALL, infinity).

cli() ->
    Opts = parse(init:get_plain_arguments(),
                 #{users => 500000, m => 10, masters => 2, reads => 200000, store => mnesia,
                   cut => 1000, settle => 0, ebin => undefined}),
    io:format("~s~n", [json(run(Opts))]),
    halt(0).

parse([], O) -> O;
parse(["--store", S | T], O) -> parse(T, O#{store => list_to_atom(S)});
parse(["--ebin", D | T], O) -> parse(T, O#{ebin => D});
parse(["--" ++ K, V | T], O) ->
    Key = list_to_atom(K),
    is_map_key(Key, O) orelse error({unknown_option, K}),
    parse(T, O#{Key => list_to_integer(V)}).

run(#{users := Users, m := M, masters := NM, reads := Reads, store := Store} = O) ->
    File = graph(Users, M),
    Ebin = case maps:get(ebin, O) of
               undefined -> filename:dirname(code:which(?MODULE));
               D -> D
           end,
    Peers = [start_peer(I, Ebin) || I <- lists:seq(1, NM)],
    Masters = [N || {_, N} <- Peers],
    try
        [start_app(N, Masters, Store) || N <- Masters],
        [M1 | Others] = Masters,
        Ets0 = call(M1, erlang, memory, [ets]),
        {LoadUs, {ok, Edges}} = call(M1, timer, tc, [?MODULE, load, [Store, File]]),
        Rows = 2 * Edges,
        T0 = erlang:monotonic_time(millisecond),
        [wait(fun() -> count(N, Store) >= Rows end, 3600000) || N <- Others],
        ReplMs = erlang:monotonic_time(millisecond) - T0 + LoadUs div 1000,
        Ets1 = call(M1, erlang, memory, [ets]),
        ReadUs = call(M1, ?MODULE, reads, [Store, Users, Reads]),
        R = #{store => Store, users => Users, rows => Rows, masters => NM,
              load_s => LoadUs / 1.0e6, load_rows_per_s => round(Rows / (LoadUs / 1.0e6)),
              all_masters_loaded_s => ReplMs / 1000,
              ets_bytes_per_row => round((Ets1 - Ets0) / Rows),
              reads => Reads, reads_per_s => round(Reads / (ReadUs / 1.0e6))},
        case {Store, Others, maps:get(cut, O)} of
            {mnesia, [M2], K} when K > 0 -> maps:merge(R, cut(M1, M2, Users, K, O));
            _ -> R
        end
    after
        [peer:stop(P) || {P, _} <- Peers]
    end.

load(mnesia, File) -> httpdcnode_friends_loader:load(File);
load(ets, File) -> httpdcnode_friends_loader:load(File, #{add => fun ets_add/1}).

graph(Users, M) ->
    Dir = filename:join(["build", "subs-bench"]),
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    File = filename:absname(filename:join(Dir, io_lib:format("friends-~b-~b.txt", [Users, M]))),
    filelib:is_file(File) orelse ({ok, _} = httpdcnode_friends_graph:write(File, Users, M, 42)),
    File.

%% The application from Ebin alone; this module loaded from here.
start_peer(I, Ebin) ->
    Name = list_to_atom("subsbench" ++ integer_to_list(I) ++ "_" ++ os:getpid()),
    {ok, P, N} = peer:start(#{name => Name, connection => standard_io,
                              args => ["-setcookie", atom_to_list(erlang:get_cookie()),
                                       "-pa", Ebin]}),
    {?MODULE, Bin, File} = code:get_object_code(?MODULE),
    {module, ?MODULE} = erpc:call(N, code, load_binary, [?MODULE, File, Bin]),
    {P, N}.

start_app(N, Masters, mnesia) ->
    ok = call(N, application, load, [httpdcnode]),
    ok = call(N, application, set_env, [httpdcnode, masters, Masters]),
    {ok, _} = call(N, application, ensure_all_started, [httpdcnode]),
    ok;
start_app(N, Masters, ets) ->
    ok = call(N, ?MODULE, ets_start, [Masters]).

call(N, M, F, A) ->
    try erpc:call(N, M, F, A, ?CALL)
    catch error:{erpc, noconnection} -> timer:sleep(50), call(N, M, F, A)
    end.

count(N, mnesia) -> call(N, httpdcnode_subs, count, []);
count(N, ets) -> call(N, ?MODULE, ets_count, []).

wait(F, Ms) ->
    Deadline = erlang:monotonic_time(millisecond) + Ms,
    wait_loop(F, Deadline).

wait_loop(F, Deadline) ->
    case F() of
        true -> ok;
        false ->
            erlang:monotonic_time(millisecond) < Deadline orelse error(wait_timeout),
            timer:sleep(20),
            wait_loop(F, Deadline)
    end.

%% Reads of random users on this master: the µs they took.
reads(Store, Users, N) ->
    rand:seed(exsss, {1, 2, 3}),
    Ids = [rand:uniform(Users) || _ <- lists:seq(1, N)],
    Read = case Store of
               mnesia -> fun httpdcnode_subs:get_subscribers/1;
               ets -> fun ets_subscribers/1
           end,
    {Us, _} = timer:tc(fun() -> lists:foreach(Read, Ids) end),
    Us.

%%% ------------------------------------------------------------------
%%% The cut
%%% ------------------------------------------------------------------

cut(M1, M2, Users, K, #{settle := Settle}) ->
    timer:sleep(Settle * 1000),
    Cookie = erlang:get_cookie(),
    set_cookies(M1, M2, fun() -> list_to_atom("cut" ++ integer_to_list(rand:uniform(1 bsl 30)))
                        end),
    wait(fun() ->
                 _ = call(M1, erlang, disconnect_node, [M2]),
                 not lists:member(M2, call(M1, mnesia, system_info, [running_db_nodes]))
                     andalso not lists:member(M1, call(M2, mnesia, system_info, [running_db_nodes]))
         end, 60000),
    %% new pairs above the graph's users; removals of loaded rows
    Add = fun(Base) -> [{subscription, Users + Base + I, I} || I <- lists:seq(1, K)] end,
    Loaded = fun(N, From) -> loaded(N, From, Users, K, []) end,
    Rm1 = Loaded(M1, 1), Rm2 = Loaded(M2, Users div 2),
    ok = call(M1, httpdcnode_subs, add_subscriptions, [Add(0)]),
    ok = call(M2, httpdcnode_subs, add_subscriptions, [Add(K)]),
    ok = call(M1, httpdcnode_subs, remove_subscriptions, [Rm1]),
    ok = call(M2, httpdcnode_subs, remove_subscriptions, [Rm2]),
    Touched = lists:usort([E || {_, _, E} <- Add(0) ++ Add(K) ++ Rm1 ++ Rm2]),
    Merges = fun() -> lists:sum([maps:get(subscription_merges, call(N, httpdcnode, app_stats, []))
                                 || N <- [M1, M2]])
             end,
    Merges0 = Merges(),
    set_cookies(M1, M2, fun() -> Cookie end),
    T0 = erlang:monotonic_time(millisecond),
    %% converged when the merge is done (its writes are synchronous); the
    %% copies are compared after, untimed (reads are slow at this size)
    wait(fun() -> Merges() > Merges0 end, 3600000),
    Conv = erlang:monotonic_time(millisecond) - T0,
    Differ = [E || E <- Touched, lists:sort(call(M1, httpdcnode_subs, get_subscribers, [E])) =/=
                                     lists:sort(call(M2, httpdcnode_subs, get_subscribers, [E]))],
    Pairs = lists:sum([maps:get(subscription_merged_pairs, call(N, httpdcnode, app_stats, []))
                       || N <- [M1, M2]]),
    #{cut_changes_per_side => 2 * K, settle_s => Settle, converged_ms => Conv,
      merged_pairs => Pairs, subscribees_differing_after => length(Differ),
      rows_differing_after => call(M1, httpdcnode_subs, count, []) -
                                  call(M2, httpdcnode_subs, count, [])}.

%% K loaded rows of master N, of subscribees From and up.
loaded(_N, _E, _Users, K, Acc) when length(Acc) >= K -> lists:sublist(Acc, K);
loaded(N, E, Users, K, Acc) when E =< Users ->
    loaded(N, E + 1, Users, K,
           [{subscription, S, E} || S <- call(N, httpdcnode_subs, get_subscribers, [E])] ++ Acc).

set_cookies(M1, M2, Cookie) ->
    [true = call(A, erlang, set_cookie, [B, Cookie()]) || {A, B} <- [{M1, M2}, {M2, M1}]],
    ok.

%%% ------------------------------------------------------------------
%%% The ETS store, for comparison
%%% ------------------------------------------------------------------

%% A process owns the tables; httpdcnode_friends_loader's batches go to ets_add/1.
ets_start(Masters) ->
    Self = self(),
    spawn(fun() ->
                  register(subs_bench_ets, self()),
                  ets:new(subs_bench_pairs, [set, public, named_table, {write_concurrency, true}]),
                  ets:new(subs_bench_by_e, [bag, public, named_table, {write_concurrency, true}]),
                  persistent_term:put(subs_bench_peers, Masters -- [node()]),
                  Self ! ready,
                  receive stop -> ok end
          end),
    receive ready -> ok end.

%% One batch: here, then one message to each other master.
ets_add(Rows) ->
    Clock = erlang:system_time(microsecond),
    Batch = [{{S, E}, Clock} || {subscription, S, E} <- Rows],
    ets_apply(Batch),
    [erpc:cast(N, ?MODULE, ets_apply, [Batch]) || N <- persistent_term:get(subs_bench_peers)],
    ok.

ets_apply(Batch) ->
    ets:insert(subs_bench_pairs, Batch),
    ets:insert(subs_bench_by_e, [{E, S} || {{S, E}, _} <- Batch]),
    ok.

ets_count() -> ets:info(subs_bench_pairs, size).

ets_subscribers(E) -> [S || {_, S} <- ets:lookup(subs_bench_by_e, E)].

%%% ------------------------------------------------------------------

json(M) ->
    ["{", lists:join(", ", [io_lib:format("\"~s\": ~s", [K, val(V)])
                            || {K, V} <- lists:sort(maps:to_list(M))]), "}"].

val(V) when is_integer(V) -> integer_to_list(V);
val(V) when is_float(V) -> io_lib:format("~.3f", [V]);
val(V) when is_atom(V) -> io_lib:format("\"~s\"", [V]).
