%% SPDX-License-Identifier: Apache-2.0
%% Presence server: which C-node holds which uid, and which C-nodes exist.
%%
%% Registered as `httpdcnode_presence', the name C-nodes are started with
%% (`--presence httpdcnode_presence'). C-nodes report:
%%   {httpdcnode, Node, up, Uid | [Uid]}     uid(s) got their first stream on Node
%%   {httpdcnode, Node, down, Uid | [Uid]}   uid(s) lost their last stream on Node
%%   {httpdcnode, Node, snapshot, [Uid]}     everything Node holds now (replaces)
%%   {httpdcnode, Node, snapshot_more, [Uid]} the rest of a large snapshot (adds)
%%   {httpdcnode, Node, hello}               Node announces itself (no uids implied)
%%   {httpdcnode, Node, hello, #{history_ttl => S, history => N, epoch => E,
%%                               max_users => M}}  the same, with how long
%%                                           Node keeps an offline uid's messages
%%   {httpdcnode, Node, conn_up, Uid, Conn, Transport, Peer} and
%%   {httpdcnode, Node, conn_down, Uid, Conn, Reason}   (--presence-conns)
%%                                           one connection opened / ended: no
%%                                           part of presence; passed on to the
%%                                           process of application env
%%                                           conn_events (a name or pid) if
%%                                           set, else ignored
%%   {httpdcnode, Node, topics | topics_gone | topic_snapshot | ..., ...}
%%                                           topic presence: handed to
%%                                           httpdcnode_topics, which says what
%%                                           each means (its tables are this
%%                                           server's)
%% A C-node that disconnects (nodedown) loses all its uids and topic
%% subscribers (its topics may stay for a while: httpdcnode_topics).
%%
%% A uid's first stream is told at once, ahead of anything its client sends
%% on the same link; but this server and the inbox are two processes, and a
%% C-node sends no change to a master that waits for its snapshot. So the
%% inbox calls ensure_online(Node, Uid) before it handles a client message:
%% an ETS read when Node's up for Uid was handled; else a call here,
%% handled after every report that came before the message, which marks
%% Uid online on Node if it still is not. Such a mark is provisional: an
%% up or a snapshot of Node with Uid confirms it; without one within
%% ?PROVISIONAL_MS it goes as a down would (the stream had ended before
%% the message was handled, and its down was handled first).
%%
%% Held messages: a message for a uid this master does not know (never
%% seen, or gone longer than its last-seen entry lasts) may be for a client
%% that connected a moment ago, whose up is still on its way (a storm's ups
%% wait for the presence window, 800 ms at most). httpdcnode holds it
%% (hold/2): kept up to env hold_ms (1000), sent to the uid's node when it
%% comes online here, else dropped and counted (dropped_offline). At most
%% env hold_max (100000) are held; past it a message is dropped at once
%% (hold_ms 0: all are).
%% The callers write the table themselves (no round trip here); this
%% server sends what waited when it learns the uid, and sweeps the expired
%% every ?HOLD_SWEEP_MS.
%%
%% Offline notices: when uids go offline everywhere (as a down, a snapshot
%% without them, a nodedown or an unconfirmed mark leaves them),
%% {httpdcnode, offline, [Uid]} goes to the process of application env
%% offline_events (a name or pid), by default the name of env inbox (its
%% handlers' handle_offline/2, httpdcnode_handler), if registered.
%%
%% Last seen: a uid that goes offline (its last stream on its last node
%% closed, a snapshot without it, its node's link went down) is remembered
%% with that node for as long as the node keeps its history (the hello's
%% history_ttl; application env last_seen_ttl, 120 s, for a node that sent
%% no hello; nothing when it keeps no history). httpdcnode routes a message
%% for an offline uid there: the C-node gives it the uid's next id and keeps
%% it, so the client gets it when it resumes. Coming online anywhere
%% removes the entry (the next offline moment writes the new node). Two
%% tables hold it: uid -> {node, expiry} and {expiry, uid} in order, so that
%% the oldest entry is the first key: the cap (env last_seen_max, 1000000
%% entries) evicts it in O(log n), and the sweep (every last_seen_sweep_ms,
%% 10000) walks only the expired ones. About 150 bytes per uid on a 64-bit
%% VM, both rows (cluster_reliability_tests measures 152.5 at 20000 entries).
%%
%% A C-node sends a snapshot whenever it (re)connects to the master; one
%% that connected while this server was not running sent it to a name
%% nobody held. So on start (first start, restart after a crash, or the
%% master node coming back) and on resync/0 the server asks C-nodes for a
%% snapshot with {Pid, Ref, snapshot}. Never every hidden node: erl_call and
%% other programs that only connect out take the first message they get
%% for the answer they wait for. Asked are:
%%   - the known C-nodes: configured (application env `cnodes'), or learned
%%     (they reported) and still connected; the learned ones are kept in a
%%     table the supervisor owns, so they outlive a crash of this server;
%%   - the other connected hidden nodes that are published in epmd: a C-node
%%     always publishes its name, a client like erl_call never does, and a
%%     published Erlang or Java node drops a message to the unregistered
%%     name `any'. This finds C-nodes that connected before the application
%%     started;
%%   - a node not known yet whose first report is not a snapshot (its
%%     snapshot was lost).
%%
%% The tables are public-read (protected, named) so callers of online/1 and
%% friends read them directly, without a round trip through this process.
-module(httpdcnode_presence).
-compile({no_auto_import, [nodes/0]}).
-behaviour(gen_server).

-export([start_link/0, start_link/1, stop/0]).
-export([online/1, online_uids/1, nodes/0, count/0, add_node/1, resync/0, sync/0,
         each_cnode/1]).
-export([ensure_online/2, hold/2, held_count/0, table_size/1]).
-export([route/1, last_seen/1, node_info/1, last_seen_info/0, sweep/0,
         create_tables/1, counters/0, count_event/2, counter_values/0]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).

-define(SERVER, ?MODULE).
%% uid -> node, a bag: one row per (uid, node) pair.
-define(UIDS, httpdcnode_presence_uids).
%% {node, uid}, ordered so one node's uids are one contiguous key range.
-define(BY_NODE, httpdcnode_presence_by_node).
%% node -> configured (true) or learned (false).
-define(NODES, httpdcnode_presence_nodes).
%% {node}: learned C-nodes, in a table of httpdcnode_sup (absent when this
%% server runs without it).
-define(LEARNED, httpdcnode_presence_learned).
%% uid -> {Uid, Node, ExpiresMs}: where an offline uid was last (monotonic ms).
-define(LAST, httpdcnode_presence_last).
%% {{ExpiresMs, Uid}}, ordered: oldest first, for the cap and the sweep.
-define(LAST_T, httpdcnode_presence_last_t).
%% node -> {Node, HistoryTtlMs, Hello}: what the node's hello said.
-define(INFO, httpdcnode_presence_info).
%% {Uid, Seq, ExpiresMs, Bin}: messages held for uids not known yet.
-define(HELD, httpdcnode_presence_held).
%% The application's counters (a counters ref in persistent_term).
-define(COUNTERS, {httpdcnode, counters}).
-define(COUNTER_NAMES, [routed_offline, dropped_offline, relayed_offline, last_seen_evicted,
                        last_seen_expired, online_by_message, held_sent,
                        subscription_merges, subscription_merged_pairs, tombstones_expired,
                        subscription_tables_replaced, held_for_down_node, held_dropped, gap_in_doubt, resent,
                        topic_unheld, topic_held_sent]).
%% What a C-node reports of its topics (httpdcnode_topics).
-define(TOPIC_EVENT(E), (E =:= topics orelse E =:= topics_gone orelse E =:= topic_snapshot
                         orelse E =:= topic_snapshot_more orelse E =:= topic_members
                         orelse E =:= topic_members_more orelse E =:= topic_joins
                         orelse E =:= topic_leaves)).
%% Expired entries removed per sweep step; the next step follows at once.
-define(SWEEP_BATCH, 10000).
%% ms for epmd to say whether a hidden node is published.
-define(EPMD_TIMEOUT, 5000).
%% ms a uid marked online by a client message waits for its node's up or
%% snapshot (a snapshot asked for on reconnect or repair comes within
%% about a second).
-define(PROVISIONAL_MS, 5000).
%% ms ensure_online/2 waits for this server.
-define(ENSURE_TIMEOUT, 5000).
%% ms between two sweeps of the held messages.
-define(HOLD_SWEEP_MS, 250).

-record(state, {configured = [] :: [node()],
                default_ttl_ms = 120000 :: non_neg_integer(),
                max_last = 1000000 :: non_neg_integer(),
                sweep_ms = 10000 :: pos_integer(),
                %% {Node, Uid} marked online by a client message => its timer
                provisional = #{} :: #{{node(), pos_integer()} => reference()}}).

%%% API

start_link() ->
    start_link(application:get_env(httpdcnode, cnodes, [])).

%% Configured is a list of C-node names known before they connect; they are
%% pinged at start so that broadcast reaches them even before they report.
start_link(Configured) when is_list(Configured) ->
    gen_server:start_link({local, ?SERVER}, ?MODULE, Configured, []).

stop() ->
    gen_server:stop(?SERVER).

%% C-nodes that currently hold Uid.
-spec online(pos_integer()) -> [node()].
online(Uid) ->
    try ets:lookup_element(?UIDS, Uid, 2)
    catch error:badarg -> []
    end.

%% Uids currently held by Node, ascending.
-spec online_uids(node()) -> [pos_integer()].
online_uids(Node) ->
    ets:select(?BY_NODE, [{{{Node, '$1'}}, [], ['$1']}]).

%% Known C-nodes, sorted.
-spec nodes() -> [node()].
nodes() ->
    lists:sort(ets:select(?NODES, [{{'$1', '_'}, [], ['$1']}])).

%% Number of distinct (uid, node) pairs.
-spec count() -> non_neg_integer().
count() ->
    ets:info(?BY_NODE, size).

%% Uid sent a client message through a stream on Node (the inbox calls
%% this before its handler): from now on this master routes Uid to Node,
%% also if Node's up for it was not handled yet (see the top of this
%% module). An ETS read when it was; else a call to this server (at most
%% ?ENSURE_TIMEOUT ms). A no-op on a node without this server.
-spec ensure_online(node(), pos_integer()) -> ok.
ensure_online(Node, Uid) ->
    try ets:member(?BY_NODE, {Node, Uid}) of
        true -> ok;
        false ->
            catch gen_server:call(?SERVER, {ensure_online, Node, Uid}, ?ENSURE_TIMEOUT),
            ok
    catch error:badarg -> ok
    end.

%% Bin for each of Uids, none of which this master knows now: held until
%% the uid comes online here (see the top of this module). Runs in the
%% caller.
-spec hold([pos_integer()], binary()) -> ok.
hold([], _Bin) ->
    ok;
hold(Uids, Bin) ->
    hold(Uids, Bin, env(hold_ms, 1000), env(hold_max, 100000)).

hold(Uids, _Bin, HoldMs, Max) when HoldMs =< 0; Max =< 0 ->
    count_event(dropped_offline, length(Uids));
hold(Uids, Bin, HoldMs, Max) ->
    case ets:info(?HELD, size) of
        undefined -> count_event(dropped_offline, length(Uids));     % no table here
        Size ->
            {Held, Over} = take_n(max(0, Max - Size), Uids, []),
            %% one sequence number for all: a uid has one entry per call
            Seq = erlang:unique_integer([monotonic]),
            Exp = now_ms() + HoldMs,
            ets:insert(?HELD, [{U, Seq, Exp, Bin} || U <- Held]),
            count_event(dropped_offline, Over),
            %% One that came online meanwhile may have been looked for here
            %% before its message was held: sent now (each held once: take).
            [release_held(U, online(U)) || U <- Held, ets:member(?UIDS, U)],
            ok
    end.

%% The first N of Uids, and how many are left over.
take_n(_N, [], Acc) -> {Acc, 0};
take_n(0, Rest, Acc) -> {Acc, length(Rest)};
take_n(N, [U | Rest], Acc) -> take_n(N - 1, Rest, [U | Acc]).

%% Messages held now.
-spec held_count() -> non_neg_integer().
held_count() -> table_size(?HELD).

%% Rows of the ETS table Tab, 0 when it is not there (yet).
-spec table_size(atom()) -> non_neg_integer().
table_size(Tab) ->
    case ets:info(Tab, size) of
        N when is_integer(N) -> N;
        undefined -> 0
    end.

%% What was held for Uid, to Nodes, in the order it was sent.
release_held(Uid, Nodes) ->
    case ets:take(?HELD, Uid) of
        [] -> ok;
        Held ->
            [[send_held(N, {Uid, Bin}) || N <- Nodes] || {_, _, _, Bin} <- lists:keysort(2, Held)],
            count_event(held_sent, length(Held))
    end.

%% Numbered, kept until acknowledged, when the node takes it (httpdcnode_outq).
send_held(Node, Msg) ->
    httpdcnode_outq:send(Node, Msg, httpdcnode_outq:size_of(Msg), 0) orelse
        erlang:send({any, Node}, Msg, [noconnect]).

%% Where a message for Uid goes: the nodes holding it, else the node it was
%% last on while that node keeps its history, else nowhere.
-spec route(pos_integer()) -> {online, [node(), ...]} | {offline, node()} | none.
route(Uid) ->
    case online(Uid) of
        [] ->
            case last_seen(Uid) of
                none -> none;
                Node -> {offline, Node}
            end;
        Nodes -> {online, Nodes}
    end.

%% The node an offline Uid was last on, if its entry has not expired.
-spec last_seen(pos_integer()) -> node() | none.
last_seen(Uid) ->
    try ets:lookup(?LAST, Uid) of
        [{_, Node, Exp}] ->
            case Exp > now_ms() of
                true -> Node;
                false -> none
            end;
        [] -> none
    catch error:badarg -> none
    end.

%% What Node's hello said (#{} for none), and the history TTL used for it.
-spec node_info(node()) -> {non_neg_integer() | default, map()}.
node_info(Node) ->
    try ets:lookup(?INFO, Node) of
        [{_, TtlMs, Hello}] -> {TtlMs, Hello};
        [] -> {default, #{}}
    catch error:badarg -> {default, #{}}
    end.

%% Entries and bytes of the last-seen tables (both).
-spec last_seen_info() -> #{entries := non_neg_integer(), bytes := non_neg_integer()}.
last_seen_info() ->
    W = erlang:system_info(wordsize),
    case {ets:info(?LAST, size), ets:info(?LAST, memory), ets:info(?LAST_T, memory)} of
        {N, M1, M2} when is_integer(N) -> #{entries => N, bytes => (M1 + M2) * W};
        _ -> #{entries => 0, bytes => 0}
    end.

%% Removes the expired last-seen entries now; returns how many.
sweep() ->
    gen_server:call(?SERVER, sweep, infinity).

%% The application's counters: routed_offline (messages for offline uids
%% sent to their last node), dropped_offline (for a uid never seen, expired,
%% or whose last node no master is linked to), relayed_offline (handed to
%% another master, linked to the node), last_seen_evicted (by the cap),
%% last_seen_expired (by the sweep), online_by_message (uids marked online
%% by a client message before their node's up was handled), held_sent
%% (messages for a uid not known yet that waited for it, then went); and
%% httpdcnode_subs_heal's: subscription_merges (sides of a partition merged),
%% subscription_merged_pairs (pairs they changed), tombstones_expired,
%% subscription_tables_replaced (tables made apart given up for the others').
-spec counter_values() -> #{atom() => non_neg_integer()}.
counter_values() ->
    case counters() of
        undefined -> maps:from_list([{K, 0} || K <- ?COUNTER_NAMES]);
        C -> maps:from_list([{K, counters:get(C, I)}
                             || {I, K} <- lists:zip(lists:seq(1, length(?COUNTER_NAMES)),
                                                    ?COUNTER_NAMES)])
    end.

counters() ->
    persistent_term:get(?COUNTERS, undefined).

count_event(_Name, 0) -> ok;
count_event(Name, N) ->
    case counters() of
        undefined -> ok;
        C -> counters:add(C, index(Name, ?COUNTER_NAMES, 1), N)
    end.

index(K, [K | _], I) -> I;
index(K, [_ | T], I) -> index(K, T, I + 1).

%% The last-seen and hello tables, and the counters, for Access public
%% (made by httpdcnode_sup, so that they outlive a crash of this server) or
%% protected (this server alone). Those that exist already are kept.
create_tables(Access) ->
    [ets:whereis(T) =:= undefined andalso ets:new(T, [Type, Access, named_table | Opts])
     || {T, Type, Opts} <- [{?LAST, set, [{read_concurrency, true}]},
                            {?LAST_T, ordered_set, []},
                            {?INFO, set, [{read_concurrency, true}]}]],
    %% written by every caller of hold/2
    ets:whereis(?HELD) =:= undefined andalso
        ets:new(?HELD, [duplicate_bag, public, named_table, {write_concurrency, true}]),
    counters() =:= undefined andalso
        persistent_term:put(?COUNTERS, counters:new(length(?COUNTER_NAMES), [write_concurrency])),
    ok.

%% Adds Node to the known C-nodes without it having reported yet.
add_node(Node) when is_atom(Node) ->
    gen_server:call(?SERVER, {add_node, Node}).

%% Asks the known C-nodes, and the connected hidden nodes published in
%% epmd, for a snapshot.
resync() ->
    gen_server:call(?SERVER, resync).

%% Returns once every message sent to the server before the call is handled.
sync() ->
    gen_server:call(?SERVER, sync).

%%% gen_server

init(Configured) ->
    ets:new(?UIDS, [bag, protected, named_table, {read_concurrency, true}]),
    ets:new(?BY_NODE, [ordered_set, protected, named_table]),
    ets:new(?NODES, [set, protected, named_table, {read_concurrency, true}]),
    httpdcnode_topics:create_tables(),
    ok = net_kernel:monitor_nodes(true, [{node_type, all}]),
    [begin
         ets:insert(?NODES, {N, true}),
         %% Async connect: a C-node that is up reports a snapshot on reconnect.
         spawn(fun() -> net_kernel:connect_node(N) end)
     end || N <- Configured],
    [ets:insert(?NODES, {N, false}) || N <- recall_learned(), not lists:member(N, Configured)],
    create_tables(protected),
    request_snapshots(),
    State = #state{configured = Configured,
                   default_ttl_ms = 1000 * env(last_seen_ttl, 120),
                   max_last = env(last_seen_max, 1000000),
                   sweep_ms = max(1, env(last_seen_sweep_ms, 10000))},
    erlang:send_after(State#state.sweep_ms, self(), sweep),
    erlang:send_after(?HOLD_SWEEP_MS, self(), hold_sweep),
    {ok, State}.

env(K, Default) ->
    application:get_env(httpdcnode, K, Default).

handle_call({add_node, Node}, _From, State) ->
    learn(Node, State),
    {reply, ok, State};
handle_call(resync, _From, State) ->
    request_snapshots(),
    {reply, ok, State};
handle_call(sync, _From, State) ->
    {reply, ok, State};
handle_call({ensure_online, Node, Uid}, _From, State) when is_atom(Node) ->
    {reply, ok, mark_online(Node, Uid, State)};
handle_call(sweep, _From, State) ->
    {reply, sweep_all(now_ms(), 0), State};
handle_call(_Other, _From, State) ->
    {reply, {error, unknown_call}, State}.

handle_cast(_Msg, State) ->
    {noreply, State}.

handle_info({httpdcnode, Node, hello, Hello}, State) when is_atom(Node), is_map(Hello) ->
    known(Node, hello, State),
    ets:insert(?INFO, {Node, hello_ttl_ms(Hello, State), Hello}),
    %% its numbered stream goes on (httpdcnode_outq), before its snapshot
    %% makes its uids online
    catch erlang:send(httpdcnode_outq, {hello, Node, Hello}, [noconnect]),
    {noreply, State};
handle_info({httpdcnode, _Node, conn_up, _Uid, _Conn, _Transport, _Peer} = Msg, State) ->
    conn_event(Msg),
    {noreply, State};
handle_info({httpdcnode, _Node, conn_down, _Uid, _Conn, _Reason} = Msg, State) ->
    conn_event(Msg),
    {noreply, State};
handle_info({httpdcnode, Node, Event, Arg}, State) when is_atom(Node), ?TOPIC_EVENT(Event) ->
    known(Node, Event, State),
    httpdcnode_topics:handle(Node, Event, Arg),
    {noreply, State};
handle_info({httpdcnode, Node, Event, Arg}, State) when is_atom(Node) ->
    known(Node, Event, State),
    State1 = settle(Node, Event, Arg, State),
    presence(Node, Event, Arg, State1),
    {noreply, State1};
handle_info({httpdcnode, Node, hello}, State) when is_atom(Node) ->
    known(Node, hello, State),
    {noreply, State};
handle_info(sweep, State) ->
    case sweep_batch(now_ms(), ?SWEEP_BATCH) of
        done -> erlang:send_after(State#state.sweep_ms, self(), sweep);
        more -> self() ! sweep
    end,
    {noreply, State};
handle_info(hold_sweep, State) ->
    %% What waited too long for its uid is dropped.
    Now = now_ms(),
    N = ets:info(?HELD, size) > 0 andalso
        ets:select_delete(?HELD, [{{'_', '_', '$1', '_'}, [{'<', '$1', Now}], [true]}]),
    is_integer(N) andalso count_event(dropped_offline, N),
    httpdcnode_topics:sweep_held(Now),
    httpdcnode_topics:sweep_away(Now),
    erlang:send_after(?HOLD_SWEEP_MS, self(), hold_sweep),
    {noreply, State};
handle_info({nodeup, Node, _Info}, State) ->
    %% Configured C-nodes are known as soon as they connect; others once
    %% they report (a plain hidden node such as a remote shell is not a C-node).
    case is_configured(Node, State) of
        true -> ets:insert(?NODES, {Node, true});
        false -> ok
    end,
    {noreply, State};
handle_info({nodedown, Node, _Info}, State0) ->
    %% Its link may come back with its history (the C-node did not die):
    %% its uids are remembered there meanwhile.
    State = settle(Node, snapshot, [], State0),
    went_offline(drop_node_uids(Node), Node, State),
    httpdcnode_topics:node_down(Node),
    %% which run of the node is behind its next link, only its hello says
    %% (relayed/2)
    case ets:lookup(?INFO, Node) of
        [{_, TtlMs, Hello}] -> ets:insert(?INFO, {Node, TtlMs, maps:remove(instance, Hello)});
        [] -> ok
    end,
    case is_configured(Node, State) of
        true -> ok;
        false -> forget(Node)
    end,
    {noreply, State};
handle_info({timeout, TRef, {provisional, Key = {Node, Uid}}}, State = #state{provisional = P}) ->
    %% No up nor snapshot confirmed it: gone as a down would.
    case P of
        #{Key := TRef} ->
            State1 = State#state{provisional = maps:remove(Key, P)},
            remove(Node, Uid, State1),
            {noreply, State1};
        _ -> {noreply, State}
    end;
handle_info({httpdcnode_relay, Node, Msg, K}, State) when is_integer(K) ->
    %% Another master is not linked to Node: sent from here if this one is.
    case erlang:send({any, Node}, Msg, [noconnect]) of
        noconnect -> count_event(dropped_offline, K);
        _ -> count_event(routed_offline, K), relayed(Node, Msg)
    end,
    {noreply, State};
handle_info(_Other, State) ->
    {noreply, State}.

terminate(_Reason, _State) ->
    ok.

%%% Internal

%% Another master's numbered message went on to Node: it is told which
%% run of the node has it (its httpdcnode_outq then knows that run may
%% have applied it).
relayed(Node, {httpdcnode_seq, Origin, Inc, Seq, Inner}) when is_atom(Origin) ->
    Last = httpdcnode_outq:last_of(Seq, Inner),
    {_, Hello} = node_info(Node),
    erlang:send({httpdcnode_outq, Origin},
                {httpdcnode_relayed, Node, maps:get(instance, Hello, undefined), Inc, Last},
                [noconnect]),
    ok;
relayed(_Node, _Msg) ->
    ok.

%% A connection's event to whoever asked (application env conn_events); a
%% name nobody holds drops it.
conn_event(Msg) ->
    case application:get_env(httpdcnode, conn_events) of
        {ok, Dest} when is_pid(Dest); is_atom(Dest) ->
            catch erlang:send(Dest, Msg, [noconnect]),
            ok;
        _ -> ok
    end.

%% Asks the known C-nodes, and the other connected hidden nodes if they
%% are published (see the top of this module).
request_snapshots() ->
    Self = self(),
    each_cnode(fun(N) -> ask_snapshot(Self, N) end).

%% Fun(Node) for each C-node this node may be linked to, and never for a
%% program like erl_call: the known C-nodes now (none when this server
%% does not run), the other connected hidden nodes once epmd says they are
%% published, each in a process of its own (epmd on another host may be
%% slow to answer). Fun must send with noconnect.
-spec each_cnode(fun((node()) -> term())) -> ok.
each_cnode(Fun) ->
    Known = try nodes() catch error:badarg -> [] end,
    [Fun(N) || N <- Known],
    [spawn(fun() -> published(N) andalso Fun(N) end) || N <- erlang:nodes(hidden) -- Known],
    ok.

%% The reply ({Ref, N}) lands in handle_info's catch-all; the snapshot
%% itself arrives as presence messages.
ask_snapshot(Server, Node) ->
    erlang:send({any, Node}, {Server, make_ref(), snapshot}, [noconnect]).

%% Whether Node's name is registered in epmd on its host.
published(Node) ->
    [Name, Host] = string:split(atom_to_list(Node), "@"),
    Epmd = net_kernel:epmd_module(),
    case Epmd:port_please(Name, Host, ?EPMD_TIMEOUT) of
        {port, _, _} -> true;
        _ -> false
    end.

is_configured(Node, #state{configured = C}) ->
    lists:member(Node, C).

known(Node, Event, State) ->
    case ets:member(?NODES, Node) of
        true -> ok;
        false ->
            learn(Node, State),
            %% a hello comes right before the snapshot, a snapshot_more
            %% and the topics' right after it
            lists:member(Event, [snapshot, snapshot_more, hello, topic_snapshot,
                                 topic_snapshot_more, topic_members, topic_members_more])
                orelse ask_snapshot(self(), Node),
            ok
    end.

learn(Node, State) ->
    Configured = is_configured(Node, State),
    ets:insert(?NODES, {Node, Configured}),
    Configured orelse learned_table() =:= undefined orelse ets:insert(?LEARNED, {Node}),
    ok.

forget(Node) ->
    ets:delete(?NODES, Node),
    learned_table() =:= undefined orelse ets:delete(?LEARNED, Node),
    ok.

%% Learned C-nodes that are still connected; the others went while this
%% server was not running and are dropped.
recall_learned() ->
    case learned_table() of
        undefined -> [];
        _ ->
            Connected = erlang:nodes(hidden),
            [ets:delete(?LEARNED, N) || {N} <- ets:tab2list(?LEARNED),
                                        not lists:member(N, Connected)],
            [N || {N} <- ets:tab2list(?LEARNED)]
    end.

learned_table() ->
    ets:whereis(?LEARNED).

presence(Node, Up, Uids, _State) when is_list(Uids), (Up =:= up orelse Up =:= snapshot_more) ->
    [add(Node, U) || U <- Uids, is_uid(U)], ok;
presence(Node, up, Uid, _State) ->
    is_uid(Uid) andalso add(Node, Uid), ok;
presence(Node, down, Uids, State) when is_list(Uids) ->
    %% one went_offline (one offline notice) for the whole message
    went_offline([U || U <- Uids, unpair(Node, U)], Node, State);
presence(Node, down, Uid, State) ->
    remove(Node, Uid, State), ok;
presence(Node, snapshot, Uids, State) when is_list(Uids) ->
    Old = drop_node_uids(Node),
    [add(Node, U) || U <- Uids, is_uid(U)],
    %% those it no longer holds went offline there
    went_offline(Old, Node, State);
presence(_Node, _Event, _Arg, _State) ->
    ok.

is_uid(U) -> is_integer(U) andalso U > 0.

%% Uid online on Node unless it is already (ensure_online/2): a
%% provisional mark, until Node's up or snapshot settles it.
mark_online(Node, Uid, State = #state{provisional = P}) ->
    case is_uid(Uid) andalso not ets:member(?BY_NODE, {Node, Uid}) of
        true ->
            known(Node, ensure_online, State),
            add(Node, Uid),
            count_event(online_by_message, 1),
            TRef = erlang:start_timer(?PROVISIONAL_MS, self(), {provisional, {Node, Uid}}),
            State#state{provisional = P#{{Node, Uid} => TRef}};
        false -> State
    end.

%% What Node reports settles its provisional marks: an up or a down of a
%% uid its own; a snapshot (also a nodedown, as an empty one) all of
%% Node's (the snapshot says what holds; snapshot_more adds back).
settle(_Node, _Event, _Arg, State = #state{provisional = P}) when map_size(P) =:= 0 ->
    State;
settle(Node, snapshot, _Arg, State = #state{provisional = P}) ->
    {Gone, Kept} = maps:fold(fun({N, _}, T, {G, Kp}) when N =:= Node -> {[T | G], Kp};
                                (K, T, {G, Kp}) -> {G, Kp#{K => T}}
                             end, {[], #{}}, P),
    [erlang:cancel_timer(T) || T <- Gone],
    State#state{provisional = Kept};
settle(Node, Event, Arg, State = #state{provisional = P}) when Event =:= up; Event =:= down ->
    Uids = if is_list(Arg) -> Arg; true -> [Arg] end,
    P1 = lists:foldl(fun(U, Acc) ->
                             case maps:take({Node, U}, Acc) of
                                 {T, Acc1} -> erlang:cancel_timer(T), Acc1;
                                 error -> Acc
                             end
                     end, P, Uids),
    State#state{provisional = P1};
settle(_Node, _Event, _Arg, State) ->
    State.

add(Node, Uid) ->
    %% The by-node row tells whether the pair exists, so the bag never gets
    %% a duplicate and a repeated `up' is harmless.
    case ets:insert_new(?BY_NODE, {{Node, Uid}}) of
        true ->
            %% what waited for it first: a send that finds it online
            %% from now on comes after
            ets:info(?HELD, size) > 0 andalso release_held(Uid, [Node]),
            ets:insert(?UIDS, {Uid, Node}),
            forget_last(Uid);
        false -> true
    end.

remove(Node, Uid, State) ->
    went_offline([Uid || unpair(Node, Uid)], Node, State).

%% Node holds Uid no more: true when it did.
unpair(Node, Uid) ->
    case ets:member(?BY_NODE, {Node, Uid}) of
        true ->
            ets:delete(?BY_NODE, {Node, Uid}),
            ets:delete_object(?UIDS, {Uid, Node}),
            true;
        false -> false
    end.

%% Returns the uids Node held.
drop_node_uids(Node) ->
    Uids = online_uids(Node),
    [ets:delete_object(?UIDS, {U, Node}) || U <- Uids],
    ets:select_delete(?BY_NODE, [{{{Node, '_'}}, [], [true]}]),
    Uids.

%%% Last seen

%% Uids that Node no longer holds: those held nowhere else now are
%% remembered with Node.
went_offline(Uids, Node, State) ->
    Offline = [U || U <- Uids, not ets:member(?UIDS, U)],
    tell_offline(Offline),
    case ttl_ms(Node, State) of
        %% it keeps no history, or the table may hold nothing
        TtlMs when TtlMs =:= 0; State#state.max_last =:= 0 ->
            [forget_last(U) || U <- Offline];
        TtlMs ->
            Exp = now_ms() + TtlMs,
            [note_last(U, Node, Exp, State) || U <- Offline]
    end,
    ok.

%% {httpdcnode, offline, Uids} to who wants it (see the top of this module).
tell_offline([]) ->
    ok;
tell_offline(Uids) ->
    Dest = case application:get_env(httpdcnode, offline_events) of
               {ok, D} -> D;
               undefined ->
                   case application:get_env(httpdcnode, inbox) of
                       {ok, T} when is_tuple(T), tuple_size(T) >= 3 -> element(1, T);
                       _ -> undefined
                   end
           end,
    if is_pid(Dest); is_atom(Dest), Dest =/= undefined ->
            catch erlang:send(Dest, {httpdcnode, offline, Uids}, [noconnect]),
            ok;
       true -> ok
    end.

note_last(Uid, Node, Exp, State) ->
    case ets:lookup(?LAST, Uid) of
        [{_, _, Old}] -> ets:delete(?LAST_T, {Old, Uid});
        [] -> make_room(State)
    end,
    ets:insert(?LAST, {Uid, Node, Exp}),
    ets:insert(?LAST_T, {{Exp, Uid}}).

%% At the cap, the oldest entry goes.
make_room(#state{max_last = Max}) ->
    case ets:info(?LAST, size) >= Max of
        true ->
            case ets:first(?LAST_T) of
                '$end_of_table' -> ok;
                {_, U} = K ->
                    ets:delete(?LAST_T, K),
                    ets:delete(?LAST, U),
                    count_event(last_seen_evicted, 1)
            end;
        false -> ok
    end.

forget_last(Uid) ->
    case ets:lookup(?LAST, Uid) of
        [{_, _, Exp}] ->
            ets:delete(?LAST_T, {Exp, Uid}),
            ets:delete(?LAST, Uid);
        [] -> true
    end.

ttl_ms(Node, #state{default_ttl_ms = D}) ->
    case ets:lookup(?INFO, Node) of
        [{_, TtlMs, _}] -> TtlMs;
        [] -> D
    end.

%% A node that keeps no history (history => 0) keeps nothing to resume.
hello_ttl_ms(#{history := 0}, _State) -> 0;
hello_ttl_ms(#{history_ttl := S}, _State) when is_integer(S), S >= 0 -> 1000 * S;
hello_ttl_ms(_, #state{default_ttl_ms = D}) -> D.

%% Removes up to Budget expired entries, oldest first: the walk stops at
%% the first one still valid.
sweep_batch(_Now, 0) -> more;
sweep_batch(Now, Budget) ->
    case ets:first(?LAST_T) of
        {Exp, U} = K when Exp =< Now ->
            ets:delete(?LAST_T, K),
            ets:delete(?LAST, U),
            count_event(last_seen_expired, 1),
            sweep_batch(Now, Budget - 1);
        _ -> done
    end.

sweep_all(Now, N) ->
    case sweep_batch(Now, 1) of
        more -> sweep_all(Now, N + 1);
        done -> N
    end.

now_ms() ->
    erlang:monotonic_time(millisecond).
