%% SPDX-License-Identifier: Apache-2.0
%% What this master sends each C-node, numbered and kept until the node
%% acknowledges it, so that nothing is lost without the client being told.
%%
%% Each master numbers its own stream to each C-node that says so in its
%% hello (seq => 1): {httpdcnode_seq, Master, Inc, Seq, Inner}, Inc this
%% master's run (drawn when the tables are made), Seq 1, 2, 3, ... per
%% node. The caller numbers and sends (httpdcnode:send/2 and friends, in
%% their own process: one update_counter on the node's row, one insert of
%% the copy, no hop through a server), the C-node applies each number once
%% and in order, and acknowledges in batches ({httpdcnode_ack, Node, Master,
%% Inc, Seq}, or {httpdcnode_ack_via, ...} through another master) to this
%% server, which deletes what is acknowledged.
%%
%% The node's row says where its messages go now (the gate):
%%   direct - on this master's link;
%%   relay  - this master is not linked to it (or heard no acknowledgement
%%            for ack_timeout_ms): through another master of env masters,
%%            which passes the numbered message on;
%%   hold   - no way now: kept.
%% When the node's link comes back (its hello) the gate is held while what
%% it did not acknowledge is sent again, in order, then opened: kept
%% messages go before live traffic, and the C-node drops what it had
%% (seq_duplicates). A hello from another run of the node (it restarted:
%% it kept nothing of this stream) gives up what was sent to the old run
%% and not acknowledged (it may have been delivered, or not): a gap for its
%% uids and topics takes its place ({httpdcnode_gap, Last, Uids}, or
%% {httpdcnode_gap, Last, Uids, Topics} when topics lost some) when the node kept
%% its epoch, nothing more when it has a new one (its clients are told that
%% epoch's gap); then what was kept while it was down is sent, and gets ids
%% there.
%%
%% Bounded per node: what is not acknowledged is kept at most
%% unacked_max_bytes (64 MiB) and unacked_max_ms (30 s); past that the
%% oldest go (held_dropped) and a gap for their uids and topics takes their
%% place. A message is {Uid | [Uid], Data} or {topic, Topic, Data}.
%%
%% Tables (made by httpdcnode_sup, public, so that they outlive a crash of
%% this server): ?STREAMS, per node {Node, Seq, Cum, Gate, Released}: the
%% last number given, the bytes numbered so far, the gate, the bytes
%% acknowledged or dropped so far; ?MSGS, {{Node, Seq}, Inner, Cum}: each
%% copy, ordered. A node's row stays once made (its numbers must go on).
-module(httpdcnode_outq).
-behaviour(gen_server).

-export([start_link/0, create_tables/1]).
-export([send/4, reserve/3, wire/2, inc/0, size_of/1, last_of/2, info/0]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).

-define(SERVER, ?MODULE).
-define(STREAMS, httpdcnode_outq_streams).
-define(MSGS, httpdcnode_outq_msgs).
-define(INC, {httpdcnode, outq_inc}).
-define(MAX, {httpdcnode, outq_max_bytes}).
-define(HOLD, 0).
-define(DIRECT, 1).
-define(RELAY, 2).
%% ms between two looks at every stream (pumps, bounds, timeouts).
-define(TICK_MS, 100).
%% Uids and topics in one gap message at most; more make another.
-define(GAP_UIDS_MAX, 100000).
-define(GAP_TOPICS_MAX, 1000).

-record(n, {instance :: term(),          % the node's run, from its hello
            epoch :: term(),             % its history's epoch, from its hello
            linked = false :: boolean(),     % its hello came since its link went up
            acked = 0 :: non_neg_integer(),
            sent = 0 :: non_neg_integer(),   % numbers maybe sent to its run
            %% sending kept copies again on the link: from the first
            %% number, up to the last (infinity: the gate is still held)
            pump = none :: none | {non_neg_integer(), non_neg_integer() | infinity},
            progress_ms = 0 :: integer(),    % last acknowledgement that moved on
            retry_ms = 0 :: non_neg_integer(),   % wait before sending again, 0: ack_ms
            probe_ms = 0 :: integer(),
            samples = queue:new() :: queue:queue({integer(), non_neg_integer()}),
            peer = 0 :: non_neg_integer()}).

-record(st, {inc :: pos_integer(),
             max_bytes :: non_neg_integer(),
             max_ms :: non_neg_integer(),
             ack_ms :: pos_integer(),
             nodes = #{} :: #{node() => #n{}}}).

%%% API

start_link() ->
    gen_server:start_link({local, ?SERVER}, ?MODULE, [], []).

%% The tables, for Access public (made by httpdcnode_sup) or protected;
%% those that exist already are kept. A new set of tables is a new run.
create_tables(Access) ->
    case ets:whereis(?STREAMS) of
        undefined ->
            ets:new(?STREAMS, [set, Access, named_table, {write_concurrency, true},
                               {read_concurrency, true}]),
            ets:new(?MSGS, [ordered_set, Access, named_table, {write_concurrency, true}]),
            persistent_term:put(?INC, erlang:system_time(microsecond));
        _ -> ok
    end,
    Max = env(unacked_max_bytes, 64 bsl 20),
    persistent_term:get(?MAX, none) =:= Max orelse persistent_term:put(?MAX, Max),
    ok.

%% This master's run.
inc() ->
    persistent_term:get(?INC).

%% The bytes a message is counted for: its data, 8 more per uid, or its
%% topic's.
size_of({topic, Topic, Data}) -> data_size(Data) + byte_size(Topic);
size_of({Uids, Data}) when is_list(Uids) -> data_size(Data) + 8 * length(Uids);
size_of({_Uid, Data}) -> data_size(Data) + 8.

data_size({_Type, Bin}) -> byte_size(Bin);
data_size(Bin) -> byte_size(Bin).

%% Inner ({Uid | [Uid], Data}, {topic, Topic, Data}) for K offline uids to
%% Node, numbered:
%% false when Node takes no numbered messages (the caller sends it as it
%% is). Sent in the caller, before its copy is kept: a race with the
%% acknowledgement is settled by ack/3 (a copy of a number already
%% acknowledged is deleted).
-spec send(node(), tuple(), non_neg_integer(), non_neg_integer()) -> boolean().
send(Node, Inner, Size, K) ->
    %% read first: the message goes out right after it gets its number
    %% (the C-node puts numbers that come out of order back in order; this
    %% keeps that rare), its copy kept after
    Inc = persistent_term:get(?INC, 0),
    try ets:update_counter(?STREAMS, Node, [{2, 1}, {3, Size}, {4, 0}, {5, 0}]) of
        [Seq, Cum, Gate, Released] ->
            Term = {httpdcnode_seq, node(), Inc, Seq, Inner},
            Gate =:= ?DIRECT andalso erlang:send({any, Node}, Term, [noconnect]),
            ets:insert(?MSGS, {{Node, Seq}, Inner, Cum}),
            case Gate of
                ?DIRECT -> count(routed_offline, K);
                _ -> not_direct(Node, Term, K)
            end,
            over_bound(Node, Cum, Size, Released),
            true
    catch error:badarg -> false
    end.

%% The same for a caller that sends it itself (with {Pid, Ref}: wire/2):
%% kept, and {Seq, direct} when it may go on the link, {Seq, away} when
%% not (held, the caller may pass it to another master); none when Node
%% takes no numbered messages.
-spec reserve(node(), tuple(), non_neg_integer()) ->
          {pos_integer(), direct | away} | none.
reserve(Node, Inner, Size) ->
    try ets:update_counter(?STREAMS, Node, [{2, 1}, {3, Size}, {4, 0}, {5, 0}]) of
        [Seq, Cum, Gate, Released] ->
            ets:insert(?MSGS, {{Node, Seq}, Inner, Cum}),
            over_bound(Node, Cum, Size, Released),
            %% the gate again: one opened since is not told of this copy
            case Gate =:= ?DIRECT orelse gate(Node) =:= ?DIRECT of
                true -> {Seq, direct};
                false -> {Seq, away}
            end
    catch error:badarg -> none
    end.

%% The message numbered Seq by reserve/3, as sent (Inner may carry
%% {Pid, Ref} where the kept copy does not).
wire(Seq, Inner) ->
    {httpdcnode_seq, node(), inc(), Seq, Inner}.

%% #{unacked => Messages kept, unacked_bytes => their bytes}, all nodes.
info() ->
    try
        Bytes = ets:foldl(fun({N, _, Cum, _, Rel}, A) when is_atom(N) -> A + Cum - Rel;
                             (_, A) -> A
                          end, 0, ?STREAMS),
        #{unacked => ets:info(?MSGS, size), unacked_bytes => Bytes}
    catch error:badarg -> #{unacked => 0, unacked_bytes => 0}
    end.

%%% Callers' side

gate(Node) ->
    try ets:lookup_element(?STREAMS, Node, 4) catch error:badarg -> ?HOLD end.

%% Term was numbered with the gate not direct: kept for the node
%% (held_for_down_node), and through another master now if there is one.
%% The gate is read again: opened since, this server may not have seen the
%% copy (kept after its last look), so it is sent here.
not_direct(Node, Term, K) ->
    case gate(Node) of
        ?DIRECT ->
            erlang:send({any, Node}, Term, [noconnect]),
            count(routed_offline, K);
        Gate ->
            count(held_for_down_node, 1),
            Gate =:= ?RELAY andalso relay(Node, Term, K)
    end.

relay(Node, Term, K) ->
    case httpdcnode:peers() of
        [] -> ok;
        [P | _] ->
            erlang:send({httpdcnode_presence, P}, {httpdcnode_relay, Node, Term, K}, [noconnect]),
            count(relayed_offline, K)
    end.

%% The node's bytes kept just passed unacked_max_bytes: this server trims.
over_bound(Node, Cum, Size, Released) ->
    Max = persistent_term:get(?MAX),
    case Cum - Released > Max andalso Cum - Size - Released =< Max of
        true -> catch erlang:send(?SERVER, {trim, Node}), ok;
        false -> ok
    end.

count(Name, N) ->
    httpdcnode_presence:count_event(Name, N).

env(K, Default) ->
    application:get_env(httpdcnode, K, Default).

%%% gen_server

init([]) ->
    create_tables(protected),
    ok = net_kernel:monitor_nodes(true, [{node_type, all}]),
    erlang:send_after(?TICK_MS, self(), tick),
    {ok, recover(bounds(#st{inc = inc()}))}.

%% The bounds of the application env, read again at every look (a change
%% applies within ?TICK_MS).
bounds(St) ->
    create_tables(protected),
    St#st{max_bytes = persistent_term:get(?MAX), max_ms = env(unacked_max_ms, 30000),
          ack_ms = max(1, env(ack_timeout_ms, 2000))}.

%% After a crash of this server: the streams in the tables, their state
%% taken the safe way (everything not acknowledged may have been sent).
recover(St) ->
    Now = now_ms(),
    Nodes = maps:from_list(
              [{N, #n{acked = first_kept(N, Seq) - 1, sent = Seq, progress_ms = Now}}
               || {N, Seq, _, _, _} <- ets:tab2list(?STREAMS), is_atom(N)]),
    St#st{nodes = Nodes}.

first_kept(Node, Seq) ->
    case ets:next(?MSGS, {Node, 0}) of
        {Node, S} -> S;
        _ -> Seq + 1
    end.

handle_call(_Other, _From, St) ->
    {reply, {error, unknown_call}, St}.

handle_cast(_Msg, St) ->
    {noreply, St}.

handle_info({hello, Node, #{seq := 1} = Hello}, St) ->
    {noreply, hello(Node, Hello, St)};
handle_info({hello, Node, _Hello}, St) ->
    {noreply, unnumbered(Node, St)};
handle_info({nodedown, Node, _Info}, St) ->
    {noreply, down(Node, St)};
handle_info({nodeup, _Node, _Info}, St) ->
    {noreply, St};
handle_info({httpdcnode_ack, Node, Origin, Inc, Seq}, St) when Origin =:= node() ->
    {noreply, ack(Node, Inc, Seq, direct, St)};
handle_info({httpdcnode_ack_via, Node, Origin, Inc, Seq}, St) when Origin =:= node() ->
    {noreply, ack(Node, Inc, Seq, via, St)};
handle_info({httpdcnode_ack_via, _Node, Origin, _Inc, _Seq} = Ack, St) when is_atom(Origin) ->
    %% for another master: passed on
    erlang:send({?SERVER, Origin}, Ack, [noconnect]),
    {noreply, St};
handle_info({httpdcnode_relayed, Node, Instance, Inc, Seq}, St = #st{inc = Inc}) ->
    %% another master passed our Seq on to the node's run Instance: it
    %% counts for the run we know (another, a new one whose hello is still
    %% to come here, holds it until our base, then applies it in its turn)
    {noreply, with_node(Node, fun(N = #n{instance = I}) when I =:= Instance ->
                                      N#n{sent = max(N#n.sent, Seq)};
                                 (N) -> N
                              end, St)};
handle_info({trim, Node}, St) ->
    {noreply, with_node(Node, fun(N) -> trim_bytes(Node, N, St) end, St)};
handle_info(tick, St) ->
    erlang:send_after(?TICK_MS, self(), tick),
    {noreply, tick(bounds(St))};
handle_info(_Other, St) ->
    {noreply, St}.

terminate(_Reason, _St) ->
    ok.

%%% Streams

with_node(Node, Fun, St = #st{nodes = Ns}) ->
    case Ns of
        #{Node := N} -> St#st{nodes = Ns#{Node => Fun(N)}};
        _ -> St
    end.

%% The node's hello (its link is up): what it did not acknowledge is sent
%% again, in order, before the gate opens.
hello(Node, Hello, St = #st{inc = Inc, nodes = Ns}) ->
    user_timeout(Node),
    ets:insert_new(?STREAMS, {Node, 0, 0, ?HOLD, 0}),
    N0 = close_gate(Node, ?HOLD, maps:get(Node, Ns, #n{})),
    Applied = case maps:get(applied, Hello, none) of
                  {Inc, S} when is_integer(S) -> S;
                  _ -> none
              end,
    Instance = maps:get(instance, Hello, undefined),
    Epoch = maps:get(epoch, Hello, undefined),
    SameRun = Applied =/= none orelse
        (Instance =/= undefined andalso Instance =:= N0#n.instance),
    Acked0 = case Applied of none -> N0#n.acked; _ -> max(N0#n.acked, Applied) end,
    release(Node, Acked0),
    %% what is given up counts as settled: the node's stream goes on after it
    Acked = case SameRun of
                true -> Acked0;
                false -> in_doubt(Node, Acked0, N0#n.sent, Epoch =:= N0#n.epoch)
            end,
    send_base(Node, {any, Node}, Inc, Acked),
    N1 = N0#n{instance = Instance, epoch = Epoch, linked = true, acked = Acked,
              pump = {Acked + 1, infinity},
              sent = case SameRun of true -> N0#n.sent; false -> Acked end,
              progress_ms = now_ms(), retry_ms = 0},
    St#st{nodes = Ns#{Node => pump(Node, N1)}}.

%% A link that dies silently (packets dropped, no reset) while this master
%% writes into it is not dropped by the ticks (measured: not in 30 s at
%% 100 msg/s), and while this side holds it, the node's new connection is
%% refused (the handshake's "alive", which ei does not take): the node
%% could link again only once a retransmission, backed off through the
%% outage, met its reset, up to ~30 s after the heal. The kernel's
%% TCP_USER_TIMEOUT drops it instead once written data waited net_ticktime
%% unacknowledged: this master keeps what the node did not acknowledge and
%% the node's next dial succeeds. Linux, TCP distribution only (another
%% carrier keeps its own rule).
-define(IPPROTO_TCP, 6).
-define(TCP_USER_TIMEOUT, 18).
user_timeout(Node) ->
    Ms = case net_kernel:get_net_ticktime() of
             T when is_integer(T) -> T * 1000;
             {ongoing_change_to, T} -> T * 1000;
             _ -> none
         end,
    case lists:keyfind(Node, 1, erlang:system_info(dist_ctrl)) of
        {Node, Port} when is_port(Port), is_integer(Ms) ->
            case inet:setopts(Port, [{raw, ?IPPROTO_TCP, ?TCP_USER_TIMEOUT, <<Ms:32/native>>}]) of
                ok -> ok;
                {error, Why} ->
                    logger:warning("httpdcnode: no TCP_USER_TIMEOUT on the link to ~p (~p): "
                                   "if it dies silently while messages are written to it, "
                                   "it is kept, and the node cannot connect again, until "
                                   "TCP gives up", [Node, Why])
            end;
        _ -> ok
    end.

%% A node that takes no numbered messages (an older C-node): what was kept
%% for it goes, and its messages go unnumbered.
unnumbered(Node, St = #st{nodes = Ns}) ->
    case ets:member(?STREAMS, Node) of
        true ->
            Dropped = ets:select_delete(?MSGS, [{{{Node, '_'}, '_', '_'}, [], [true]}]),
            count(held_dropped, Dropped),
            ets:delete(?STREAMS, Node);
        false -> ok
    end,
    St#st{nodes = maps:remove(Node, Ns)}.

%% The link went down: kept from now, through another master if there is one.
down(Node, St = #st{inc = Inc, nodes = Ns}) ->
    case Ns of
        #{Node := N0} ->
            Gate = case httpdcnode:peers() of [] -> ?HOLD; _ -> ?RELAY end,
            N1 = close_gate(Node, Gate, N0),
            N2 = case Gate of
                     ?RELAY -> resend_via_peer(Node, Inc, N1);
                     ?HOLD -> N1
                 end,
            St#st{nodes = Ns#{Node => N2#n{pump = none, linked = false, progress_ms = now_ms()}}};
        _ -> St
    end.

%% Sets the gate; what was numbered while it was open on the link may
%% have been sent (#n.sent: the node's run may have it, or not). What
%% went through another master counts once that one says it passed it on
%% (httpdcnode_relayed): while the node is down, nothing is.
close_gate(Node, Gate, N) ->
    Old = ets:lookup_element(?STREAMS, Node, 4),
    ets:update_element(?STREAMS, Node, {4, Gate}),
    case Old of
        ?DIRECT -> N#n{sent = max(N#n.sent, ets:lookup_element(?STREAMS, Node, 2))};
        _ -> N
    end.

%% The node acknowledged up to Seq (by its link to this master: direct).
ack(Node, Inc, Seq, How, St = #st{inc = Inc, nodes = Ns}) when is_integer(Seq) ->
    case Ns of
        #{Node := N0} ->
            N1 = case Seq > N0#n.acked of
                     true -> release(Node, Seq),
                             N0#n{acked = Seq, progress_ms = now_ms(), retry_ms = 0};
                     false -> N0
                 end,
            %% heard by the link while sending through another master: back to it
            N2 = case How =:= direct andalso gate(Node) =:= ?RELAY andalso connected(Node) of
                     true -> back_direct(Node, St, N1);
                     false -> N1
                 end,
            St#st{nodes = Ns#{Node => N2}};
        _ -> St
    end;
ack(_Node, _Inc, _Seq, _How, St) ->
    St.

back_direct(Node, #st{inc = Inc}, N0) ->
    N1 = close_gate(Node, ?HOLD, N0),
    send_base(Node, {any, Node}, Inc, N1#n.acked),
    pump(Node, N1#n{pump = {N1#n.acked + 1, infinity}}).

connected(Node) ->
    lists:member(Node, erlang:nodes(connected)).

%% Copies kept past the acknowledged one, at most, for which release/2
%% deletes with one select_delete (which walks all of the node's copies);
%% more, and it walks only those it deletes.
-define(RELEASE_SCAN, 1000).

%% Deletes the copies up to Seq; the bytes they held are released. A gap
%% that goes past Seq (the last copy up to Seq, if any) stays for its
%% numbers after Seq.
release(Node, Seq) ->
    case ets:prev(?MSGS, {Node, Seq + 1}) of
        {Node, _} = K ->
            [{_, Inner, Cum}] = ets:lookup(?MSGS, K),
            case ets:lookup_element(?STREAMS, Node, 2) - Seq =< ?RELEASE_SCAN of
                true ->
                    ets:select_delete(?MSGS, [{{{Node, '$1'}, '_', '_'}, [{'=<', '$1', Seq}],
                                               [true]}]);
                false ->
                    take_upto(Node, Seq, ets:next(?MSGS, {Node, 0}))
            end,
            case last_of(Seq, Inner) > Seq of
                true -> ets:insert(?MSGS, {{Node, Seq + 1}, Inner, Cum});
                false -> ok
            end,
            released(Node, Cum);
        _ -> ok
    end.

%% The node's bytes released so far are at least Cum (a copy kept late
%% holds fewer).
released(Node, Cum) ->
    ets:lookup_element(?STREAMS, Node, 5) < Cum andalso
        ets:update_element(?STREAMS, Node, {5, Cum}),
    ok.

take_upto(Node, Seq, {Node, S} = K) when S =< Seq ->
    Next = ets:next(?MSGS, K),
    ets:delete(?MSGS, K),
    take_upto(Node, Seq, Next);
take_upto(_Node, _Seq, _K) ->
    ok.

%% Messages sent to a run of the node that is gone, not acknowledged:
%% delivered or not, nobody knows. The new run kept the epoch (its history
%% with it): a gap for their uids takes their place. Another epoch: every
%% client that had ids of the old run is told that gap as it comes back,
%% so they go (another gap would be told twice to one already back).
%% Returns the number the node's stream now goes on after.
in_doubt(Node, Acked, Sent, true) when Sent > Acked ->
    count(gap_in_doubt, to_gap(Node, fun(S, _Cum) -> S =< Sent end)),
    Acked;
in_doubt(Node, Acked, Sent, false) when Sent > Acked ->
    count(gap_in_doubt, ets:select_count(?MSGS, [{{{Node, '$1'}, '$2', '_'},
                                                  [{'=<', '$1', Sent},
                                                   {'=/=', {element, 1, '$2'}, httpdcnode_gap}],
                                                  [true]}])),
    release(Node, Sent),
    Sent;
in_doubt(_Node, Acked, _Sent, _SameEpoch) ->
    Acked.


%% Sends the kept copies from #n.pump on, on the link, while it takes them
%% without waiting; at the end the gate opens, then what was numbered
%% before it did (callers who found it held left those to this server)
%% follows: the C-node puts them in order. A busy link: the rest at the
%% next look.
pump(_Node, N = #n{pump = none}) ->
    N;
pump(Node, N = #n{pump = {From, infinity}}) ->
    case send_from(Node, {any, Node}, From, infinity) of
        {more, Next} -> N#n{pump = {Next, infinity}};
        {done, Next} ->
            ets:update_element(?STREAMS, Node, {4, ?DIRECT}),
            pump(Node, N#n{pump = {Next, ets:lookup_element(?STREAMS, Node, 2)}})
    end;
pump(Node, N = #n{pump = {From, Last}}) ->
    case send_from(Node, {any, Node}, From, Last) of
        {more, Next} -> N#n{pump = {Next, Last}};
        {done, _} -> N#n{pump = none}
    end.

%% Sends the kept copies of numbers From..Last to Dest: {done, Next} at
%% the end (Next: the number after the last sent), {more, Next} when Dest
%% is busy.
send_from(Node, Dest, From, Last) ->
    send_from(Node, Dest, ets:next(?MSGS, {Node, From - 1}), Last, From).

send_from(Node, Dest, {Node, S} = K, Last, _Next) when S =< Last ->
    [{_, Inner, _}] = ets:lookup(?MSGS, K),
    case put_term(Dest, {httpdcnode_seq, node(), inc(), S, Inner}) of
        ok -> count(resent, 1),
              send_from(Node, Dest, ets:next(?MSGS, K), Last, last_of(S, Inner) + 1);
        busy -> {more, S}
    end;
send_from(_Node, _Dest, _Key, _Last, Next) ->
    {done, Next}.

%% The last number a message numbered S stands for: a gap's Last.
last_of(_S, {httpdcnode_gap, Last, _}) -> Last;
last_of(_S, {httpdcnode_gap, Last, _, _}) -> Last;
last_of(S, _) -> S.

%% Never waits on a busy link: the rest goes at the next look.
put_term({any, _} = Dest, Term) ->
    case erlang:send(Dest, Term, [noconnect, nosuspend]) of
        nosuspend -> busy;
        _ -> ok
    end;
put_term({relay, Peer, Node}, Term) ->
    erlang:send({httpdcnode_presence, Peer}, {httpdcnode_relay, Node, Term, 0},
                [noconnect, nosuspend]),
    ok.

send_base(_Node, {any, _} = Dest, Inc, Acked) ->
    erlang:send(Dest, {httpdcnode_seq_base, node(), Inc, Acked, ?SERVER}, [noconnect, nosuspend]),
    ok;
send_base(_Node, {relay, Peer, Node}, Inc, Acked) ->
    erlang:send({httpdcnode_presence, Peer},
                {httpdcnode_relay, Node, {httpdcnode_seq_base, node(), Inc, Acked, ?SERVER}, 0},
                [noconnect]),
    ok.

%% Everything not acknowledged, again, through the next other master.
resend_via_peer(Node, Inc, N = #n{peer = I}) ->
    case httpdcnode:peers() of
        [] -> N;
        Peers ->
            P = lists:nth(1 + I rem length(Peers), Peers),
            Dest = {relay, P, Node},
            send_base(Node, Dest, Inc, N#n.acked),
            {done, _} = send_from(Node, Dest, N#n.acked + 1, infinity),
            N#n{peer = I + 1}
    end.

%%% Bounds and timeouts

tick(St = #st{nodes = Ns}) ->
    Now = now_ms(),
    St1 = maps:fold(fun(Node, N, A) -> missed_hello(Node, N, A) end, St, Ns),
    St1#st{nodes = maps:map(fun(Node, N) -> look(Node, N, Now, St1) end, St1#st.nodes)}.

%% A node linked again whose hello did not come here (this server was
%% restarting): the presence server's copy of it does.
missed_hello(Node, #n{linked = false}, St) ->
    case connected(Node) andalso httpdcnode_presence:node_info(Node) of
        {_, #{seq := 1, instance := _} = Hello} -> hello(Node, Hello, St);
        _ -> St
    end;
missed_hello(_Node, _N, St) ->
    St.

look(Node, N0, Now, St) ->
    %% copies kept after their acknowledgement came (a caller's race)
    release(Node, N0#n.acked),
    N1 = pump(Node, N0),
    N2 = trim_old(Node, N1, Now, St),
    N3 = trim_bytes(Node, N2, St),
    N4 = no_progress(Node, N3, Now, St),
    probe(Node, N4, Now, St).

%% Copies older than unacked_max_ms go: the numbers given before a sample
%% taken that long ago.
trim_old(Node, N = #n{samples = Q0}, Now, #st{max_ms = MaxMs}) ->
    Q1 = queue:in({Now, ets:lookup_element(?STREAMS, Node, 2)}, Q0),
    {Q2, Old} = drop_samples(Q1, Now - MaxMs, none),
    N1 = N#n{samples = Q2},
    case Old of
        Seq when is_integer(Seq), Seq > N#n.acked ->
            dropped(Node, N1, fun(S, _Cum) -> S =< Seq end);
        _ -> N1
    end.

drop_samples(Q, Before, Old) ->
    case queue:peek(Q) of
        {value, {T, Seq}} when T =< Before -> drop_samples(queue:drop(Q), Before, Seq);
        _ -> {Q, Old}
    end.

%% Past unacked_max_bytes, the oldest go.
trim_bytes(Node, N, #st{max_bytes = Max}) ->
    [{_, _, Cum, _, Released}] = ets:lookup(?STREAMS, Node),
    case Cum - Released > Max of
        true -> dropped(Node, N, fun(_S, C) -> Cum - C > Max end);
        false -> N
    end.

dropped(Node, N, While) ->
    release(Node, N#n.acked),                % what was acknowledged is not dropped
    count(held_dropped, to_gap(Node, While)),
    %% a pump past them starts again at their gap
    case {N#n.pump, ets:next(?MSGS, {Node, 0})} of
        {{P, L}, {Node, First}} when P > First -> N#n{pump = {First, L}};
        _ -> N
    end.

%% No acknowledgement moved on for ack_timeout_ms while messages wait:
%% the link may be dead without either side knowing yet. Through another
%% master, again; if that brings no acknowledgement either, again after
%% twice as long, up to 16 times ack_timeout_ms (a node that is down is
%% not sent its whole backlog every ack_timeout_ms).
no_progress(Node, N = #n{progress_ms = P, retry_ms = R}, Now, #st{inc = Inc, ack_ms = AckMs}) ->
    Wait = case R of 0 -> AckMs; _ -> R end,
    Waiting = ets:lookup_element(?STREAMS, Node, 2) > N#n.acked,
    case Waiting andalso Now - P >= Wait andalso N#n.pump =:= none andalso
        httpdcnode:peers() =/= [] of
        true ->
            N1 = resend_via_peer(Node, Inc, close_gate(Node, ?RELAY, N)),
            N1#n{progress_ms = Now, retry_ms = min(2 * Wait, 16 * AckMs)};
        false -> N
    end.

%% Sending through another master while linked: now and then a base on
%% the link, which the node acknowledges by it (then back to the link).
probe(Node, N = #n{probe_ms = P}, Now, #st{inc = Inc, ack_ms = AckMs}) ->
    case gate(Node) =:= ?RELAY andalso Now - P >= AckMs andalso connected(Node) of
        true ->
            send_base(Node, {any, Node}, Inc, N#n.acked),
            N#n{probe_ms = Now};
        false -> N
    end.

%% Replaces the oldest copies of Node, while While(Seq, Cum) holds, by
%% gaps for their uids and topics (at most ?GAP_UIDS_MAX uids and
%% ?GAP_TOPICS_MAX topics each, more make more); returns how many messages
%% went.
to_gap(Node, While) ->
    to_gap(Node, While, ets:next(?MSGS, {Node, 0}), none, 0).

to_gap(Node, While, {Node, S} = K, Acc, Count) ->
    [{_, Inner, Cum}] = ets:lookup(?MSGS, K),
    case While(S, Cum) of
        false -> put_gap(Node, Acc), Count;
        true ->
            ets:delete(?MSGS, K),
            {Last, Uids, Topics, More} = case Inner of
                                             {httpdcnode_gap, L, Us} -> {L, Us, [], 0};
                                             {httpdcnode_gap, L, Us, Ts} -> {L, Us, Ts, 0};
                                             {topic, T, _} -> {S, [], [T], 1};
                                             {Us, _} when is_list(Us) ->
                                                 {S, lists:usort(Us), [], 1};
                                             {U, _} -> {S, [U], [], 1}
                                         end,
            %% one gap for contiguous numbers only: a number whose copy a
            %% caller has not kept yet is not given up here
            Acc1 = case Acc of
                       {F, L0, Us0, Ts0, _} when L0 + 1 =:= S, length(Us0) < ?GAP_UIDS_MAX,
                                                 length(Ts0) < ?GAP_TOPICS_MAX ->
                           {F, Last, lists:umerge(Us0, Uids), lists:umerge(Ts0, Topics), Cum};
                       _ -> put_gap(Node, Acc), {S, Last, Uids, Topics, Cum}
                   end,
            to_gap(Node, While, ets:next(?MSGS, K), Acc1, Count + More)
    end;
to_gap(Node, _While, _K, Acc, Count) ->
    put_gap(Node, Acc),
    Count.

%% The gap in place of the copies; their bytes are released. Without
%% topics, in the form a C-node that takes no numbered topics knows.
put_gap(_Node, none) -> ok;
put_gap(Node, {First, Last, Uids, Topics, Cum}) ->
    Gap = case Topics of
              [] -> {httpdcnode_gap, Last, Uids};
              _ -> {httpdcnode_gap, Last, Uids, Topics}
          end,
    ets:insert(?MSGS, {{Node, First}, Gap, Cum}),
    released(Node, Cum).

now_ms() ->
    erlang:monotonic_time(millisecond).
