%% SPDX-License-Identifier: Apache-2.0
%% Merges the subscription copies of masters that were cut from each other.
%%
%% mnesia keeps running on each side of a partition, each side taking
%% writes; when the sides meet again it reports {inconsistent_database, _,
%% Node} and leaves them apart for good. This server, on every master:
%%
%% - reconnects to the masters of env `masters' it is not connected to,
%%   every second (C-nodes are hidden: nothing else would link the masters
%%   again after a partition);
%% - when masters it is connected to run mnesia apart from it, merges all
%%   the sides at once, under the global lock that orders table creation:
%%   holds the writes on every master of every side
%%   (httpdcnode_subs:close_gate/1); compares the copies' pairs changed since
%%   the partition began (or digests of them, when they are many); joins
%%   the sides with mnesia_controller:connect_nodes/1 (the call Ulf Wiger's
%%   unsplit makes: it leaves each copy as it was, and joins every side it
%%   reaches); then writes each pair's winner (httpdcnode_subs:merge_pair/1)
%%   to every copy;
%% - removes the tombstones older than env subscription_tombstone_ttl,
%%   but none while a master with a copy is apart: its side may still hold
%%   the rows they removed, and the merge needs them to tell a removal from
%%   an add the other side never saw.
%%
%% "Since the partition began": each master notes when mnesia on each
%% other master went down for it (mnesia_down), until they run together
%% again; the copies compare the pairs whose clock is at least the
%% earliest such time on any side, less the time a dead link takes to be noticed
%% (net_ticktime) and 10 s for what was in flight and for clocks that
%% differ. A master with no such note counts from its own start; one that
%% made its table alone (it started while it could reach no other master)
%% from the beginning: its copy may lack anything the others hold.
-module(httpdcnode_subs_heal).
-behaviour(gen_server).

-export([start_link/0, sweep/0, create_table/0, made_alone/0, bound/1, ready/0, alone/0,
         resubscribe/0]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).

-define(SERVER, ?MODULE).
%% The other masters are called by the names both this release and the one
%% before have (aliases here), so that masters of either release merge.
-define(PEER, subsmanager_heal).
-define(PEER_SUBS, subsmanager).
%% Node -> {Node, DownUs}: when mnesia on Node went down for this master,
%% until it is up again; {'$started', Us}; and {'$alone', true} while this
%% master's table, made here, has not met every other master's. Made by
%% httpdcnode_subs:ensure_table/0 or httpdcnode_sup, so that it outlives a
%% crash of this server.
-define(DOWN, subsmanager_heal_down).
-define(TICK_MS, 1000).
%% How long a merge may hold the writes (the gates open by themselves).
-define(GATE_MS, 30000).
-define(CALL_MS, 30000).
%% Margin for writes in flight when the link died, and clocks that differ.
-define(MARGIN_S, 10).
-define(TABLES, [subscription, subscription_tombstone]).
%% A copy sends its window itself up to so many rows and tombstones, else
%% a digest of so many buckets (8 MB; a bucket whose digests differ sends
%% all its pairs).
-define(WINDOW_CAP, 100000).
-define(BUCKETS, 1 bsl 20).

-record(state, {masters = [] :: [node()],
                connecting = #{} :: #{node() => pid()},
                failed = none :: term(),
                last_sweep :: integer()}).

start_link() ->
    gen_server:start_link({local, ?SERVER}, ?MODULE, [], []).

%% Removes the expired tombstones now: {expired, N}; {kept, Apart} while
%% masters with a copy are apart; not_first when another master sweeps.
-spec sweep() -> {expired, non_neg_integer()} | {kept, [node()]} | not_first.
sweep() ->
    gen_server:call(?SERVER, sweep, ?CALL_MS).

create_table() ->
    ets:whereis(?DOWN) =:= undefined andalso
        ets:new(?DOWN, [set, public, named_table]),
    ets:insert_new(?DOWN, {'$started', now_us()}),
    ok.

%% This master made its table while other masters are configured: until
%% it has met all of them, a merge compares the whole table.
made_alone() ->
    create_table(),
    ets:insert(?DOWN, {'$alone', true}),
    ok.

%% This master's bound for what the masters of All it does not run with
%% may lack: the earliest time one of them went down for it (its own start
%% for one it has no note of); none when it runs with all of them; 0 (all)
%% when its table was made here and it has not met every other master.
-spec bound([node()]) -> integer() | none.
bound(All) ->
    case {All -- mnesia:system_info(running_db_nodes), ets:lookup(?DOWN, '$alone')} of
        {[], _} -> none;
        {_, [_]} -> 0;
        {Apart, []} ->
            [{_, Started}] = ets:lookup(?DOWN, '$started'),
            lists:min([case ets:lookup(?DOWN, N) of
                           [{_, T}] -> T;
                           [] -> Started
                       end || N <- Apart])
    end.

%% mnesia was started again: its events come to this server again.
resubscribe() ->
    ets:delete(?DOWN, '$alone'),
    gen_server:cast(?SERVER, resubscribe).

%% Whether this master can take part in a merge: its tables are loaded and
%% this server runs.
-spec ready() -> boolean().
ready() ->
    whereis(?SERVER) =/= undefined andalso
        ?TABLES -- mnesia:system_info(local_tables) =:= [] andalso
        mnesia:wait_for_tables(?TABLES, 0) =:= ok.

init([]) ->
    create_table(),
    {ok, _} = mnesia:subscribe(system),
    Ttl = ttl_s(),
    Ttl * 1000000 < margin_us() andalso
        logger:warning("subsmanager: subscription_tombstone_ttl ~b s is shorter than the time a "
                       "partition between masters takes to be noticed and merged (~b s): a "
                       "removal made just before one may be lost on the other side",
                       [Ttl, margin_us() div 1000000]),
    self() ! tick,
    {ok, #state{masters = [N || N <- application:get_env(httpdcnode, masters, []), N =/= node()],
                last_sweep = now_ms()}}.

ttl_s() -> application:get_env(httpdcnode, subscription_tombstone_ttl, 86400).

handle_call(sweep, _From, S) ->
    {reply, do_sweep(), S};
handle_call(_Req, _From, S) ->
    {reply, {error, unknown_call}, S}.

handle_cast(resubscribe, S) ->
    {ok, _} = mnesia:subscribe(system),
    {noreply, S};
handle_cast(_Msg, S) ->
    {noreply, S}.

handle_info({mnesia_system_event, {mnesia_down, N}}, S) ->
    ets:insert_new(?DOWN, {N, now_us()}),
    {noreply, S};
handle_info({mnesia_system_event, {mnesia_up, N}}, S) ->
    %% a merge reads the notes before it joins the sides
    ets:delete(?DOWN, N),
    {noreply, S};
handle_info({mnesia_system_event, {inconsistent_database, _, _}}, S) ->
    {noreply, merge(S)};
handle_info({mnesia_system_event, _}, S) ->
    {noreply, S};
handle_info(tick, S = #state{masters = Ms}) ->
    erlang:send_after(?TICK_MS, self(), tick),
    Ms -- mnesia:system_info(running_db_nodes) =:= [] andalso ets:delete(?DOWN, '$alone'),
    {noreply, sweep(merge(reconnect(S)))};
handle_info({connected, N, Pid}, S = #state{connecting = C}) ->
    case C of
        #{N := Pid} -> {noreply, S#state{connecting = maps:remove(N, C)}};
        _ -> {noreply, S}
    end;
handle_info(_Info, S) ->
    {noreply, S}.

%% One attempt at a time per master: an attempt to a master behind a
%% silent partition waits net_setuptime (7 s).
reconnect(S = #state{masters = Ms, connecting = C}) ->
    Down = [M || M <- Ms, not lists:member(M, nodes()), not is_map_key(M, C)],
    Self = self(),
    S#state{connecting = maps:merge(C, maps:from_list(
                                         [{M, spawn(fun() ->
                                                            _ = net_kernel:connect_node(M),
                                                            Self ! {connected, M, self()}
                                                    end)} || M <- Down]))}.

%% Merges with the connected masters that run mnesia apart from this one.
merge(S = #state{masters = Ms, failed = Failed}) ->
    case apart(Ms) of
        [] -> S#state{failed = none};
        Apart ->
            T0 = now_ms(),
            Nodes = lists:usort([node() | [N || N <- Ms, lists:member(N, nodes())]]),
            case global:trans({{?PEER_SUBS, ensure_table}, self()},
                              fun() -> catch merge_locked(Ms) end, Nodes, 5) of
                {ok, Sides, Pairs, Compared} ->
                    httpdcnode_presence:count_event(subscription_merges, 1),
                    httpdcnode_presence:count_event(subscription_merged_pairs, Pairs),
                    logger:notice("subsmanager: merged the subscriptions of ~p after a "
                                  "partition: ~b pairs changed, ~b ms (~b comparing the "
                                  "copies)", [Sides, Pairs, now_ms() - T0, Compared]),
                    S#state{failed = none};
                nothing -> S#state{failed = none};
                Err ->
                    %% said once until it works; tried again each tick
                    Failed =:= Err orelse
                        logger:error("subsmanager: cannot merge the subscriptions of ~p with "
                                     "this master's: ~0p; retrying every ~b ms",
                                     [Apart, Err, ?TICK_MS]),
                    S#state{failed = Err}
            end
    end.

%% The connected masters, ready, that mnesia here does not run with.
apart(Ms) ->
    Running = mnesia:system_info(running_db_nodes),
    [M || M <- Ms, lists:member(M, nodes()), not lists:member(M, Running),
          (catch erpc:call(M, ?PEER, ready, [], ?CALL_MS)) =:= true].

merge_locked(Ms) ->
    case apart(Ms) of
        [] -> nothing;
        Apart ->
            %% every master of every side, each copy read: while links come
            %% and go, two masters may not agree on whom they run with
            All = lists:usort(lists:append([mnesia:system_info(running_db_nodes) |
                                            [erpc:call(M, mnesia, system_info, [running_db_nodes],
                                                       ?CALL_MS) || M <- Apart]])),
            Closed = close_gates(All, []),
            try
                T0 = now_ms(),
                Since = since(All, All),
                Before = collect(All, Since),
                Compared = now_ms() - T0,
                %% whatever it answers, what counts is whom mnesia here runs with
                Joined = mnesia_controller:connect_nodes(Apart),
                case mnesia:system_info(running_db_nodes) of
                    [_] -> give_up_alone(All, Before, Joined, Compared);
                    Running ->
                        %% the join may take in a master that came since: its
                        %% copy is still its own, read it too
                        Extra = Running -- All,
                        Closed2 = close_gates(Extra, []),
                        try
                            {Pairs, Copies} =
                                case Extra of
                                    [] -> Before;
                                    _ -> collect(All ++ Extra,
                                                 min(Since, since(Extra, All ++ Extra)))
                                end,
                            Count = httpdcnode_subs:apply_merge([{P, [maps:get(P, C) || C <- Copies]}
                                                             || P <- Pairs]),
                            {ok, (All ++ Extra) -- [node()], Count, Compared}
                        after
                            open_gates(Closed2)
                        end
                end
            after
                open_gates(Closed)
            end
    end.

%% The sides could not be joined. mnesia refuses a table made apart from
%% the copy the others know of (a RAM master restarted while it could
%% reach no other made its own): such a master gives its table up. The
%% winners go to the others' copy, and it joins them again, copying theirs.
give_up_alone(All, {Pairs, Copies}, Joined, Compared) ->
    case lists:partition(fun(N) -> erpc:call(N, ?PEER, alone, [], ?CALL_MS) end, All) of
        {[_ | _] = Alone, [Keep | _]} ->
            Count = erpc:call(Keep, ?PEER_SUBS, apply_merge,
                              [[{P, [maps:get(P, C) || C <- Copies]} || P <- Pairs]],
                              ?CALL_MS),
            [ok = erpc:call(N, ?PEER_SUBS, rejoin, [Keep], ?CALL_MS) || N <- Alone],
            {ok, All -- [node()], Count, Compared};
        _ -> {error, {connect_nodes, Joined}}
    end.

%% Whether this master's table was made here and can be given up (RAM:
%% what it holds goes to the others first).
-spec alone() -> boolean().
alone() ->
    ets:lookup(?DOWN, '$alone') =/= [] andalso
        mnesia:table_info(schema, storage_type) =:= ram_copies.

%% The earliest bound of the masters Nodes (on their copies, the pairs that
%% the others of All may lack), less the margin.
since(Nodes, All) ->
    case [B || B <- [erpc:call(N, ?PEER, bound, [All], ?CALL_MS) || N <- Nodes], B =/= none] of
        [] -> erlang:system_time(microsecond) - margin_us();
        Bounds -> lists:min(Bounds) - margin_us()
    end.

%% The pairs whose state differs between the copies of Nodes since Since,
%% and each copy's state of them: {Pairs, [#{Pair => State}]}. Each copy
%% sends its window (the rows and tombstones changed since) when it is
%% small, else a digest of it (hash buckets), and then the pairs of the
%% buckets where the digests differ: after a bulk load just before a
%% partition the windows hold millions of pairs, nearly all the same on
%% every copy. Each copy reads its table once, or twice for a digest.
collect(Nodes, Since) ->
    Windows = lists:zip(Nodes, on_all(Nodes, changed_window, [Since, ?WINDOW_CAP, ?BUCKETS])),
    Pairs = case [W || {_, {digest, _}} = W <- Windows] of
                [] ->
                    Sets = [maps:groups_from_list(fun({P, _}) -> P end, lists:sort(L))
                            || {_, {entries, L}} <- Windows],
                    [P || P <- lists:usort(lists:append([maps:keys(M) || M <- Sets])),
                          length(lists:usort([maps:get(P, M, none) || M <- Sets])) > 1];
                _ ->
                    Differ = differ([case W of
                                         {digest, D} -> D;
                                         {entries, L} -> httpdcnode_subs:digest(L, ?BUCKETS)
                                     end || {_, W} <- Windows]),
                    lists:usort(lists:append(
                                  [case W of
                                       {digest, _} ->
                                           erpc:call(N, ?PEER_SUBS, changed_in,
                                                     [Since, ?BUCKETS, Differ], ?CALL_MS);
                                       {entries, L} ->
                                           [P || {P, _} <- L,
                                                 is_map_key(erlang:phash2(P, ?BUCKETS), Differ)]
                                   end || {N, W} <- Windows]))
            end,
    {Pairs, [states(L) || L <- on_all(Nodes, pair_states, [Pairs])]}.

%% httpdcnode_subs:F(A...) on each of Nodes at once: the results in order.
on_all(Nodes, F, A) ->
    [case R of
         {ok, V} -> V;
         {Class, Reason} -> error({F, Class, Reason})
     end || R <- erpc:multicall(Nodes, ?PEER_SUBS, F, A, ?CALL_MS)].

%% The buckets where the digests (of one size) do not all agree:
%% #{Bucket => true}.
differ([D | Ds]) -> differ(D, Ds, 0, #{}).

differ(<<>>, _, _, Acc) -> Acc;
differ(<<W:64, Rest/binary>>, Others, I, Acc) ->
    Next = [{X, R} || <<X:64, R/binary>> <- Others],
    differ(Rest, [R || {_, R} <- Next], I + 1,
           case lists:all(fun({X, _}) -> X =:= W end, Next) of
               true -> Acc;
               false -> Acc#{I => true}
           end).

close_gates([], Closed) -> Closed;
close_gates([N | Ns], Closed) ->
    case erpc:call(N, ?PEER_SUBS, close_gate, [?GATE_MS], ?CALL_MS) of
        ok -> close_gates(Ns, [N | Closed]);
        Err ->
            open_gates(Closed),
            error({close_gate, N, Err})
    end.

open_gates(Nodes) ->
    [catch erpc:call(N, ?PEER_SUBS, open_gate, [], ?CALL_MS) || N <- Nodes],
    ok.

states(L) -> maps:from_list([{P, {Live, Tomb}} || {P, Live, Tomb} <- L]).

margin_us() ->
    Tick = case net_kernel:get_net_ticktime() of
               T when is_integer(T) -> T;
               {ongoing_change_to, T} -> T;
               ignored -> 60
           end,
    (Tick * 5 div 4 + ?MARGIN_S) * 1000000.

%% Every tenth of the TTL (between 0.1 s and a minute).
sweep(S = #state{last_sweep = Last}) ->
    Now = now_ms(),
    case Now - Last >= max(100, min(60000, ttl_s() * 100)) of
        false -> S;
        true ->
            _ = do_sweep(),
            S#state{last_sweep = Now}
    end.

%% Only the first running master sweeps (the deletes replicate), and only
%% while every master with a copy runs with it.
do_sweep() ->
    Running = mnesia:system_info(running_db_nodes),
    case mnesia:table_info(subscription_tombstone, all_nodes) -- Running of
        [] ->
            case lists:min(Running) =:= node() of
                true ->
                    N = httpdcnode_subs:expire_tombstones(ttl_s()),
                    httpdcnode_presence:count_event(tombstones_expired, N),
                    {expired, N};
                false -> not_first
            end;
        Apart -> {kept, Apart}
    end.

now_ms() -> erlang:monotonic_time(millisecond).
now_us() -> erlang:system_time(microsecond).
