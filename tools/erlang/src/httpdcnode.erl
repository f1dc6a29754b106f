%% SPDX-License-Identifier: Apache-2.0
%% Public API: push messages to users connected to httpdcnode C-nodes.
%%
%% Call these on a node running the httpdcnode application: a master the
%% C-nodes were started with (`--master', one or several), which routes with
%% its own presence, or a node of role client, which forwards each call to a
%% master (httpdcnode_client). A uid is a positive integer; a
%% message is a non-empty binary or iolist, or a list of Unicode characters
%% (sent as UTF-8) when it holds any character above 255. Untagged, it
%% reaches the browser as text when it is valid UTF-8, else as binary;
%% {binary, Data} makes it binary whatever its bytes (a WebSocket binary
%% frame, an SSE base64 event, long-poll's data_base64: bytes in the
%% browser client), {text, Data} text (badarg unless valid UTF-8).
-module(httpdcnode).
-compile({no_auto_import, [nodes/0]}).

-export([start/0, stop/0]).
-export([send/2, send_sync/2, send_sync/3,
         multicast/2, multicast_sync/2, multicast_sync/3,
         broadcast/1, kick/1,
         online/1, online_uids/1, nodes/0, stats/0, stats/1, app_stats/0]).
-export([reply/2, reply_sync/2, reply_sync/3]).
-export([publish/2, publish_sync/2, publish_sync/3, subscribe/2, unsubscribe/2,
         subscribe_sync/2, subscribe_sync/3, topic_count/1, topic_nodes/1, topic_members/1,
         topics/0]).
-export([token/2, token_url/3]).
-export([to_binary/1, to_wire/1, group_by_node/2]).
-export([relay_sync/3, peers/0, push_topic/3]).
-export_type([uid/0, msg/0, conn/0, topic/0]).

-define(TIMEOUT, 5000).

-type uid() :: pos_integer().
-type msg() :: binary() | iolist() | string() | {binary, iodata()} | {text, unicode:chardata()}.
%% One client connection: its C-node and its id there (from the inbox's
%% handle_in, httpdcnode_handler). An id names one stream of one run of
%% that C-node, never one of a later run; 0 names none (a POST /send/N
%% without ?conn=): a reply to it is counted there (conn_dropped).
-type conn() :: {node(), non_neg_integer()}.
%% A topic: 1 to 64 bytes of A-Z a-z 0-9 _ - . : / ("room:lobby"), as a
%% binary, a string or an atom (taken as its name); anything else is badarg.
-type topic() :: binary() | string() | atom().

%% Starts the application and everything it needs (mnesia included).
start() ->
    case application:ensure_all_started(httpdcnode) of
        {ok, _} -> ok;
        Error -> Error
    end.

stop() ->
    application:stop(httpdcnode).

%% Sends Msg to the one connection Conn only (a WebSocket frame), not kept
%% for resumes. Async; a Conn closed meanwhile, of an earlier run of its
%% C-node, or 0 is counted on its C-node (conn_dropped). Msg may be empty
%% (an empty frame or SSE event; counted in conn_empty_dropped on a
%% chunked stream, which cannot carry it).
-spec reply(conn(), msg() | <<>>) -> ok.
reply({CNode, Id}, Msg) when is_atom(CNode), is_integer(Id), Id >= 0 ->
    {any, CNode} ! {conn, Id, wire(Msg, true)},
    ok.

%% Like reply/2, but waits: {ok, 1} when written, {ok, 0} when Conn is
%% closed or unknown, or the message empty for a chunked stream (or the
%% C-node did not answer within Timeout ms).
-spec reply_sync(conn(), msg() | <<>>) -> {ok, 0 | 1}.
reply_sync(Conn, Msg) ->
    reply_sync(Conn, Msg, ?TIMEOUT).

reply_sync({CNode, Id}, Msg, Timeout) when is_atom(CNode), is_integer(Id), Id >= 0 ->
    Ref = make_ref(),
    {any, CNode} ! {self(), Ref, conn, Id, wire(Msg, true)},
    receive {Ref, N} -> {ok, N}
    after Timeout -> {ok, 0}
    end.

%% Sends Msg to every stream of Uid, on whichever C-nodes hold it. Async.
%% A uid offline now goes to the C-node it was last on while that node keeps
%% its history (httpdcnode_presence, "Last seen"): the C-node gives the
%% message the uid's next id and keeps it for the resuming client. A uid
%% not known (never seen, or gone for longer) may be connecting now: the
%% message waits for it a moment (httpdcnode_presence, held messages),
%% then is dropped and counted (stats/0: app).
-spec send(uid(), msg()) -> ok.
send(Uid, Msg) when is_integer(Uid), Uid > 0 ->
    Bin = to_wire(Msg),
    case client() of
        true -> httpdcnode_client:cast(?MODULE, send, [Uid, Bin]);
        false ->
            case httpdcnode_presence:route(Uid) of
                {online, Nodes} -> [push(N, {Uid, Bin}, 0) || N <- Nodes];
                {offline, N} -> push(N, {Uid, Bin}, 1);
                none -> httpdcnode_presence:hold([Uid], Bin)
            end,
            ok
    end.

%% Like send/2, but waits for the C-nodes: N = connections written to.
%% A C-node that does not answer within Timeout ms counts as 0. A uid
%% offline now answers {ok, 0} (no stream written) although its last
%% C-node kept the message for its resume.
-spec send_sync(uid(), msg()) -> {ok, non_neg_integer()}.
send_sync(Uid, Msg) ->
    send_sync(Uid, Msg, ?TIMEOUT).

send_sync(Uid, Msg, Timeout) when is_integer(Uid), Uid > 0 ->
    Bin = to_wire(Msg),
    case client() of
        true -> httpdcnode_client:call(?MODULE, send_sync, [Uid, Bin, Timeout], Timeout);
        false ->
            case httpdcnode_presence:route(Uid) of
                {online, Nodes} -> sync([{N, Uid} || N <- Nodes], #{}, Bin, Timeout);
                {offline, N} -> sync([{N, Uid}], #{N => 1}, Bin, Timeout);
                none -> httpdcnode_presence:hold([Uid], Bin), {ok, 0}
            end
    end.

%% Sends Msg to every uid of Uids, online or offline for a moment (as
%% send/2): one Erlang message per C-node.
-spec multicast([uid()], msg()) -> ok.
multicast(Uids, Msg) when is_list(Uids) ->
    Bin = to_wire(Msg),
    case client() of
        true -> httpdcnode_client:cast(?MODULE, multicast, [Uids, Bin]);
        false ->
            {Groups, Offline} = plan(Uids, Bin),
            [push(N, {Us, Bin}, maps:get(N, Offline, 0)) || {N, Us} <- Groups],
            ok
    end.

%% Like multicast/2 but acknowledged: N = connections written to, summed
%% (an offline uid counts 0, its message kept as with send_sync/2).
-spec multicast_sync([uid()], msg()) -> {ok, non_neg_integer()}.
multicast_sync(Uids, Msg) ->
    multicast_sync(Uids, Msg, ?TIMEOUT).

multicast_sync(Uids, Msg, Timeout) when is_list(Uids) ->
    Bin = to_wire(Msg),
    case client() of
        true -> httpdcnode_client:call(?MODULE, multicast_sync, [Uids, Bin, Timeout], Timeout);
        false ->
            {Groups, Offline} = plan(Uids, Bin),
            sync(Groups, Offline, Bin, Timeout)
    end.

%% Sends Msg to every stream on every known C-node.
-spec broadcast(msg()) -> ok.
broadcast(Msg) ->
    Bin = to_wire(Msg),
    case client() of
        true -> httpdcnode_client:cast(?MODULE, broadcast, [Bin]);
        false ->
            [{any, N} ! {broadcast, Bin} || N <- nodes()],
            ok
    end.

%% Ends every stream of Uid (the client sees the terminating chunk).
-spec kick(uid()) -> ok.
kick(Uid) when is_integer(Uid), Uid > 0 ->
    case client() of
        true -> httpdcnode_client:cast(?MODULE, kick, [Uid]);
        false ->
            [{any, N} ! {kick, Uid} || N <- online(Uid)],
            ok
    end.

%% C-nodes holding Uid now, as last reported.
-spec online(uid()) -> [node()].
online(Uid) ->
    case client() of
        true -> httpdcnode_client:call(?MODULE, online, [Uid], ?TIMEOUT);
        false -> httpdcnode_presence:online(Uid)
    end.

%% Uids held by the C-node Node, ascending.
-spec online_uids(node()) -> [uid()].
online_uids(Node) ->
    case client() of
        true -> httpdcnode_client:call(?MODULE, online_uids, [Node], ?TIMEOUT);
        false -> httpdcnode_presence:online_uids(Node)
    end.

%% Known C-nodes.
-spec nodes() -> [node()].
nodes() ->
    case client() of
        true -> httpdcnode_client:call(?MODULE, nodes, [], ?TIMEOUT);
        false -> httpdcnode_presence:nodes()
    end.

%% Counters of every known C-node; a node that does not answer in time maps
%% to {error, timeout}, one whose connection went down to {error, nodedown}.
%% The key `app' holds this application's own: routed_offline (messages for
%% offline uids sent to their last C-node), dropped_offline (for uids never
%% seen, seen too long ago, or whose last C-node is not connected),
%% relayed_offline, held_sent and held_entries (messages that waited for a
%% uid not known yet: went, held now), online_by_message,
%% last_seen_entries and last_seen_bytes (the table now), last_seen_evicted
%% (by its cap) and last_seen_expired (by its sweep); subscription_merges,
%% subscription_merged_pairs, subscription_tombstones, tombstones_expired
%% and subscription_tables_replaced (httpdcnode_subs_heal); topic_unheld (published to a topic no C-node
%% held, nor reported within hold_ms) and topic_held_sent (held until
%% one did). On a client node, the master's.
-spec stats() -> #{node() | app => map() | {error, timeout | nodedown}}.
stats() ->
    stats(?TIMEOUT).

stats(Timeout) ->
    case client() of
        true -> httpdcnode_client:call(?MODULE, stats, [Timeout], Timeout);
        false ->
            Nodes = nodes(),
            Replies = collect(fun(Pid, Ref, N) -> {any, N} ! {Pid, Ref, stats} end,
                              Nodes, Timeout),
            (maps:from_list([{N, maps:get(N, Replies, {error, timeout})} || N <- Nodes]))
                #{app => app_stats()}
    end.

%% The application's counters alone (no C-node asked).
-spec app_stats() -> map().
app_stats() ->
    #{entries := E, bytes := B} = httpdcnode_presence:last_seen_info(),
    maps:merge((httpdcnode_presence:counter_values())#{
                 last_seen_entries => E, last_seen_bytes => B,
                 held_entries => httpdcnode_presence:held_count(),
                 subscription_tombstones => httpdcnode_subs:tombstones()},
               httpdcnode_outq:info()).

%% A subscriber token for C-nodes started with --auth-secret-file: the query
%% string <<"exp=...&sig=...">> that lets Uid open a stream for TtlSeconds
%% from now. The secret is the application env auth_secret or
%% auth_secret_file; errors raise {httpdcnode_token, Reason} (see
%% httpdcnode_token).
-spec token(uid(), pos_integer()) -> binary().
token(Uid, TtlSeconds) ->
    httpdcnode_token:token(Uid, TtlSeconds).

%% The same as a whole URL: token_url("http://host:8000", 5, 60) ->
%% <<"http://host:8000/test/5?exp=...&sig=...">>.
-spec token_url(iodata(), uid(), pos_integer()) -> binary().
token_url(BaseUrl, Uid, TtlSeconds) ->
    httpdcnode_token:token_url(BaseUrl, Uid, TtlSeconds).

%%% Topics

%% Sends Msg to every stream subscribed to Topic: one Erlang message to
%% each C-node that holds the topic (as its topic presence says), which
%% gives it the topic's next id there, keeps it in the topic's history and
%% writes it to the topic's streams. Async. Numbered as send/2's messages
%% are (push_topic/3): nothing lost without its clients told a gap. A
%% topic held nowhere may be joined right now (its presence on its way):
%% the message waits a moment for it (httpdcnode_topics, held messages),
%% then is dropped and counted (stats/0, app, topic_unheld); a C-node
%% whose last stream left the topic holds it for its history's TTL and
%% keeps what comes for the clients coming back, and so does one whose
%% link went down (httpdcnode_topics:node_down/1).
-spec publish(topic(), msg()) -> ok.
publish(Topic, Msg) ->
    T = topic(Topic),
    Bin = to_wire(Msg),
    case client() of
        true -> httpdcnode_client:cast(?MODULE, publish, [T, Bin]);
        false ->
            case httpdcnode_topics:nodes(T) of
                [] -> httpdcnode_topics:hold(T, Bin);
                Nodes -> [push_topic(N, T, Bin) || N <- Nodes]
            end,
            ok
    end.

%% Topic's message Bin for Node: numbered when the node takes numbered
%% topic messages (its hello's topic_seq; httpdcnode_outq: kept until
%% acknowledged, sent on the link, through another master, or once the
%% node is back), else as it is.
push_topic(Node, Topic, Bin) ->
    Msg = {topic, Topic, Bin},
    case httpdcnode_topics:numbered(Node) andalso
        httpdcnode_outq:send(Node, Msg, httpdcnode_outq:size_of(Msg), 0) of
        true -> ok;
        false -> {any, Node} ! Msg, ok
    end.

%% Like publish/2, but waits for the C-nodes: N = streams written to (a
%% C-node that does not answer within Timeout ms counts 0).
-spec publish_sync(topic(), msg()) -> {ok, non_neg_integer()}.
publish_sync(Topic, Msg) ->
    publish_sync(Topic, Msg, ?TIMEOUT).

publish_sync(Topic, Msg, Timeout) ->
    T = topic(Topic),
    Bin = to_wire(Msg),
    case client() of
        true -> httpdcnode_client:call(?MODULE, publish_sync, [T, Bin, Timeout], Timeout);
        false ->
            case httpdcnode_topics:nodes(T) of
                [] -> httpdcnode_topics:hold(T, Bin), {ok, 0};
                Nodes -> sync([{N, {topic, T}} || N <- Nodes], #{}, Bin, Timeout)
            end
    end.

%% The connection Conn joins Topic (live from now), whatever its token or
%% the handler would say: the application's word. Its client is told
%% (SSE: the event joined; ws+meta: event: joined). Async; a bound of its
%% C-node may refuse it (told to the client, counted there).
-spec subscribe(conn(), topic()) -> ok.
subscribe({CNode, Id}, Topic) when is_atom(CNode), is_integer(Id), Id >= 0 ->
    {any, CNode} ! {subscribe, Id, topic(Topic)},
    ok.

%% Conn leaves Topic (its client is told: left).
-spec unsubscribe(conn(), topic()) -> ok.
unsubscribe({CNode, Id}, Topic) when is_atom(CNode), is_integer(Id), Id >= 0 ->
    {any, CNode} ! {unsubscribe, Id, topic(Topic)},
    ok.

%% subscribe/2, waiting: ok, or {error, refused} when Conn is not open on
%% its C-node or a bound refused it (or no answer came within Timeout).
-spec subscribe_sync(conn(), topic()) -> ok | {error, refused}.
subscribe_sync(Conn, Topic) ->
    subscribe_sync(Conn, Topic, ?TIMEOUT).

subscribe_sync({CNode, Id}, Topic, Timeout) when is_atom(CNode), is_integer(Id), Id >= 0 ->
    T = topic(Topic),
    Ref = make_ref(),
    {any, CNode} ! {self(), Ref, subscribe, Id, T},
    receive {Ref, 1} -> ok;
            {Ref, _} -> {error, refused}
    after Timeout -> {error, refused}
    end.

%% Streams subscribed to Topic on every C-node, as their topic presence
%% last told (a window, 50 to 800 ms, behind).
-spec topic_count(topic()) -> non_neg_integer().
topic_count(Topic) ->
    case client() of
        true -> httpdcnode_client:call(?MODULE, topic_count, [Topic], ?TIMEOUT);
        false -> httpdcnode_topics:count(topic(Topic))
    end.

%% [{Node, Streams}] holding Topic (Streams 0: it lingers there for its
%% clients' resumes).
-spec topic_nodes(topic()) -> [{node(), non_neg_integer()}].
topic_nodes(Topic) ->
    case client() of
        true -> httpdcnode_client:call(?MODULE, topic_nodes, [Topic], ?TIMEOUT);
        false -> httpdcnode_topics:node_counts(topic(Topic))
    end.

%% [{Uid, Conn}] subscribed to Topic: needs the C-nodes' --presence-topics
%% (without it, []).
-spec topic_members(topic()) -> [{uid(), conn()}].
topic_members(Topic) ->
    case client() of
        true -> httpdcnode_client:call(?MODULE, topic_members, [Topic], ?TIMEOUT);
        false -> httpdcnode_topics:members(topic(Topic))
    end.

%% Every topic held on some C-node.
-spec topics() -> [binary()].
topics() ->
    case client() of
        true -> httpdcnode_client:call(?MODULE, topics, [], ?TIMEOUT);
        false -> httpdcnode_topics:topics()
    end.

%% Topic as the C-nodes take it; badarg when it is no topic name.
topic(T) when is_atom(T) -> topic(atom_to_binary(T, utf8));
topic(T) when is_list(T) ->
    case catch iolist_to_binary(T) of
        B when is_binary(B) -> topic(B);
        _ -> error(badarg, [T])
    end;
topic(T) ->
    case httpdcnode_topics:valid(T) of
        true -> T;
        false -> error(badarg, [T])
    end.

%%% Building blocks (exported for tests and for httpdcnode_router)

%% Message as the binary the C-nodes take (the data of a tagged one:
%% to_wire/1). Raises badarg for an empty or malformed message.
-spec to_binary(binary() | iolist() | string()) -> binary().
to_binary(Msg) ->
    case any_binary(Msg) of
        <<>> -> error(badarg, [Msg]);
        Bin -> Bin
    end.

%% The same, empty or not (a reply may be empty).
any_binary(Msg) when is_binary(Msg) ->
    Msg;
any_binary(Msg) when is_list(Msg) ->
    try iolist_to_binary(Msg)
    catch error:badarg -> chars_to_binary(Msg)
    end;
any_binary(Msg) ->
    error(badarg, [Msg]).

%% Message as the C-nodes take it: a binary, or {binary | text, Binary} for
%% a tagged one. {text, Data} takes Data as Unicode characters (chardata:
%% binaries in UTF-8, integers code points) and raises badarg unless it is
%% valid and not empty (the C-node would drop text that is not UTF-8: a
%% text frame must be); otherwise badarg as to_binary/1.
-spec to_wire(msg()) -> binary() | {binary | text, binary()}.
to_wire(Msg) ->
    wire(Msg, false).

%% to_wire/1, the message empty or not as MayBeEmpty says (a reply may be).
wire({binary, Data}, MayBeEmpty) ->
    {binary, data(Data, MayBeEmpty)};
wire({text, Data}, MayBeEmpty) ->
    case catch unicode:characters_to_binary(Data) of
        Bin when is_binary(Bin), MayBeEmpty orelse Bin =/= <<>> -> {text, Bin};
        _ -> error(badarg, [{text, Data}])
    end;
wire(Msg, MayBeEmpty) ->
    data(Msg, MayBeEmpty).

data(Msg, true) -> any_binary(Msg);
data(Msg, false) -> to_binary(Msg).

chars_to_binary(Chars) ->
    case unicode:characters_to_binary(Chars) of
        B when is_binary(B) -> B;
        _ -> error(badarg, [Chars])
    end.

%% Groups uids by the C-nodes holding them: [{Node, [Uid]}], each uid once per
%% node, in the order given; offline uids are left out.
-spec group_by_node([uid()], fun((uid()) -> [node()])) -> [{node(), [uid()]}].
group_by_node(Uids, OnlineFun) ->
    Map = lists:foldl(
            fun(U, Acc) ->
                    lists:foldl(fun(N, A) -> maps:update_with(N, fun(L) -> [U | L] end, [U], A) end,
                                Acc, OnlineFun(U))
            end, #{}, lists:usort(Uids)),
    lists:sort([{N, lists:reverse(Us)} || {N, Us} <- maps:to_list(Map)]).

%%% Internal

client() ->
    httpdcnode_client:is_client().

count(Name, N) ->
    httpdcnode_presence:count_event(Name, N).

%% Msg ({Uid | [Uid], Data}) for Node, K of its uids offline: numbered
%% when the node takes it (httpdcnode_outq: kept until acknowledged, sent
%% on the link, through another master, or once the node is back), else
%% as it is.
push(Node, Msg, K) ->
    case httpdcnode_outq:send(Node, Msg, httpdcnode_outq:size_of(Msg), K) of
        true -> ok;
        false when K =:= 0 -> {any, Node} ! Msg;
        false -> send_offline(Node, Msg, K)
    end.

%% An offline uid's message to its last node: never a new connection (a
%% node gone for good would cost a connection attempt per message).
%% Not linked to it (the link between this master and the node was cut,
%% the node lives on): another master that is linked delivers it.
send_offline(Node, Msg, K) ->
    case erlang:send({any, Node}, Msg, [noconnect]) of
        noconnect -> relay(Node, Msg, K);
        _ -> count(routed_offline, K)
    end.

%% The other masters (application env masters) this node is connected to.
-spec peers() -> [node()].
peers() ->
    Connected = erlang:nodes(connected),
    [M || M <- application:get_env(httpdcnode, masters, []), M =/= node(),
          lists:member(M, Connected)].

%% Msg for K offline uids on Node, handed to a peer master's presence
%% server, which sends it if it is linked to Node (and counts it there);
%% with no peer it is dropped and counted here.
relay(Node, Msg, K) ->
    case peers() of
        [] -> count(dropped_offline, K);
        [P | _] ->
            erlang:send({httpdcnode_presence, P}, {httpdcnode_relay, Node, Msg, K}, [noconnect]),
            count(relayed_offline, K)
    end.

%% The acknowledged sends of groups {Node, Target}, Target Uid | [Uid] or
%% {topic, Topic} (Offline: how many of each group's uids are offline):
%% each numbered when its node takes it (kept until acknowledged); those
%% this master may send now on the link are sent and acknowledged here,
%% the others through another master (relayed_sync/3), else, numbered,
%% kept for the node's return ({ok, 0} for them), or dropped and counted.
sync(Groups, Offline, Bin, Timeout) ->
    Connected = erlang:nodes(connected),
    Planned = [{N, T, reserve(N, T, Bin)} || {N, T} <- Groups],
    {Here, Away} = lists:partition(
                     fun({_, _, {_, Way}}) -> Way =:= direct;
                        ({N, _, none}) -> lists:member(N, Connected)
                     end, Planned),
    count(routed_offline, offline_in(Here, Offline)),
    {ok, A} = acked(Here, Bin, Timeout),
    {ok, B} = relayed_sync(Away, Offline, Bin, Timeout),
    {ok, A + B}.

offline_in(Planned, Offline) ->
    lists:sum([maps:get(N, Offline, 0) || {N, _, _} <- Planned]).

%% The acknowledged form of relay/3 for groups {Node, Uid | [Uid], Num}
%% this master may not send now: a peer master sends them and counts the
%% connections written to (Num: the number this master gave it, which it
%% keeps for its node, counted in held_for_down_node, or none). With no
%% peer, one not numbered is dropped and its offline uids counted.
relayed_sync([], _Offline, _Bin, _Timeout) ->
    {ok, 0};
relayed_sync(Planned, Offline, Bin, Timeout) ->
    Inc = httpdcnode_outq:inc(),
    Groups = [case Num of
                  none -> {N, T};
                  {Seq, _} -> {N, T, {node(), Inc, Seq}}
              end || {N, T, Num} <- Planned],
    count(held_for_down_node, length([G || G = {_, _, {_, _}} <- Planned])),
    try peers() of
        [] ->
            count(dropped_offline, offline_in([G || G = {_, _, none} <- Planned], Offline)),
            {ok, 0};
        [P | _] ->
            count(relayed_offline, offline_in(Planned, Offline)),
            erpc:call(P, ?MODULE, relay_sync, [Groups, Bin, Timeout], Timeout + 1000)
    catch
        _:_ -> {ok, 0}
    end.

%% On a peer master, for relayed_sync/4: the groups whose node it is
%% linked to are sent (numbered by the master that asked, {Origin, Inc,
%% Seq}, when it did) and acknowledged; the others are dropped, counted
%% (a numbered one is still kept by its master).
relay_sync(Groups, Bin, Timeout) ->
    Connected = erlang:nodes(connected),
    {Here, Gone} = lists:partition(fun(G) -> lists:member(element(1, G), Connected) end, Groups),
    count(routed_offline, uids_in(Here)),
    count(dropped_offline, uids_in([G || G = {_, _} <- Gone])),
    acked([case G of
               {N, T} -> {N, T, none};
               {N, T, Num} -> {N, T, {relayed, Num}}
           end || G <- Here], Bin, Timeout).

uids_in(Groups) ->
    lists:sum([case element(2, G) of
                   L when is_list(L) -> length(L);
                   {topic, _} -> 0;
                   _ -> 1
               end || G <- Groups]).

%% Target's message Bin numbered for Node (httpdcnode_outq:reserve/3), or
%% none when the node does not take it numbered.
reserve(Node, {topic, _} = Target, Bin) ->
    case httpdcnode_topics:numbered(Node) of
        true -> reserve_inner(Node, inner(Target, Bin));
        false -> none
    end;
reserve(Node, Target, Bin) ->
    reserve_inner(Node, inner(Target, Bin)).

reserve_inner(Node, Inner) ->
    httpdcnode_outq:reserve(Node, Inner, httpdcnode_outq:size_of(Inner)).

%% The message to Target as it is kept, and as it is sent with {Pid, Ref}.
inner({topic, Topic}, Bin) -> {topic, Topic, Bin};
inner(Target, Bin) -> {Target, Bin}.

inner(Pid, Ref, {topic, Topic}, Bin) -> {Pid, Ref, topic, Topic, Bin};
inner(Pid, Ref, Target, Bin) -> {Pid, Ref, Target, Bin}.

%% Uids grouped by where their message goes ([{Node, [Uid]}] as
%% group_by_node/2), and how many of each group are offline uids routed to
%% their last node; Bin is held for the uids with nowhere to go yet.
plan(Uids, Bin) ->
    {Map, Offline, None} =
        lists:foldl(
          fun(U, {M, Off, D}) ->
                  case httpdcnode_presence:route(U) of
                      {online, Ns} -> {lists:foldl(fun(N, A) -> prepend(N, U, A) end, M, Ns),
                                       Off, D};
                      {offline, N} -> {prepend(N, U, M),
                                       maps:update_with(N, fun(K) -> K + 1 end, 1, Off), D};
                      none -> {M, Off, [U | D]}
                  end
          end, {#{}, #{}, []}, lists:usort(Uids)),
    httpdcnode_presence:hold(lists:reverse(None), Bin),
    {lists:sort([{N, lists:reverse(Us)} || {N, Us} <- maps:to_list(Map)]), Offline}.

prepend(N, U, Map) ->
    maps:update_with(N, fun(L) -> [U | L] end, [U], Map).

%% Acknowledged delivery of {Pid, Ref, Uid | [Uid], Bin} to each {Node,
%% Target, Num}, numbered as Num says (none: not; {Seq, _}: by this
%% master; {relayed, {Origin, Inc, Seq}}: by the master that asked); sums
%% the {Ref, N} replies.
acked([], _Bin, _Timeout) ->
    {ok, 0};
acked(Targets, Bin, Timeout) ->
    Map = maps:from_list([{N, {T, Num}} || {N, T, Num} <- Targets]),
    Replies = collect(fun(Pid, Ref, N) ->
                              {T, Num} = maps:get(N, Map),
                              {any, N} ! numbered(Num, inner(Pid, Ref, T, Bin))
                      end, maps:keys(Map), Timeout),
    {ok, lists:sum([C || C <- maps:values(Replies), is_integer(C)])}.

numbered(none, Inner) -> Inner;
numbered({relayed, {Origin, Inc, Seq}}, Inner) -> {httpdcnode_seq, Origin, Inc, Seq, Inner};
numbered({Seq, _}, Inner) -> httpdcnode_outq:wire(Seq, Inner).

%% Sends one request per node from a short-lived process and collects the
%% {Ref, Reply} answers until all came, a node went down, or Timeout passed.
%% The process ends afterwards, so late answers never reach the caller.
collect(_SendFun, [], _Timeout) ->
    #{};
collect(SendFun, Nodes, Timeout) ->
    {Pid, MRef} = spawn_monitor(
                    fun() ->
                            Self = self(),
                            Pending = maps:from_list(
                                        [begin
                                             monitor_node(N, true),
                                             Ref = make_ref(),
                                             SendFun(Self, Ref, N),
                                             {Ref, N}
                                         end || N <- Nodes]),
                            Deadline = erlang:monotonic_time(millisecond) + Timeout,
                            exit({replies, gather(Pending, #{}, Deadline)})
                    end),
    receive
        {'DOWN', MRef, process, Pid, {replies, Replies}} -> Replies;
        {'DOWN', MRef, process, Pid, Reason} -> error(Reason)
    end.

gather(Pending, Acc, _Deadline) when map_size(Pending) =:= 0 ->
    Acc;
gather(Pending, Acc, Deadline) ->
    Left = max(0, Deadline - erlang:monotonic_time(millisecond)),
    receive
        {Ref, Reply} when is_map_key(Ref, Pending) ->
            {N, Pending1} = maps:take(Ref, Pending),
            gather(Pending1, Acc#{N => Reply}, Deadline);
        {nodedown, Node} ->
            {Down, Up} = maps:fold(fun(R, N, {D, U}) when N =:= Node -> {[N | D], maps:remove(R, U)};
                                      (_, _, DU) -> DU
                                   end, {[], Pending}, Pending),
            gather(Up, maps:merge(Acc, maps:from_list([{N, {error, nodedown}} || N <- Down])), Deadline)
    after Left ->
            Acc
    end.
