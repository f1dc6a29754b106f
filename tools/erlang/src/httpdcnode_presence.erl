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
%% On start (first start, restart after a crash, or the master node coming
%% back while C-nodes were already connected to it) the server asks every
%% connected hidden node for a snapshot with {Pid, Ref, snapshot}: C-nodes
%% answer with a fresh snapshot, plain Erlang nodes drop the message (no
%% process is registered as `any' there).
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

%% Asks every known C-node and every connected hidden node for a snapshot.
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
    request_snapshots(erlang:nodes(hidden)),
    {ok, #state{configured = Configured}}.

handle_call({add_node, Node}, _From, State) ->
    ets:insert(?NODES, {Node, is_configured(Node, State)}),
    {reply, ok, State};
handle_call(resync, _From, State) ->
    request_snapshots(lists:usort(nodes() ++ erlang:nodes(hidden))),
    {reply, ok, State};
handle_call(sync, _From, State) ->
    {reply, ok, State};
handle_call(_Other, _From, State) ->
    {reply, {error, unknown_call}, State}.

handle_cast(_Msg, State) ->
    {noreply, State}.

handle_info({httpdcnode, Node, Event, Arg}, State) when is_atom(Node) ->
    known(Node, State),
    presence(Node, Event, Arg),
    {noreply, State};
handle_info({httpdcnode, Node, hello}, State) when is_atom(Node) ->
    known(Node, State),
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
        false -> ets:delete(?NODES, Node)
    end,
    {noreply, State};
handle_info(_Other, State) ->
    {noreply, State}.

terminate(_Reason, _State) ->
    ok.

%%% Internal

%% The replies ({Ref, N}) land in handle_info's catch-all; the snapshots
%% themselves arrive as presence messages.
request_snapshots(Nodes) ->
    [erlang:send({any, N}, {self(), make_ref(), snapshot}, [noconnect]) || N <- Nodes],
    ok.

is_configured(Node, #state{configured = C}) ->
    lists:member(Node, C).

known(Node, State) ->
    case ets:member(?NODES, Node) of
        true -> ok;
        false -> ets:insert(?NODES, {Node, is_configured(Node, State)})
    end.

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
