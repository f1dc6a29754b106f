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
%% On a node of role client (httpdcnode_client) every call runs on a master.
-module(subsmanager).

-export([ensure_table/0, add_subscriptions/1, remove_subscriptions/1,
         get_subscribers/1, get_subscriptions/1, clear/0, count/0]).

-record(subscription, {subscriber, subscribee}).

-define(WAIT_TABLES_MS, 30000).

%% Creates the table if missing and waits until it is loaded. Needs mnesia
%% running (the httpdcnode application starts it).
-spec ensure_table() -> ok | {error, term()}.
ensure_table() ->
    Others = [N || N <- application:get_env(httpdcnode, masters, []), N =/= node()],
    Up = [N || N <- Others, net_kernel:connect_node(N) =:= true],
    global:trans({{?MODULE, ensure_table}, self()}, fun() -> join(Up) end, [node() | Up]).

join(Up) ->
    case Up =:= [] orelse mnesia:change_config(extra_db_nodes, Up) of
        true -> create_or_copy();
        {ok, _} -> create_or_copy();
        {error, Reason} -> {error, {extra_db_nodes, Up, Reason}}
    end.

create_or_copy() ->
    Copies = case mnesia:table_info(schema, storage_type) of
                 disc_copies -> disc_copies;
                 _ -> ram_copies
             end,
    Def = [{type, bag},
           {attributes, record_info(fields, subscription)},
           {index, [#subscription.subscribee]},
           {Copies, [node()]}],
    Made = case lists:member(subscription, mnesia:system_info(tables)) of
               false -> mnesia:create_table(subscription, Def);
               true -> {aborted, {already_exists, subscription}}
           end,
    case Made of
        {atomic, ok} -> wait();
        {aborted, {already_exists, subscription}} -> copy(Copies);
        {aborted, Reason} -> {error, Reason}
    end.

%% The table exists (another master made it): a copy here too.
copy(Copies) ->
    case mnesia:add_table_copy(subscription, node(), Copies) of
        {atomic, ok} -> wait();
        {aborted, {already_exists, subscription, _}} -> wait();
        {aborted, Reason} -> {error, {add_table_copy, Reason}}
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
    remote(add_subscriptions, [Subs],
           fun() -> lists:foreach(fun(#subscription{} = S) -> ok = mnesia:dirty_write(S) end, Subs) end).

%% Removes [{subscription, Subscriber, Subscribee}], all or none.
-spec remove_subscriptions([#subscription{}]) -> ok | {error, term()}.
remove_subscriptions(Subs) when is_list(Subs) ->
    remote(remove_subscriptions, [Subs], fun() -> local_remove(Subs) end).

local_remove(Subs) ->
    F = fun() -> lists:foreach(fun(#subscription{} = S) -> ok = mnesia:delete_object(S) end, Subs) end,
    case mnesia:transaction(F) of
        {atomic, ok} -> ok;
        {aborted, Reason} -> {error, Reason}
    end.

%% Users subscribed to User (they receive what User publishes).
-spec get_subscribers(term()) -> [term()].
get_subscribers(User) ->
    remote(get_subscribers, [User],
           fun() -> [S || #subscription{subscriber = S} <-
                              mnesia:dirty_index_read(subscription, User,
                                                      #subscription.subscribee)]
           end).

%% Users that User is subscribed to.
-spec get_subscriptions(term()) -> [term()].
get_subscriptions(User) ->
    remote(get_subscriptions, [User],
           fun() -> [E || #subscription{subscribee = E} <- mnesia:dirty_read(subscription, User)] end).

%% Removes every subscription.
-spec clear() -> ok | {error, term()}.
clear() ->
    remote(clear, [], fun() ->
                              case mnesia:clear_table(subscription) of
                                  {atomic, ok} -> ok;
                                  {aborted, Reason} -> {error, Reason}
                              end
                      end).

%% Number of subscription rows.
-spec count() -> non_neg_integer().
count() ->
    remote(count, [], fun() -> mnesia:table_info(subscription, size) end).

%% On a client node the call runs on a master; else Local() here.
remote(F, A, Local) ->
    case httpdcnode_client:is_client() of
        true -> httpdcnode_client:call(?MODULE, F, A, ?WAIT_TABLES_MS);
        false -> Local()
    end.
