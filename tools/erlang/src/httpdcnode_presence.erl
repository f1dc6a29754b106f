%% Presence server: which C-node holds which uid, and which C-nodes exist.
%%
%% Registered as `httpdcnode_presence', the name C-nodes are started with
%% (`--presence httpdcnode_presence'). C-nodes report:
%%   {httpdcnode, Node, up, Uid | [Uid]}     uid(s) got their first stream on Node
%%   {httpdcnode, Node, down, Uid | [Uid]}   uid(s) lost their last stream on Node
%%   {httpdcnode, Node, snapshot, [Uid]}     everything Node holds now (replaces)
%%   {httpdcnode, Node, hello}               Node announces itself (no uids implied)
%% A C-node that disconnects (nodedown) loses all its uids.
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
-export([online/1, online_uids/1, nodes/0, count/0, add_node/1, resync/0, sync/0]).
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
%% ms for epmd to say whether a hidden node is published.
-define(EPMD_TIMEOUT, 5000).

-record(state, {configured = [] :: [node()]}).

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
    ok = net_kernel:monitor_nodes(true, [{node_type, all}]),
    [begin
         ets:insert(?NODES, {N, true}),
         %% Async connect: a C-node that is up reports a snapshot on reconnect.
         spawn(fun() -> net_kernel:connect_node(N) end)
     end || N <- Configured],
    [ets:insert(?NODES, {N, false}) || N <- recall_learned(), not lists:member(N, Configured)],
    request_snapshots(),
    {ok, #state{configured = Configured}}.

handle_call({add_node, Node}, _From, State) ->
    learn(Node, State),
    {reply, ok, State};
handle_call(resync, _From, State) ->
    request_snapshots(),
    {reply, ok, State};
handle_call(sync, _From, State) ->
    {reply, ok, State};
handle_call(_Other, _From, State) ->
    {reply, {error, unknown_call}, State}.

handle_cast(_Msg, State) ->
    {noreply, State}.

handle_info({httpdcnode, Node, Event, Arg}, State) when is_atom(Node) ->
    known(Node, Event, State),
    presence(Node, Event, Arg),
    {noreply, State};
handle_info({httpdcnode, Node, hello}, State) when is_atom(Node) ->
    known(Node, hello, State),
    {noreply, State};
handle_info({nodeup, Node, _Info}, State) ->
    %% Configured C-nodes are known as soon as they connect; others once
    %% they report (a plain hidden node such as a remote shell is not a C-node).
    case is_configured(Node, State) of
        true -> ets:insert(?NODES, {Node, true});
        false -> ok
    end,
    {noreply, State};
handle_info({nodedown, Node, _Info}, State) ->
    drop_node_uids(Node),
    case is_configured(Node, State) of
        true -> ok;
        false -> forget(Node)
    end,
    {noreply, State};
handle_info(_Other, State) ->
    {noreply, State}.

terminate(_Reason, _State) ->
    ok.

%%% Internal

%% Asks the known C-nodes, and the other connected hidden nodes if they
%% are published (see the top of this module).
request_snapshots() ->
    Known = nodes(),
    [ask_snapshot(self(), N) || N <- Known],
    Self = self(),
    %% One process per node: epmd on another host may be slow to answer.
    [spawn(fun() -> published(N) andalso ask_snapshot(Self, N) end)
     || N <- erlang:nodes(hidden) -- Known],
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
            Event =:= snapshot orelse ask_snapshot(self(), Node),
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

presence(Node, up, Uids) when is_list(Uids) ->
    [add(Node, U) || U <- Uids, is_uid(U)], ok;
presence(Node, up, Uid) ->
    is_uid(Uid) andalso add(Node, Uid), ok;
presence(Node, down, Uids) when is_list(Uids) ->
    [remove(Node, U) || U <- Uids], ok;
presence(Node, down, Uid) ->
    remove(Node, Uid), ok;
presence(Node, snapshot, Uids) when is_list(Uids) ->
    drop_node_uids(Node),
    [add(Node, U) || U <- Uids, is_uid(U)], ok;
presence(_Node, _Event, _Arg) ->
    ok.

is_uid(U) -> is_integer(U) andalso U > 0.

add(Node, Uid) ->
    %% The by-node row tells whether the pair exists, so the bag never gets
    %% a duplicate and a repeated `up' is harmless.
    case ets:insert_new(?BY_NODE, {{Node, Uid}}) of
        true -> ets:insert(?UIDS, {Uid, Node});
        false -> true
    end.

remove(Node, Uid) ->
    ets:delete(?BY_NODE, {Node, Uid}),
    ets:delete_object(?UIDS, {Uid, Node}).

drop_node_uids(Node) ->
    [ets:delete_object(?UIDS, {U, Node}) || U <- online_uids(Node)],
    ets:select_delete(?BY_NODE, [{{{Node, '_'}}, [], [true]}]),
    ok.
