%% Subscription database (who receives whose events), as in the 2008 comet
%% pubsub design: a mnesia bag `subscription' keyed by subscriber, indexed on
%% subscribee, so "who is subscribed to User" is one index read.
%%
%% RAM copies by default; disc_copies when the node has a disc schema
%% (mnesia:create_schema/1 was run for its mnesia dir).
-module(subsmanager).

-export([ensure_table/0, add_subscriptions/1, remove_subscriptions/1,
         get_subscribers/1, get_subscriptions/1, clear/0, count/0]).

-record(subscription, {subscriber, subscribee}).

-define(WAIT_TABLES_MS, 30000).

%% Creates the table if missing and waits until it is loaded. Needs mnesia
%% running (the httpdcnode application starts it).
-spec ensure_table() -> ok | {error, term()}.
ensure_table() ->
    Copies = case mnesia:table_info(schema, storage_type) of
                 disc_copies -> disc_copies;
                 _ -> ram_copies
             end,
    Def = [{type, bag},
           {attributes, record_info(fields, subscription)},
           {index, [#subscription.subscribee]},
           {Copies, [node()]}],
    case mnesia:create_table(subscription, Def) of
        {atomic, ok} -> wait();
        {aborted, {already_exists, subscription}} -> wait();
        {aborted, Reason} -> {error, Reason}
    end.

wait() ->
    case mnesia:wait_for_tables([subscription], ?WAIT_TABLES_MS) of
        ok -> ok;
        {timeout, Tabs} -> {error, {timeout, Tabs}};
        {error, _} = E -> E
    end.

%% Adds [{subscription, Subscriber, Subscribee}]. Dirty writes: bulk loads of
%% millions of rows are several times faster than in a transaction.
-spec add_subscriptions([#subscription{}]) -> ok.
add_subscriptions(Subs) when is_list(Subs) ->
    lists:foreach(fun(#subscription{} = S) -> ok = mnesia:dirty_write(S) end, Subs).

%% Removes [{subscription, Subscriber, Subscribee}], all or none.
-spec remove_subscriptions([#subscription{}]) -> ok | {error, term()}.
remove_subscriptions(Subs) when is_list(Subs) ->
    F = fun() -> lists:foreach(fun(#subscription{} = S) -> ok = mnesia:delete_object(S) end, Subs) end,
    case mnesia:transaction(F) of
        {atomic, ok} -> ok;
        {aborted, Reason} -> {error, Reason}
    end.

%% Users subscribed to User (they receive what User publishes).
-spec get_subscribers(term()) -> [term()].
get_subscribers(User) ->
    [S || #subscription{subscriber = S} <-
              mnesia:dirty_index_read(subscription, User, #subscription.subscribee)].

%% Users that User is subscribed to.
-spec get_subscriptions(term()) -> [term()].
get_subscriptions(User) ->
    [E || #subscription{subscribee = E} <- mnesia:dirty_read(subscription, User)].

%% Removes every subscription.
-spec clear() -> ok | {error, term()}.
clear() ->
    case mnesia:clear_table(subscription) of
        {atomic, ok} -> ok;
        {aborted, Reason} -> {error, Reason}
    end.

%% Number of subscription rows.
-spec count() -> non_neg_integer().
count() ->
    mnesia:table_info(subscription, size).
