%% SPDX-License-Identifier: Apache-2.0
%% Topic presence on a master: which C-nodes hold a topic and how many
%% streams each has subscribed, and (with the C-nodes' --presence-topics)
%% who: every subscription's uid and conn. The presence server
%% (httpdcnode_presence) owns the tables and hands this module what the
%% C-nodes report:
%%   {httpdcnode, Node, topics, [{Topic, N}]}      N streams of Node are
%%                           subscribed to Topic now; 0: none, but Node keeps
%%                           its history for clients coming back (it lingers
%%                           --history-ttl seconds): messages still go there
%%   {httpdcnode, Node, topics_gone, [Topic]}      Node holds it no more
%%   {httpdcnode, Node, topic_snapshot, [{Topic, N}]}  all Node holds
%%                           (replaces), then topic_snapshot_more (adds); it
%%                           follows every uid snapshot
%%   {httpdcnode, Node, topic_members, [{Topic, Uid, Conn}]}  every
%%                           subscription (replaces), then topic_members_more
%%   {httpdcnode, Node, topic_joins | topic_leaves, [{Topic, Uid, Conn}]}
%% A C-node that disconnects (nodedown) loses its subscribers here; one
%% that takes numbered topic messages (its hello's topic_seq) keeps its
%% topics, as held with no stream (0), for as long as it keeps such a
%% topic (the hello's topic_linger), as an offline uid's last node is kept: its link may come
%% back (a link that died, the node did not), and what is published
%% meanwhile is numbered and kept for it (httpdcnode_outq), so that its
%% clients miss nothing, or are told a gap. Its next topic snapshot says
%% what it holds; past the TTL without one its topics go. Every master
%% hears every C-node, so httpdcnode:publish/2 works through any of them.
%%
%% Held messages: a topic's first stream on a node is told at once, but
%% the presence server and the process that publishes are two processes,
%% so a publish right after a join (a handler that admits a join, then the
%% joiner's first line) may find the topic held nowhere yet. Such a message
%% is held (hold/2) for at most env hold_ms (1000) and sent to the first
%% C-node that reports the topic; at most env hold_max (100000) are held,
%% past it, or past its time, it is dropped and counted (topic_unheld).
%%
%% Reads go straight to the (protected, named) tables, from any process:
%% nodes/1 is one ets:select over the topic's key range. A row is about
%% 150 bytes per (topic, node) pair, both tables together, and as much per
%% subscription with --presence-topics.
-module(httpdcnode_topics).
-compile({no_auto_import, [nodes/1]}).

-export([create_tables/0, handle/3, node_down/1, hold/2, sweep_held/1, sweep_away/1,
         held_count/0]).
-export([nodes/1, count/1, node_counts/1, members/1, member/2, topics/0, valid/1,
         numbered/1]).

%% {{Topic, Node}, N}: where a topic is held, one key range per topic.
-define(BY_TOPIC, httpdcnode_topics_by_topic).
%% {{Node, Topic}}: what a node holds, for its snapshot and its nodedown.
-define(BY_NODE, httpdcnode_topics_by_node).
%% {{Topic, Node, Conn}, Uid}: who (--presence-topics).
-define(MEMBERS, httpdcnode_topics_members).
%% {{Node, Topic, Conn}}: the same by node.
-define(MEMBERS_BY_NODE, httpdcnode_topics_members_by_node).
%% {Topic, Seq, ExpiresMs, Bin}: messages held for a topic held nowhere yet.
-define(HELD, httpdcnode_topics_held).
%% {Node, ExpiresMs}: a C-node whose link went down, its topics kept until then.
-define(AWAY, httpdcnode_topics_away).

%% In the presence server's init: its tables.
create_tables() ->
    [ets:new(T, [ordered_set, protected, named_table, {read_concurrency, true}])
     || T <- [?BY_TOPIC, ?BY_NODE, ?MEMBERS, ?MEMBERS_BY_NODE]],
    ets:new(?AWAY, [set, protected, named_table]),
    ets:new(?HELD, [duplicate_bag, public, named_table, {write_concurrency, true}]),
    ok.

%% Bin for Topic, held nowhere now: held for the first C-node that reports
%% it (see the top of this module). Runs in the caller.
-spec hold(binary(), term()) -> ok.
hold(Topic, Bin) ->
    Ms = application:get_env(httpdcnode, hold_ms, 1000),
    Max = application:get_env(httpdcnode, hold_max, 100000),
    case catch ets:info(?HELD, size) of
        N when is_integer(N), N < Max, Ms > 0 ->
            ets:insert(?HELD, {Topic, erlang:unique_integer([monotonic]),
                               erlang:monotonic_time(millisecond) + Ms, Bin}),
            %% reported meanwhile: sent now
            case nodes(Topic) of
                [Node | _] -> release(Topic, Node);
                [] -> ok
            end;
        _ -> httpdcnode_presence:count_event(topic_unheld, 1)
    end,
    ok.

%% The held messages past their time go (counted); how many.
sweep_held(Now) ->
    case ets:info(?HELD, size) of
        0 -> 0;
        _ ->
            N = ets:select_delete(?HELD, [{{'_', '_', '$1', '_'}, [{'<', '$1', Now}], [true]}]),
            httpdcnode_presence:count_event(topic_unheld, N),
            N
    end.

-spec held_count() -> non_neg_integer().
held_count() -> httpdcnode_presence:table_size(?HELD).

%% What was held for Topic, to Node, in the order it was published.
release(Topic, Node) ->
    case ets:take(?HELD, Topic) of
        [] -> ok;
        Held ->
            [httpdcnode:push_topic(Node, Topic, Bin) || {_, _, _, Bin} <- lists:keysort(2, Held)],
            httpdcnode_presence:count_event(topic_held_sent, length(Held))
    end.

%% Whether Topic is a topic name: a binary of 1 to 64 of A-Z a-z 0-9 _ - . : /
%% (what the C-nodes take).
-spec valid(term()) -> boolean().
valid(T) when is_binary(T), byte_size(T) >= 1, byte_size(T) =< 64 ->
    lists:all(fun(C) -> (C >= $a andalso C =< $z) orelse (C >= $A andalso C =< $Z)
                            orelse (C >= $0 andalso C =< $9)
                            orelse C =:= $_ orelse C =:= $- orelse C =:= $.
                            orelse C =:= $: orelse C =:= $/
              end, binary_to_list(T));
valid(_) -> false.

%% The C-nodes whose link went down and that did not come back within
%% their topic_linger (before Now): their topics go.
sweep_away(Now) ->
    case ets:info(?AWAY, size) of
        0 -> ok;
        _ -> [begin
                  ets:delete(?AWAY, N),
                  drop_topics(N)
              end || {N, Expires} <- ets:tab2list(?AWAY), Expires < Now],
             ok
    end.

%%% Reads (any process)

%% Whether Node takes numbered topic messages (its hello says topic_seq).
-spec numbered(node()) -> boolean().
numbered(Node) ->
    maps:get(topic_seq, element(2, httpdcnode_presence:node_info(Node)), 0) =:= 1.

%% C-nodes that hold Topic (with streams, or keeping its history).
-spec nodes(binary()) -> [node()].
nodes(Topic) ->
    try ets:select(?BY_TOPIC, [{{{Topic, '$1'}, '_'}, [], ['$1']}])
    catch error:badarg -> []
    end.

%% Streams subscribed to Topic, all nodes together.
-spec count(binary()) -> non_neg_integer().
count(Topic) ->
    lists:sum([N || {_, N} <- node_counts(Topic)]).

%% [{Node, Streams}] for Topic.
-spec node_counts(binary()) -> [{node(), non_neg_integer()}].
node_counts(Topic) ->
    try ets:select(?BY_TOPIC, [{{{Topic, '$1'}, '$2'}, [], [{{'$1', '$2'}}]}])
    catch error:badarg -> []
    end.

%% [{Uid, {Node, Conn}}] subscribed to Topic (the C-nodes' --presence-topics).
-spec members(binary()) -> [{pos_integer(), {node(), non_neg_integer()}}].
members(Topic) ->
    try ets:select(?MEMBERS, [{{{Topic, '$1', '$2'}, '$3'}, [], [{{'$3', {{'$1', '$2'}}}}]}])
    catch error:badarg -> []
    end.

%% Whether the connection {Node, Conn} is subscribed to Topic (the same).
-spec member(binary(), {node(), non_neg_integer()}) -> boolean().
member(Topic, {Node, Conn}) ->
    try ets:member(?MEMBERS, {Topic, Node, Conn})
    catch error:badarg -> false
    end.

%% Every topic held somewhere, sorted.
-spec topics() -> [binary()].
topics() ->
    try lists:usort(ets:select(?BY_TOPIC, [{{{'$1', '_'}, '_'}, [], ['$1']}]))
    catch error:badarg -> []
    end.

%%% Writes (the presence server)

handle(Node, topics, L) when is_list(L) ->
    [put(Node, T, N) || {T, N} <- L, is_binary(T), is_integer(N), N >= 0], ok;
handle(Node, topics_gone, L) when is_list(L) ->
    [drop(Node, T) || T <- L, is_binary(T)], ok;
handle(Node, topic_snapshot, L) when is_list(L) ->
    ets:delete(?AWAY, Node),
    drop_topics(Node),
    handle(Node, topics, L);
handle(Node, topic_snapshot_more, L) ->
    handle(Node, topics, L);
handle(Node, topic_members, L) when is_list(L) ->
    drop_members(Node),
    handle(Node, topic_joins, L);
handle(Node, topic_members_more, L) ->
    handle(Node, topic_joins, L);
handle(Node, topic_joins, L) when is_list(L) ->
    [begin
         ets:insert(?MEMBERS, {{T, Node, C}, U}),
         ets:insert(?MEMBERS_BY_NODE, {{Node, T, C}})
     end || {T, U, C} <- L, is_binary(T)],
    ok;
handle(Node, topic_leaves, L) when is_list(L) ->
    [begin
         ets:delete(?MEMBERS, {T, Node, C}),
         ets:delete(?MEMBERS_BY_NODE, {Node, T, C})
     end || {T, _U, C} <- L],
    ok;
handle(_Node, _Event, _Arg) ->
    ok.

%% Node's link is gone: none of its subscriptions holds; its topics stay,
%% with no stream, for its topic_linger when it takes numbered topic
%% messages (see the top of this module), else they go too.
node_down(Node) ->
    drop_members(Node),
    case numbered(Node) andalso linger_ms(Node) of
        Ms when is_integer(Ms), Ms > 0 ->
            [ets:insert(?BY_TOPIC, {{T, Node}, 0})
             || T <- ets:select(?BY_NODE, [{{{Node, '$1'}}, [], ['$1']}])],
            ets:insert(?AWAY, {Node, erlang:monotonic_time(millisecond) + Ms});
        _ -> drop_topics(Node)
    end.

%% How long Node keeps a topic no stream holds (its hello's topic_linger,
%% else its history's TTL).
linger_ms(Node) ->
    case httpdcnode_presence:node_info(Node) of
        {_, #{topic_linger := S}} when is_integer(S) -> 1000 * S;
        {TtlMs, _} when is_integer(TtlMs) -> TtlMs;
        _ -> 0
    end.

put(Node, T, N) ->
    ets:insert(?BY_TOPIC, {{T, Node}, N}),
    ets:insert(?BY_NODE, {{Node, T}}),
    ets:info(?HELD, size) > 0 andalso release(T, Node).

drop(Node, T) ->
    ets:delete(?BY_TOPIC, {T, Node}),
    ets:delete(?BY_NODE, {Node, T}).

drop_topics(Node) ->
    Ts = ets:select(?BY_NODE, [{{{Node, '$1'}}, [], ['$1']}]),
    [ets:delete(?BY_TOPIC, {T, Node}) || T <- Ts],
    ets:select_delete(?BY_NODE, [{{{Node, '_'}}, [], [true]}]),
    ok.

drop_members(Node) ->
    Ms = ets:select(?MEMBERS_BY_NODE, [{{{Node, '$1', '$2'}}, [], [{{'$1', '$2'}}]}]),
    [ets:delete(?MEMBERS, {T, Node, C}) || {T, C} <- Ms],
    ets:select_delete(?MEMBERS_BY_NODE, [{{{Node, '_', '_'}}, [], [true]}]),
    ok.
