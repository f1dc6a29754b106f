%% SPDX-License-Identifier: Apache-2.0
%% Subscription database (who receives whose events), as in the 2008 comet
%% pubsub design: a mnesia bag `subscription' keyed by subscriber, indexed on
%% subscribee, so "who is subscribed to User" is one index read.
%%
%% RAM copies by default; disc_copies when the node has a disc schema
%% (mnesia:create_schema/1 was run for its mnesia dir).
%%
%% Several masters (application env `masters', this node among them): the
%% table has a copy on each, kept by mnesia itself. A master that starts
%% joins the schema of those already running (extra_db_nodes) and adds its
%% copy, or creates the table when it is the first; a global lock orders
%% masters that start at once. A restarted RAM master copies the table back
%% from a running one. Masters with disc copies share one schema: create it
%% once for all, mnesia:create_schema(Masters), before their first start.
%% Only a master that starts while it can reach no other master's mnesia
%% creates the tables; masters that did so apart hold tables of the same
%% names made twice (another cookie), which mnesia never joins: the merge
%% replaces all but one side's (rejoin/1).
%% On a node of role client (httpdcnode_client) every call runs on a master.
%%
%% Masters cut from each other keep taking writes; httpdcnode_subs_heal merges
%% the copies when they meet again. For that each row carries the clock of
%% its last add, and a removal leaves a tombstone (table
%% subscription_tombstone, {Pair, Clock}) for the env
%% subscription_tombstone_ttl. Per pair the latest add or removal wins
%% (a removal on a tie); see merge_pair/1. A clock is the wall clock in
%% microseconds, raised above the pair's previous add or removal, so a
%% change always wins over what its master had seen of the pair.
%%
%% Writes wait while a merge holds this node's gate (close_gate/1): the
%% merge reads both sides, and a write between its read and the join of
%% the islands would reach one side only.
-module(httpdcnode_subs).

-export([ensure_table/0, add_subscriptions/1, remove_subscriptions/1,
         get_subscribers/1, get_subscriptions/1, clear/0, count/0]).
%% For httpdcnode_subs_heal, run on every master of a merge.
-export([rejoin/1, copy_tables/1, has_tables/0, close_gate/1, open_gate/0, changed_window/3,
         digest/2, changed_in/3, pair_states/1, apply_merge/1,
         merge_pair/1, expire_tombstones/1, tombstones/0]).

-record(subscription, {subscriber, subscribee, clock = 0}).
-record(subscription_tombstone, {pair, clock}).

-define(WAIT_TABLES_MS, 30000).
%% Rows a merge reads at once.
-define(CHUNK, 10000).
-define(TOMB, subscription_tombstone).
-define(TABLES, [subscription, ?TOMB]).
%% The gate: an atomics array in persistent_term, made by ensure_table/0.
-define(GATE, {?MODULE, gate}).
%% What other nodes see of this module, in this release and the one before
%% (subsmanager, an alias here): the lock of the table's creation and the
%% name a client node calls its master by.
-define(SHARED, subsmanager).
-define(GATE_UNTIL, 1).      % monotonic ms until which writes wait; 0: open
                             % (monotonic time may be negative)
-define(GATE_INFLIGHT, 2).   % writes under way
-define(GATE_POLL_MS, 5).

%% Creates the tables if missing and waits until they are loaded. Needs
%% mnesia running (the httpdcnode application starts it).
-spec ensure_table() -> ok | {error, term()}.
ensure_table() ->
    persistent_term:get(?GATE, undefined) =:= undefined andalso
        persistent_term:put(?GATE, atomics:new(2, [{signed, true}])),
    Others = [N || N <- application:get_env(httpdcnode, masters, []), N =/= node()],
    Up = [N || N <- Others, net_kernel:connect_node(N) =:= true],
    global:trans({{?SHARED, ensure_table}, self()}, fun() -> join(Up) end, [node() | Up]).

%% Gives this master's tables up for a copy of those of Node's side, when
%% they were made apart from them (another cookie): deletes them (on every
%% master of this side of the partition, which share them), joins Node's
%% schema and adds a copy. Run by a merge (which holds the lock of
%% ensure_table/0) once it has written what these tables held into Node's.
%% Never makes a table: one made here would be apart again. While the
%% tables are absent here, reads wait (?WAIT_TABLES_MS at most) and writes
%% fail; should the join fail, copy_tables/1 is tried every second.
-spec rejoin(node()) -> ok | {error, term()}.
rejoin(Node) ->
    Theirs = [{T, erpc:call(Node, mnesia, table_info, [T, cookie], ?WAIT_TABLES_MS)}
              || T <- ?TABLES],
    %% another master of this side may have deleted them already
    Apart = [T || {T, Cookie} <- Theirs, lists:member(T, mnesia:system_info(tables)),
                  mnesia:table_info(T, cookie) =/= Cookie],
    case delete_tables(Apart) of
        ok ->
            case join_copy(Node) of
                ok ->
                    httpdcnode_presence:count_event(subscription_tables_replaced, 1),
                    logger:warning("subsmanager: the subscription tables of ~p had been made "
                                   "apart from those of ~p (each made its own while it could "
                                   "reach no other master; mnesia joins no two tables of one "
                                   "name made apart): replaced by a copy of theirs, into which "
                                   "what they held was merged first", [node(), Node]);
                Err -> Err
            end;
        Err -> Err
    end.

delete_tables([]) -> ok;
delete_tables([T | Ts]) ->
    case mnesia:delete_table(T) of
        {atomic, ok} -> delete_tables(Ts);
        {aborted, {no_exists, T}} -> delete_tables(Ts);   % another master of this side
        {aborted, Reason} -> {error, {delete_table, T, Reason}}
    end.

%% A master without copies of the tables (rejoin/1 did not end) adds
%% them: from its own side when the tables are in its schema, else from
%% Node's, whose schema it joins (which fails, deleting nothing, when
%% tables of another making are in its schema). Run by
%% httpdcnode_subs_heal under the lock of ensure_table/0.
-spec copy_tables(node()) -> ok | {error, term()}.
copy_tables(Node) ->
    case ?TABLES -- mnesia:system_info(tables) of
        [] -> add_copies();
        _ -> join_copy(Node)
    end.

%% Joins Node's schema and copies its tables, which must be there.
join_copy(Node) ->
    Joined = mnesia:change_config(extra_db_nodes, [Node]),
    case lists:member(Node, mnesia:system_info(running_db_nodes)) andalso
        ?TABLES -- mnesia:system_info(tables) of
        false -> {error, {not_joined, Node, Joined}};
        [_ | _] = Missing -> {error, {no_tables_there, Node, Missing}};
        [] -> add_copies()
    end.

add_copies() ->
    Copies = copies(),
    case lists:foldl(fun(T, ok) -> copy(T, Copies); (_, Err) -> Err end, ok, ?TABLES) of
        ok -> wait_tables();
        Err -> Err
    end.

%% Whether this master holds both tables.
-spec has_tables() -> boolean().
has_tables() ->
    mnesia:system_info(is_running) =:= yes andalso
        ?TABLES -- mnesia:system_info(local_tables) =:= [].

join(Up) ->
    case Up =:= [] orelse mnesia:change_config(extra_db_nodes, Up) of
        true -> create_or_copy();
        {ok, _} -> create_or_copy();
        {error, Reason} -> {error, {extra_db_nodes, Up, Reason}}
    end.

create_or_copy() ->
    Copies = copies(),
    Defs = [{subscription, [{type, bag},
                            {attributes, record_info(fields, subscription)},
                            {index, [#subscription.subscribee]},
                            {Copies, [node()]}]},
            {?TOMB, [{type, set},
                     {attributes, record_info(fields, subscription_tombstone)},
                     {Copies, [node()]}]}],
    case lists:foldl(fun({Tab, Def}, ok) -> create_or_copy(Tab, Def, Copies);
                        (_, Err) -> Err
                     end, ok, Defs) of
        ok -> wait_tables();
        Err -> Err
    end.

wait_tables() ->
    case mnesia:wait_for_tables(?TABLES, ?WAIT_TABLES_MS) of
        ok -> upgrade();
        {timeout, Tabs} -> {error, {timeout, Tabs}};
        {error, _} = E -> E
    end.

copies() ->
    case mnesia:table_info(schema, storage_type) of
        disc_copies -> disc_copies;
        _ -> ram_copies
    end.

create_or_copy(Tab, Def, Copies) ->
    Made = case lists:member(Tab, mnesia:system_info(tables)) of
               false -> mnesia:create_table(Tab, Def);
               true -> {aborted, {already_exists, Tab}}
           end,
    case Made of
        {atomic, ok} -> ok;
        {aborted, {already_exists, Tab}} -> copy(Tab, Copies);
        {aborted, Reason} -> {error, Reason}
    end.

%% The table exists (another master made it): a copy here too.
copy(Tab, Copies) ->
    case mnesia:add_table_copy(Tab, node(), Copies) of
        {atomic, ok} -> ok;
        {aborted, {already_exists, Tab, _}} -> ok;
        {aborted, Reason} -> {error, {add_table_copy, Tab, Reason}}
    end.

%% A disc table of an older release has no clock: its rows get clock 0,
%% older than any change.
upgrade() ->
    case mnesia:table_info(subscription, attributes) of
        [subscriber, subscribee] ->
            Add0 = fun({subscription, S, E}) -> #subscription{subscriber = S, subscribee = E} end,
            case mnesia:transform_table(subscription, Add0, record_info(fields, subscription)) of
                {atomic, ok} -> ok;
                {aborted, Reason} -> {error, {upgrade, Reason}}
            end;
        _ -> ok
    end.

%% Adds [{subscription, Subscriber, Subscribee}]. Dirty writes: bulk loads of
%% millions of rows are several times faster than in a transaction.
-spec add_subscriptions([{subscription, term(), term()}]) -> ok.
add_subscriptions(Subs) when is_list(Subs) ->
    remote(add_subscriptions, [Subs],
           fun() -> gated(fun() ->
                                  Ctx = read_context(),
                                  lists:foreach(fun(Sub) -> add(Sub, Ctx) end, Subs)
                          end)
           end).

%% Reads the pair's rows and tombstone first: the new clock must be above
%% theirs, and the older rows go (a bag keeps every distinct row).
add({subscription, S, E}, Ctx) ->
    Old = rows(S, E, Ctx),
    Tomb = case Ctx of
               ets -> ets:lookup(?TOMB, {S, E});
               dirty -> mnesia:dirty_read(?TOMB, {S, E})
           end,
    Clock = next_clock(Old, Tomb),
    ok = mnesia:dirty_write(#subscription{subscriber = S, subscribee = E, clock = Clock}),
    [ok = mnesia:dirty_delete_object(O) || O <- Old],
    [ok = mnesia:dirty_delete_object(T) || T <- Tomb],
    ok.

%% Removes [{subscription, Subscriber, Subscribee}], all or none. Each
%% subscription that was there leaves a tombstone.
-spec remove_subscriptions([{subscription, term(), term()}]) -> ok | {error, term()}.
remove_subscriptions(Subs) when is_list(Subs) ->
    remote(remove_subscriptions, [Subs], fun() -> gated(fun() -> local_remove(Subs) end) end).

local_remove(Subs) ->
    F = fun() -> lists:foreach(fun remove/1, Subs) end,
    case mnesia:transaction(F) of
        {atomic, ok} -> ok;
        {aborted, Reason} -> {error, Reason}
    end.

remove({subscription, S, E}) ->
    case rows(S, E, transaction) of
        [] -> ok;
        Old ->
            Tomb = mnesia:read(?TOMB, {S, E}, write),
            [ok = mnesia:delete_object(O) || O <- Old],
            ok = mnesia:write(#subscription_tombstone{pair = {S, E}, clock = next_clock(Old, Tomb)})
    end.

%% How a bulk add reads: straight from the ETS tables of this master's own
%% copies (RAM or disc copies are ETS tables named as the table), which
%% saves mnesia's dirty read path per row (a bulk load of 10 M rows reads
%% each pair once); through mnesia where this node has no copy.
read_context() ->
    case [subscription, ?TOMB] -- mnesia:system_info(local_tables) of
        [] -> ets;
        _ -> dirty
    end.

%% The rows of the pair (S, E). A match pattern is fast (the bag's key, then
%% compared inside ETS) but takes the atoms '_' and '$1', '$2'... as
%% wildcards: the rows of a pair holding one are read whole and filtered.
rows(S, E, Context) ->
    case plain(S) andalso plain(E) of
        true when Context =:= ets ->
            ets:match_object(subscription,
                             #subscription{subscriber = S, subscribee = E, clock = '_'});
        false when Context =:= ets ->
            [R || R = #subscription{subscribee = X} <- ets:lookup(subscription, S), X =:= E];
        true when Context =:= dirty ->
            mnesia:dirty_match_object(#subscription{subscriber = S, subscribee = E, clock = '_'});
        true ->
            mnesia:match_object(#subscription{subscriber = S, subscribee = E, clock = '_'});
        false when Context =:= dirty ->
            [R || R = #subscription{subscribee = X} <- mnesia:dirty_read(subscription, S), X =:= E];
        false ->
            [R || R = #subscription{subscribee = X} <- mnesia:read(subscription, S), X =:= E]
    end.

plain(T) when is_integer(T); is_binary(T) -> true;
plain(T) when is_atom(T) ->
    case atom_to_list(T) of
        "_" -> false;
        [$$ | _] -> false;
        _ -> true
    end;
plain(T) when is_tuple(T) -> plain(tuple_to_list(T));
plain([H | T]) -> plain(H) andalso plain(T);
plain(M) when is_map(M) -> plain(maps:to_list(M));
plain(_) -> true.

next_clock(Rows, Tombs) ->
    Seen = [C || #subscription{clock = C} <- Rows]
        ++ [C || #subscription_tombstone{clock = C} <- Tombs],
    max(erlang:system_time(microsecond), lists:max([0 | Seen]) + 1).

%% Users subscribed to User (they receive what User publishes), each once.
-spec get_subscribers(term()) -> [term()].
get_subscribers(User) ->
    remote(get_subscribers, [User],
           fun() -> read(fun() -> lists:usort([S || #subscription{subscriber = S} <-
                                                        mnesia:dirty_index_read(
                                                          subscription, User,
                                                          #subscription.subscribee)])
                         end)
           end).

%% Users that User is subscribed to, each once.
-spec get_subscriptions(term()) -> [term()].
get_subscriptions(User) ->
    remote(get_subscriptions, [User],
           fun() -> read(fun() -> lists:usort([E || #subscription{subscribee = E} <-
                                                        mnesia:dirty_read(subscription, User)])
                         end)
           end).

%% A read; while this master's tables are being replaced (rejoin/1), which
%% its reads may meet half done, it tries again once they are there,
%% ?WAIT_TABLES_MS at most.
read(Read) ->
    try Read()
    catch exit:{aborted, _} = E -> read_again(Read, E, now_ms() + ?WAIT_TABLES_MS)
    end.

read_again(Read, E, Until) ->
    case Until - now_ms() of
        Left when Left > 0 ->
            case catch mnesia:wait_for_tables([subscription], Left) of
                ok -> ok;
                _ -> receive after 10 -> ok end
            end,
            try Read()
            catch exit:{aborted, _} = E2 ->
                    receive after ?GATE_POLL_MS -> ok end,
                    read_again(Read, E2, Until)
            end;
        _ -> exit(E)
    end.

%% Removes every subscription and tombstone. Not a removal of each: rows
%% that a master cut from this one holds come back when they meet.
-spec clear() -> ok | {error, term()}.
clear() ->
    remote(clear, [], fun() -> gated(fun() -> clear_tables([subscription, ?TOMB]) end) end).

clear_tables([]) -> ok;
clear_tables([T | Ts]) ->
    case mnesia:clear_table(T) of
        {atomic, ok} -> clear_tables(Ts);
        {aborted, Reason} -> {error, Reason}
    end.

%% Number of subscription rows.
-spec count() -> non_neg_integer().
count() ->
    remote(count, [], fun() -> read(fun() -> mnesia:table_info(subscription, size) end) end).

%% Number of tombstones kept here (0 without the table).
-spec tombstones() -> non_neg_integer().
tombstones() ->
    try mnesia:table_info(?TOMB, size)
    catch exit:_ -> 0
    end.

%% On a client node the call runs on a master; else Local() here.
remote(F, A, Local) ->
    case httpdcnode_client:is_client() of
        true -> httpdcnode_client:call(?SHARED, F, A, ?WAIT_TABLES_MS);
        false -> Local()
    end.

%%% ------------------------------------------------------------------
%%% The gate
%%% ------------------------------------------------------------------

%% Runs a write unless a merge holds the gate; then waits until it is open
%% again or its time ran out (a merge that died does not block writes).
gated(Write) ->
    case persistent_term:get(?GATE, undefined) of
        undefined -> Write();
        G ->
            atomics:add(G, ?GATE_INFLIGHT, 1),
            case closed(atomics:get(G, ?GATE_UNTIL)) of
                true ->
                    atomics:sub(G, ?GATE_INFLIGHT, 1),
                    receive after ?GATE_POLL_MS -> gated(Write) end;
                false ->
                    try Write() after atomics:sub(G, ?GATE_INFLIGHT, 1) end
            end
    end.

closed(0) -> false;
closed(Until) -> Until > now_ms().

%% Holds the writes that start from now on, for Ms at most, and waits until
%% those under way have ended. ok, or {error, busy} when they did not end
%% in time.
-spec close_gate(pos_integer()) -> ok | {error, busy | no_table}.
close_gate(Ms) ->
    case persistent_term:get(?GATE, undefined) of
        undefined -> {error, no_table};
        G ->
            Until = case now_ms() + Ms of
                        0 -> 1;
                        U -> U
                    end,
            atomics:put(G, ?GATE_UNTIL, Until),
            wait_inflight(G, Until)
    end.

wait_inflight(G, Until) ->
    case atomics:get(G, ?GATE_INFLIGHT) of
        0 -> ok;
        _ ->
            case now_ms() < Until of
                true -> receive after 1 -> wait_inflight(G, Until) end;
                false -> {error, busy}
            end
    end.

-spec open_gate() -> ok.
open_gate() ->
    case persistent_term:get(?GATE, undefined) of
        undefined -> ok;
        G -> atomics:put(G, ?GATE_UNTIL, 0)
    end.

now_ms() -> erlang:monotonic_time(millisecond).

%%% ------------------------------------------------------------------
%%% Merging copies
%%% ------------------------------------------------------------------
%% A pair's state on one copy: {Pair, LiveClocks, TombClock | none}
%% (normally one live clock or a tombstone, but a bag may briefly hold two
%% rows of a pair written at once on two masters).

%% The pairs with a row or a tombstone of clock Since or later here (the
%% window), folded: Fun({Pair, {live | removed, Clock}}, Acc) for each row
%% and tombstone, read in chunks. Straight from the local ETS copies (RAM
%% or disc copies are ETS tables named as the table): a master holds both.
fold_window(Fun, Acc0, Since) ->
    Rows = ets:select(subscription,
                      [{#subscription{subscriber = '$1', subscribee = '$2', clock = '$3'},
                        [{'>=', '$3', Since}], [{{{{'$1', '$2'}}, {{live, '$3'}}}}]}],
                      ?CHUNK),
    Tombs = ets:select(?TOMB, [{#subscription_tombstone{pair = '$1', clock = '$2'},
                                [{'>=', '$2', Since}], [{{'$1', {{removed, '$2'}}}}]}],
                       ?CHUNK),
    fold_chunks(Fun, fold_chunks(Fun, Acc0, Rows), Tombs).

fold_chunks(_Fun, Acc, '$end_of_table') -> Acc;
fold_chunks(Fun, Acc, {Items, Cont}) ->
    fold_chunks(Fun, lists:foldl(Fun, Acc, Items), ets:select(Cont)).

%% The window, in one pass: {entries, [{Pair, {live | removed, Clock}}]}
%% while it holds Cap entries at most, else {digest, digest(Entries,
%% Buckets)} of all of it.
-spec changed_window(integer(), non_neg_integer(), pos_integer()) ->
          {entries, [{{term(), term()}, {live | removed, integer()}}]} | {digest, binary()}.
changed_window(Since, Cap, Buckets) ->
    case fold_window(fun(X, {entries, N, L}) when N < Cap -> {entries, N + 1, [X | L]};
                        (X, {entries, _, L}) ->
                             Sums = atomics:new(Buckets, [{signed, false}]),
                             add_digest([X | L], Buckets, Sums),
                             {digest, Sums};
                        (X, {digest, Sums}) ->
                             add_digest([X], Buckets, Sums),
                             {digest, Sums}
                     end, {entries, 0, []}, Since) of
        {entries, _, L} -> {entries, L};
        {digest, Sums} -> {digest, digest_binary(Sums, Buckets)}
    end.

%% A digest of window entries: a binary of Buckets 64-bit sums, an entry in
%% bucket phash2(Pair, Buckets), the sum of its entries' hashes there. Two
%% copies whose windows hold the same in a bucket have the same sum there.
-spec digest([{{term(), term()}, {live | removed, integer()}}], pos_integer()) -> binary().
digest(Entries, Buckets) ->
    Sums = atomics:new(Buckets, [{signed, false}]),
    add_digest(Entries, Buckets, Sums),
    digest_binary(Sums, Buckets).

add_digest(Entries, Buckets, Sums) ->
    [atomics:add(Sums, erlang:phash2(P, Buckets) + 1, erlang:phash2(X)) || {P, _} = X <- Entries],
    ok.

digest_binary(Sums, Buckets) ->
    << <<(atomics:get(Sums, I)):64>> || I <- lists:seq(1, Buckets) >>.

%% The window's pairs in the buckets Which (a map with those keys).
-spec changed_in(integer(), pos_integer(), #{non_neg_integer() => _}) -> [{term(), term()}].
changed_in(Since, Buckets, Which) ->
    lists:usort(fold_window(fun({P, _}, L) ->
                                    case is_map_key(erlang:phash2(P, Buckets), Which) of
                                        true -> [P | L];
                                        false -> L
                                    end
                            end, [], Since)).

-spec pair_states([{term(), term()}]) -> [{{term(), term()}, [integer()], integer() | none}].
pair_states(Pairs) ->
    [{{S, E},
      [C || #subscription{clock = C} <- rows(S, E, dirty)],
      case mnesia:dirty_read(?TOMB, {S, E}) of
          [#subscription_tombstone{clock = C}] -> C;
          [] -> none
      end} || {S, E} <- Pairs].

%% The merge rule for one pair, given its state on each copy: the latest
%% add or removal wins, a removal on a tie; a copy that knows nothing of
%% the pair loses to one that does. {live, Clock} | {removed, Clock} | absent.
-spec merge_pair([{[integer()], integer() | none}]) -> {live | removed, integer()} | absent.
merge_pair(Copies) ->
    %% live < removed as atoms: on equal clocks the removal is the max
    case lists:max([{-1, absent} | [{C, live} || {Live, _} <- Copies, C <- Live]
                    ++ [{C, removed} || {_, C} <- Copies, is_integer(C)]]) of
        {-1, absent} -> absent;
        {C, Kind} -> {Kind, C}
    end.

%% Writes what merge_pair/1 chose for each pair, given the pair's state on
%% each copy, as replicated dirty operations (run once the copies are
%% joined): the rows and tombstones that lost are deleted, the winner
%% written where it is missing. Returns the number of pairs changed.
-spec apply_merge([{{term(), term()}, [{[integer()], integer() | none}]}]) ->
          non_neg_integer().
apply_merge(Pairs) ->
    mnesia:sync_dirty(fun() -> lists:foldl(fun apply_pair/2, 0, Pairs) end).

apply_pair({{S, E}, Copies}, N) ->
    Live = lists:usort(lists:append([L || {L, _} <- Copies])),
    Tombs = [T || {_, T} <- Copies],
    Row = fun(C) -> #subscription{subscriber = S, subscribee = E, clock = C} end,
    Ops = case merge_pair(Copies) of
              {live, C} ->
                  [{delete_object, Row(X)} || X <- Live, X =/= C]
                      ++ [{write, Row(C)}
                          || lists:any(fun({L, _}) -> not lists:member(C, L) end, Copies)]
                      ++ [{delete, {?TOMB, {S, E}}} || lists:any(fun is_integer/1, Tombs)];
              {removed, C} ->
                  [{delete_object, Row(X)} || X <- Live]
                      ++ [{write, #subscription_tombstone{pair = {S, E}, clock = C}}
                          || lists:any(fun(T) -> T =/= C end, Tombs)];
              absent -> []
          end,
    [ok = case Op of
              {delete_object, O} -> mnesia:delete_object(O);
              {write, O} -> mnesia:write(O);
              {delete, K} -> mnesia:delete(K)
          end || Op <- Ops],
    case Ops of
        [] -> N;
        _ -> N + 1
    end.

%% Deletes the tombstones older than MaxAgeS; returns how many.
-spec expire_tombstones(non_neg_integer()) -> non_neg_integer().
expire_tombstones(MaxAgeS) ->
    Before = erlang:system_time(microsecond) - MaxAgeS * 1000000,
    Old = mnesia:dirty_select(?TOMB, [{#subscription_tombstone{pair = '_', clock = '$1'},
                                       [{'<', '$1', Before}], ['$_']}]),
    gated(fun() -> [ok = mnesia:dirty_delete_object(T) || T <- Old] end),
    length(Old).
