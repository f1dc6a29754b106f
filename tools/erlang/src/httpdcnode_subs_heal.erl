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
%% - when sides made their tables apart (each one while it could reach no
%%   other master: masters started during a partition, or a RAM master
%%   restarted during one), mnesia refuses to join them whatever is done
%%   ("Bad cookie in table definition"): the merge compares the whole
%%   tables, writes the winners into the tables made first (the same on
%%   every master, whichever sides meet first), and the masters of the
%%   other makings replace theirs by a copy of those
%%   (httpdcnode_subs:rejoin/1);
%% - a master left without tables (it gave them up and could not join the
%%   side kept) copies them from a master that has them, never makes them;
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
%% differ. A master with no such note counts from its own start.
-module(httpdcnode_subs_heal).
-behaviour(gen_server).

-export([start_link/0, sweep/0, create_table/0, bound/1, ready/0]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).

-define(SERVER, ?MODULE).
%% The other masters are called by the names both this release and the one
%% before have (aliases here), so that masters of either release merge.
-define(PEER, subsmanager_heal).
-define(PEER_SUBS, subsmanager).
%% Node -> {Node, DownUs}: when mnesia on Node went down for this master,
%% until it is up again; and {'$started', Us}. Made by
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

%% This master's bound for what the masters of All it does not run with
%% may lack: the earliest time one of them went down for it (its own start
%% for one it has no note of); none when it runs with all of them.
-spec bound([node()]) -> integer() | none.
bound(All) ->
    case All -- mnesia:system_info(running_db_nodes) of
        [] -> none;
        Apart ->
            [{_, Started}] = ets:lookup(?DOWN, '$started'),
            lists:min([case ets:lookup(?DOWN, N) of
                           [{_, T}] -> T;
                           [] -> Started
                       end || N <- Apart])
    end.

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
handle_info(tick, S) ->
    erlang:send_after(?TICK_MS, self(), tick),
    S1 = reconnect(S),
    case httpdcnode_subs:has_tables() of
        true -> {noreply, sweep(merge(S1))};
        false -> {noreply, recover(S1)}
    end;
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
merge(S = #state{masters = Ms}) ->
    case httpdcnode_subs:has_tables() andalso apart(Ms) of
        false -> S;
        [] -> S#state{failed = none};
        Apart ->
            T0 = now_ms(),
            case locked(Ms, fun() -> merge_locked(Ms) end) of
                {ok, Sides, Pairs, Compared, Replaced, NotJoined} ->
                    Sides =:= [] orelse
                        begin
                            httpdcnode_presence:count_event(subscription_merges, 1),
                            httpdcnode_presence:count_event(subscription_merged_pairs, Pairs),
                            logger:notice("subsmanager: merged the subscriptions of ~p after a "
                                          "partition: ~b pairs changed, ~b ms (~b comparing "
                                          "the copies)~s", [Sides, Pairs, now_ms() - T0,
                                                             Compared, replaced_text(Replaced)])
                        end,
                    case NotJoined of
                        none -> S#state{failed = none};
                        _ -> not_merged(S, Apart, NotJoined)
                    end;
                nothing -> S#state{failed = none};
                {not_linked, Unlinked} ->
                    failed(S, {not_linked, Unlinked}, "the subscriptions of ~p wait to be merged "
                           "with this master's until every master of their sides and this one's "
                           "are linked to each other; not linked: ~p", [Apart, Unlinked]);
                Err -> not_merged(S, Apart, Err)
            end
    end.

not_merged(S, Apart, Err) ->
    failed(S, Err, "cannot merge the subscriptions of ~p with this master's: ~0p; retrying "
           "every ~b ms", [Apart, Err, ?TICK_MS]).

replaced_text([]) -> "";
replaced_text(Replaced) ->
    io_lib:format("; the tables of ~p had been made apart from the others': replaced by a "
                  "copy of those, after the merge", [Replaced]).

%% Fun() under the global lock that orders table creation, on this master
%% and the masters of Ms it is connected to; what it raises is returned.
locked(Ms, Fun) ->
    Nodes = lists:usort([node() | [N || N <- Ms, lists:member(N, nodes())]]),
    global:trans({{?PEER_SUBS, ensure_table}, self()}, fun() -> catch Fun() end, Nodes, 5).

%% An error said once until something else happens; tried again each tick.
failed(S = #state{failed = Err}, Err, _Format, _Args) -> S;
failed(S, Err, Format, Args) ->
    logger:error("subsmanager: " ++ Format, Args),
    S#state{failed = Err}.

%% This master has no tables: it gave them up for another side's and did
%% not join it (the link went meanwhile). It copies them from a connected
%% master that has them; it never makes them, or they would be apart again.
recover(S = #state{masters = Ms}) ->
    case mnesia:system_info(is_running) =:= yes andalso ready_masters(Ms) of
        false -> S;
        [] ->
            failed(S, no_master, "this master has no subscription tables (it gave its own up "
                   "for those of another master, made apart) and no master of env masters "
                   "that has them is linked to it; trying again every ~b ms. Its "
                   "subscription calls fail meanwhile; if no other master comes back, "
                   "restart this one: alone, it makes the tables anew", [?TICK_MS]);
        [M | _] ->
            case locked(Ms, fun() ->
                                    httpdcnode_subs:has_tables() orelse
                                        httpdcnode_subs:copy_tables(M)
                            end) of
                R when R =:= ok; R =:= true ->
                    logger:notice("subsmanager: this master copied the subscription tables "
                                  "of ~p", [M]),
                    S#state{failed = none};
                Err ->
                    failed(S, Err, "this master has no subscription tables and cannot copy "
                           "those of ~p: ~0p; retrying every ~b ms", [M, Err, ?TICK_MS])
            end
    end.

ready_masters(Ms) ->
    [M || M <- Ms, lists:member(M, nodes()),
          (catch erpc:call(M, ?PEER, ready, [], ?CALL_MS)) =:= true].

%% The connected masters, ready, that mnesia here does not run with.
apart(Ms) ->
    Running = mnesia:system_info(running_db_nodes),
    ready_masters([M || M <- Ms, not lists:member(M, Running)]).

merge_locked(Ms) ->
    case apart(Ms) of
        [] -> nothing;
        Apart ->
            %% every master of every side, each copy read: while links come
            %% and go, two masters may not agree on whom they run with
            Before = mnesia:system_info(running_db_nodes),
            All = lists:usort(lists:append([Before |
                                            [erpc:call(M, mnesia, system_info, [running_db_nodes],
                                                       ?CALL_MS) || M <- Apart]])),
            case unlinked(All) of
                [] -> merge_all(All, Before);
                Unlinked -> {not_linked, Unlinked}
            end
    end.

%% The pairs of All not linked to each other. mnesia joins sides only
%% into one where every master is linked to every other: while a master
%% of All cannot reach another (a partial partition, where global drops
%% the links of a master that reaches both sides), the join would retry
%% for as long, holding the writes. Merged once they are all linked.
unlinked(All) ->
    Mine = [node() | nodes()],
    case [{node(), N} || N <- All, not lists:member(N, Mine)] of
        [] ->
            [{N, M} || N <- All, N =/= node(),
                       Linked <- [erpc:call(N, erlang, nodes, [], ?CALL_MS)],
                       M <- All, M =/= node(), N < M, not lists:member(M, Linked)];
        NotMine -> NotMine
    end.

merge_all(All, Before) ->
    Closed = close_gates(All, []),
    try
        T0 = now_ms(),
        %% tables made apart: whole tables compared (either side may
        %% hold anything the other lacks)
        Groups = [_ | Others] = groups(All),
        Since = case Others of
                    [] -> since(All, All);
                    _ -> 0
                end,
        {Pairs, Copies} = collect(All, Since),
        Compared = now_ms() - T0,
        Merged = [{P, [maps:get(P, C) || C <- Copies]} || P <- Pairs],
        Replaced = replace(Groups, Merged),
        %% whatever it answers, what counts is whom mnesia here runs with
        Joined = case All -- mnesia:system_info(running_db_nodes) of
                     [] -> {ok, []};
                     Missing -> mnesia_controller:connect_nodes(Missing)
                 end,
        Running = mnesia:system_info(running_db_nodes),
        %% the join may take in a master that came since: its copy
        %% is still its own, read it too
        Extra = Running -- All,
        Closed2 = close_gates(Extra, []),
        try
            Merged2 = case Extra of
                          [] -> Merged;
                          _ ->
                              {P2, C2} = collect(All ++ Extra,
                                                 min(Since, since(Extra, All ++ Extra))),
                              [{P, [maps:get(P, C) || C <- C2]} || P <- P2]
                      end,
            %% also when some side was not joined: those that were
            %% run together from now on, and no longer note when
            %% the others went down; the rest merge later
            Count = httpdcnode_subs:apply_merge(Merged2),
            NotJoined = All -- Running,
            {ok, Running -- Before, Count, Compared, Replaced,
             case NotJoined of
                 [] -> none;
                 _ -> {connect_nodes, NotJoined, Joined}
             end}
        after
            open_gates(Closed2)
        end
    after
        open_gates(Closed)
    end.

%% The masters of All grouped by the tables they hold: one group for each
%% making of them (each table's cookie: when and where it was made), the
%% tables made first first. The same choice on every master, whichever
%% sides meet first: the tables kept never change for newer ones.
groups(All) ->
    ByCookies = maps:groups_from_list(
                  fun(N) -> [erpc:call(N, mnesia, table_info, [T, cookie], ?CALL_MS)
                             || T <- ?TABLES]
                  end, All),
    [Ns || {_, Ns} <- lists:sort(maps:to_list(ByCookies))].

%% Tables made apart: the winners go into the tables kept first (so that
%% nothing is lost if what follows fails), then the masters of the other
%% groups replace theirs by a copy of those. The masters replaced.
replace([_], _Merged) -> [];
replace([Keep | Others], Merged) ->
    K = case lists:member(node(), Keep) of
            true -> node();
            false -> hd(Keep)
        end,
    _ = erpc:call(K, ?PEER_SUBS, apply_merge, [Merged], ?CALL_MS),
    Replaced = lists:append(Others),
    [case erpc:call(N, ?PEER_SUBS, rejoin, [K], ?CALL_MS) of
         ok -> ok;
         Err -> error({rejoin, N, K, Err})
     end || N <- Replaced],
    Replaced.

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
