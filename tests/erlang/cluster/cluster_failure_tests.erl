%% SPDX-License-Identifier: Apache-2.0
%% The cluster around the httpdcnode application survives losing any of its
%% parts: two real masters with the application (env masters), three real
%% C-nodes (./httpdcnode --master A,B --presence httpdcnode_presence), real
%% SSE and WebSocket clients on plain sockets.
%%
%% - WebSocket (subprotocol ws+meta.httpdcnode, ?since=): a message sent
%%   while the uid is offline, through send, send_sync, multicast,
%%   multicast_sync or router:send from either master, comes on resume; a
%%   uid that moved to another C-node gets a gap there.
%% - The link between master A and a C-node cut while both live (A
%%   disconnects it and refuses it until the test lets it back): A's view
%%   of the node empties, changes meanwhile reach B; once the C-node has
%%   reconnected by itself, A's view matches the node's within a second.
%% - Master A killed (SIGKILL) while messages flow through B: each client
%%   gets every message once, in order; A restarted with the application
%%   has every online uid of the three C-nodes within a second of its links
%%   and its application being up.
%% - A C-node killed (SIGKILL): its uids leave presence on both masters
%%   within a second; what is sent meanwhile is kept by each master; started
%%   again under its name and port, its clients resume there with a gap (a
%%   new epoch), then get what each master kept, then what it sent once the
%%   node was back, each master's in its order.
%%
%% Measured times are printed ("convergence: ..."). HTTPDTEST_APP_EBIN=DIR
%% runs the masters on the application's beams in DIR instead of this
%% build's (to try an older application against these tests).
-module(cluster_failure_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_raw, [ws_meta_upgrade/2, recv_frame/1, meta_frame/1]).

%% run on the masters
-export([sender/4, watch/4]).
%% the SSE client and a wait on presence, for other cluster tests
-export([sse_client/3, events/1, wait_events/2, close_client/1, split_id/1, wait_view/3]).

-import(httpdtest_master, [master_node/1, stop_master/1, kill_master_by_name/1, kill_master/1,
                           restart_master/1]).
-import(httpdtest_server, [start_server/1, node_of/1, stop_server/1, send/2, kill_server/1,
                           restart_server/1, port_of/1]).
-import(httpdtest_wait, [wait_until/3, summarize/1]).
-import(httpdtest_json, [json_decode/1]).
-import(httpdtest_os, [scaled/1, signal/2]).
-import(httpdtest_http, [request_bytes/4]).

-define(PRESENCE, httpdcnode_presence).
-define(WAIT, 15000).
-define(T, 5000).
%% What the issue asks: presence right within a second.
-define(CONVERGE_MS, 1000).
%% Uids that never connect: publishers of router:send.
-define(PUB, 900000).
%% ms between two messages of the flow through master B.
-define(FLOW_MS, 5).

failures_test_() ->
    {timeout, 900,
     {setup, fun setup/0, fun cleanup/1,
      fun(Ctx) ->
              {inorder,
               [t(Ctx, "WebSocket, send: the message sent while offline comes on resume", 60,
                  fun(C) -> ws_offline(C, send, 1001) end),
                t(Ctx, "WebSocket, send_sync: {ok, 0}, and it comes on resume", 60,
                  fun(C) -> ws_offline(C, send_sync, 1002) end),
                t(Ctx, "WebSocket, multicast: the offline uid's message comes on resume", 60,
                  fun(C) -> ws_offline(C, multicast, 1003) end),
                t(Ctx, "WebSocket, multicast_sync: {ok, 0}, and it comes on resume", 60,
                  fun(C) -> ws_offline(C, multicast_sync, 1004) end),
                t(Ctx, "WebSocket, router:send to an offline subscriber: it comes on resume",
                  60, fun(C) -> ws_offline(C, router, 1005) end),
                t(Ctx, "WebSocket: a uid that moved to another C-node gets a gap there", 60,
                  fun ws_moved/1),
                t(Ctx, "a link cut between a master and a C-node: healed, that master's "
                  "presence matches the node's within a second", 120, fun link_cut/1),
                t(Ctx, "a master killed while messages flow through the other: none lost; "
                  "restarted, it has full presence within a second", 180,
                  fun master_killed/1),
                t(Ctx, "a C-node killed: its uids leave presence within a second; its "
                  "clients resume on the restarted node with a gap, then what was sent "
                  "while it was down and after", 180, fun cnode_killed/1)]}
      end}}.

%% A test that failed leaves no uid online for the next one.
t(Ctx, Label, Timeout, Fun) ->
    httpdtest_cluster:test_case(Label, Timeout, fun() -> Fun(Ctx) end,
                                fun() -> logs(Ctx) end, fun close_opened/0).

close_opened() ->
    [case X of
         {ws, Sock} -> gen_tcp:close(Sock);
         {sse, Pid} -> close_client(Pid)
     end || X <- opened()],
    put(opened, []).

opened() -> case get(opened) of undefined -> []; L -> L end.

note_opened(X) -> put(opened, [X | opened()]).

%%% ------------------------------------------------------------------
%%% The cluster: masters A and B, C-nodes 1, 2, 3
%%% ------------------------------------------------------------------

setup() ->
    httpdtest_cluster:start_masters(2, fun setup/1).

setup(Procs = [MA, MB]) ->
    [A, B] = Masters = [master_node(P) || P <- Procs],
    %% A first: it makes the subscription table, B copies it
    [start_app(N, [{masters, Masters}]) || N <- Masters],
    Both = list_to_atom(atom_to_list(A) ++ "," ++ atom_to_list(B)),
    Servers = [start_server(#{master => Both, presence => ?PRESENCE,
                              extra_args => ["--history", "256"]})
               || _ <- [1, 2, 3]],
    Nodes = [node_of(S) || S <- Servers],
    %% Processes change (a master or a C-node restarted): the current
    %% maps are kept in a table the setup's keeper owns.
    {Keeper, Tab} = keeper(),
    ets:insert(Tab, [{{master, 1}, MA}, {{master, 2}, MB}]
               ++ [{{server, I}, S} || {I, S} <- lists:zip([1, 2, 3], Servers)]),
    Ctx = #{a => A, b => B, nodes => Nodes, tab => Tab, keeper => Keeper},
    [wait_known(M, Nodes) || M <- Masters],
    Ctx.

cleanup(Ctx = #{a := A, b := B, tab := Tab, keeper := Keeper}) ->
    [catch stop_server(server(Ctx, I)) || I <- [1, 2, 3]],
    [catch stop_master(P) || {_, P} <- ets:match_object(Tab, {{master, '_'}, '_'})],
    [catch kill_master_by_name(N) || N <- [A, B]],
    Keeper ! stop,
    ok.

keeper() ->
    Self = self(),
    Pid = spawn(fun() ->
                        T = ets:new(cluster_failure_state, [public]),
                        Self ! {tab, self(), T},
                        receive stop -> ok end
                end),
    receive {tab, Pid, T} -> {Pid, T} after 5000 -> error(no_keeper) end.

server(#{tab := Tab}, I) -> ets:lookup_element(Tab, {server, I}, 2).
set_server(#{tab := Tab}, I, S) -> ets:insert(Tab, {{server, I}, S}).
master_proc(#{tab := Tab}, I) -> ets:lookup_element(Tab, {master, I}, 2).
set_master_proc(#{tab := Tab}, I, P) -> ets:insert(Tab, {{master, I}, P}).
cnode(#{nodes := Nodes}, I) -> lists:nth(I, Nodes).
masters(#{a := A, b := B}) -> [A, B].

logs(Ctx = #{tab := _}) ->
    [maps:get(log, master_proc(Ctx, I)) || I <- [1, 2]]
        ++ [maps:get(log, server(Ctx, I)) || I <- [1, 2, 3]];
logs(_) -> [].

start_app(Node, Env) -> httpdtest_cluster:start_app(Node, Env).

m(Node, Mod, F, A) -> erpc:call(Node, Mod, F, A, 60000).

wait_known(M, Nodes) -> httpdtest_cluster:wait_known(M, Nodes, ?WAIT).

%% Until presence on every master of Ms says Uid is on Nodes ([]: offline).
wait_online(Ms, Uid, Nodes) ->
    Want = lists:sort(Nodes),
    [wait_until(fun() ->
                        case catch lists:sort(m(M, httpdcnode, online, [Uid])) of
                            Want -> true;
                            Other -> {false, Other}
                        end
                end, ?WAIT, {online, M, Uid, Want}) || M <- Ms],
    ok.

%% Until master M's presence says C-node N holds exactly Uids.
wait_view(M, N, Uids) ->
    Want = lists:sort(Uids),
    wait_until(fun() ->
                       case catch m(M, httpdcnode, online_uids, [N]) of
                           Want -> true;
                           Other -> {false, Other}
                       end
               end, ?WAIT, {view, M, N, Want}).

%% The application's counters on M; #{} from one without them (so that
%% what fails on an older application is the delivery check before).
app(M) ->
    try m(M, httpdcnode, app_stats, [])
    catch error:{exception, undef, _} -> #{}
    end.

delta(K, Before, After) -> maps:get(K, After, 0) - maps:get(K, Before, 0).

%% Every message M sent to the C-nodes before is applied there: a stats
%% request goes the same way and is answered in order.
barrier(M) -> _ = m(M, httpdcnode, stats, []), ok.

%%% ------------------------------------------------------------------
%%% WebSocket: offline for a moment, moved
%%% ------------------------------------------------------------------

%% Msg to Uid through master M, one of the five ways; the sync ones' reply.
via(M, send, Uid, Msg) -> ok = m(M, httpdcnode, send, [Uid, Msg]);
via(M, send_sync, Uid, Msg) -> m(M, httpdcnode, send_sync, [Uid, Msg]);
via(M, multicast, Uid, Msg) -> ok = m(M, httpdcnode, multicast, [[Uid], Msg]);
via(M, multicast_sync, Uid, Msg) -> m(M, httpdcnode, multicast_sync, [[Uid], Msg]);
via(M, router, Uid, Msg) -> m(M, router, send, [?PUB + Uid, Msg]).

is_sync(Via) -> lists:member(Via, [send_sync, multicast_sync, router]).

%% The ways alternate between the masters.
sender_of(Ctx, Via) when Via =:= send; Via =:= multicast_sync -> maps:get(a, Ctx);
sender_of(Ctx, _) -> maps:get(b, Ctx).

ws_offline(Ctx, Via, U) ->
    S1 = server(Ctx, 1), N1 = cnode(Ctx, 1),
    Ms = masters(Ctx),
    M = sender_of(Ctx, Via),
    %% router:send goes to a publisher nobody is: U is subscribed to it
    Via =:= router andalso
        (ok = m(M, subsmanager, add_subscriptions, [[{subscription, U, ?PUB + U}]])),
    Ws = ws_connect(S1, U, none),
    wait_online(Ms, U, [N1]),
    R1 = via(M, Via, U, <<"m1">>),
    {E, 1, <<"m1">>} = meta_frame(Ws),
    is_sync(Via) andalso ?assertEqual({ok, 1}, R1),
    gen_tcp:close(Ws),
    wait_online(Ms, U, []),
    R2 = via(M, Via, U, <<"m2">>),
    %% no stream written, but kept for the resume
    is_sync(Via) andalso ?assertEqual({ok, 0}, R2),
    barrier(M),
    ok = send(S1, {U, <<"m3">>}),
    Ws2 = ws_connect(S1, U, <<E/binary, ":1">>),
    ?assertEqual({E, 2, <<"m2">>}, meta_frame(Ws2)),
    ?assertEqual({E, 3, <<"m3">>}, meta_frame(Ws2)),
    gen_tcp:close(Ws2).

ws_moved(Ctx = #{a := A, b := B}) ->
    S1 = server(Ctx, 1), S2 = server(Ctx, 2),
    N1 = cnode(Ctx, 1), N2 = cnode(Ctx, 2),
    U = 1101,
    Ws = ws_connect(S1, U, none),
    wait_online([A, B], U, [N1]),
    ok = m(A, httpdcnode, send, [U, <<"m1">>]),
    {E1, 1, <<"m1">>} = meta_frame(Ws),
    gen_tcp:close(Ws),
    wait_online([A, B], U, []),
    ?assertEqual({ok, 0}, m(B, httpdcnode, send_sync, [U, <<"m2">>])),   % kept on N1
    %% back on the other C-node with the id of the first: another epoch
    Ws2 = ws_connect(S2, U, <<E1/binary, ":1">>),
    {1, 1, <<"event: gap\n\n", Json/binary>>} = recv_frame(Ws2),
    Told = <<E1/binary, ":1">>,
    ?assertMatch(#{<<"last">> := Told}, json_decode(Json)),
    wait_online([A, B], U, [N2]),
    ?assertEqual({ok, 1}, m(A, httpdcnode, send_sync, [U, <<"m3">>])),
    {E2, 1, <<"m3">>} = meta_frame(Ws2),
    ?assertNotEqual(E1, E2),
    gen_tcp:close(Ws2).

%%% ------------------------------------------------------------------
%%% A link cut
%%% ------------------------------------------------------------------

%% A disconnects C-node 2 and refuses it (net_kernel:allow without it)
%% while the test changes what the node holds; then lets it back. The
%% C-node reconnects by itself, with its backoff.
link_cut(Ctx = #{a := A, b := B}) ->
    S1 = server(Ctx, 1), S2 = server(Ctx, 2),
    N2 = cnode(Ctx, 2),
    Ctl = sse_client(S1, 3003, []),
    C1 = sse_client(S2, 3001, []),
    C2 = sse_client(S2, 3002, []),
    [wait_view(M, N2, [3001, 3002]) || M <- [A, B]],
    Others = [N || N <- m(A, erlang, nodes, [connected]), N =/= N2],
    ok = m(A, net_kernel, allow, [[node() | Others]]),
    try
        true = m(A, erlang, disconnect_node, [N2]),
        %% A let go of the node's uids
        wait_view(A, N2, []),
        %% while cut: 3002 leaves, 3004 comes; B hears both
        close_client(C2),
        C4 = sse_client(S2, 3004, []),
        wait_view(B, N2, [3001, 3004]),
        %% a message through A meanwhile is relayed by B, linked to the node
        %% (judged at the end, after the presence checks)
        Before = app(A),
        RA = m(A, httpdcnode, send_sync, [3001, <<"through A while cut">>]),
        After = app(A),
        Dropped = {RA, delta(dropped_offline, Before, After), delta(relayed_offline, Before, After)},
        io:format(user, "~n  link cut: send_sync through A to a uid of the cut node: ~p, "
                  "dropped_offline +~b, relayed_offline +~b~n", tuple_to_list(Dropped)),
        ?assertEqual({ok, 1}, m(B, httpdcnode, send_sync, [3001, <<"through B while cut">>])),
        Got = [D || {_, message, D} <- wait_events(C1, 2)],
        ?assertEqual([<<"through A while cut">>, <<"through B while cut">>], Got),
        %% and asynchronously
        ok = m(A, httpdcnode, send, [3001, <<"sent through A while cut">>]),
        ?assertEqual(Got ++ [<<"sent through A while cut">>],
                     [D || {_, message, D} <- wait_events(C1, 3)]),
        Ref = make_ref(),
        Want = [3001, 3004],
        _ = erlang:spawn(A, ?MODULE, watch,
                         [self(), Ref,
                          [{link, fun() -> lists:member(N2, erlang:nodes(hidden)) end},
                           {match, fun() -> httpdcnode:online_uids(N2) =:= Want end}],
                          scaled(30000)]),
        ok = m(A, net_kernel, allow, [[N2]]),
        #{link := Link, match := Match} = watched(Ref, [link, match]),
        io:format(user, "~n  convergence: link cut healed: C-node back ~b ms after it was "
                  "let in, A's presence matched the node's ~b ms after the link was up~n",
                  [Link, Match - Link]),
        ?assert(Match - Link =< scaled(?CONVERGE_MS)),
        ?assertEqual(Want, m(B, httpdcnode, online_uids, [N2])),
        %% and A delivers to the node again
        ?assertEqual({ok, 1}, m(A, httpdcnode, send_sync, [3004, <<"through A">>])),
        [{_, message, <<"through A">>}] = wait_events(C4, 1),
        ?assertEqual({{ok, 1}, 0, 1}, Dropped),
        [close_client(C) || C <- [C1, C4, Ctl]]
    after
        catch m(A, net_kernel, allow, [[N2]])
    end.

%%% ------------------------------------------------------------------
%%% A master killed
%%% ------------------------------------------------------------------

master_killed(Ctx = #{a := A, b := B}) ->
    Placed = [{I, U} || I <- [1, 2, 3], U <- [10000 + 10 * I + K || K <- [1, 2, 3]]],
    Clients = [{U, sse_client(server(Ctx, I), U, [])} || {I, U} <- Placed],
    Uids = [U || {_, U} <- Placed],
    Views = [{cnode(Ctx, I), [U || {J, U} <- Placed, J =:= I]} || I <- [1, 2, 3]],
    [wait_view(M, N, Us) || M <- [A, B], {N, Us} <- Views],
    Ref = make_ref(),
    Sender = erlang:spawn(B, ?MODULE, sender, [self(), Ref, Uids, ?FLOW_MS]),
    wait_sent(Sender, Ref, 20),
    ok = kill_master(master_proc(Ctx, 1)),
    %% messages flow through B while A is gone
    wait_sent(Sender, Ref, wait_sent(Sender, Ref, 0) + 100),
    MA2 = restart_master(master_proc(Ctx, 1)),
    set_master_proc(Ctx, 1, MA2),
    WRef = make_ref(),
    Nodes = maps:get(nodes, Ctx),
    _ = erlang:spawn(A, ?MODULE, watch,
                     [self(), WRef,
                      [{app, fun() -> whereis(?PRESENCE) =/= undefined end},
                       {links, fun() -> Nodes -- erlang:nodes(hidden) =:= [] end},
                       {full, fun() -> whereis(?PRESENCE) =/= undefined andalso
                                           [{N, httpdcnode:online_uids(N)} || {N, _} <- Views]
                                               =:= Views
                              end}],
                      scaled(30000)]),
    start_app(A, [{masters, [A, B]}]),
    #{app := App, links := Links, full := Full} = watched(WRef, [app, links, full]),
    Conv = Full - max(App, Links),
    io:format(user, "~n  convergence: master A restarted: links up at ~b ms, application at "
              "~b ms, full presence (~b uids on 3 C-nodes) at ~b ms: ~b ms after both~n",
              [Links, App, length(Uids), Full, Conv]),
    %% and the flow goes on a while with A back
    wait_sent(Sender, Ref, wait_sent(Sender, Ref, 0) + 50),
    Counts = stop_sender(Sender, Ref),
    Total = lists:sum(maps:values(Counts)),
    io:format(user, "~n  master A killed and restarted: ~b messages through B to ~b uids~n",
              [Total, length(Uids)]),
    %% each client: every message once, in order, one epoch, no gap
    [check_flow(U, C, maps:get(U, Counts, 0)) || {U, C} <- Clients],
    ?assert(Conv =< scaled(?CONVERGE_MS)),
    %% A routes again, to every uid
    [?assertEqual({ok, 1}, m(A, httpdcnode, send_sync, [U, <<"from A">>])) || U <- Uids],
    [begin
         K = maps:get(U, Counts, 0),
         ?assertMatch({_, message, <<"from A">>}, lists:nth(K + 1, wait_events(C, K + 1))),
         close_client(C)
     end || {U, C} <- Clients].

check_flow(U, C, K) ->
    Evs = wait_events(C, K),
    Want = [integer_to_binary(I) || I <- lists:seq(1, K)],
    ?assertEqual({U, Want}, {U, [D || {_, _, D} <- Evs]}),
    ?assertEqual({U, []}, {U, [Ev || {_, T, _} = Ev <- Evs, T =/= message]}),
    Ids = [split_id(Id) || {Id, _, _} <- Evs],
    [{E, _} | _] = Ids,
    ?assertEqual({U, [{E, I} || I <- lists:seq(1, K)]}, {U, Ids}).

%% Runs on master B: sends 1, 2, 3, ... to the uids in turn through
%% httpdcnode:send/2, one every Every ms, until stopped, for 10 minutes at
%% most (no monitor of the test: the test node's link to B may blink when
%% global sees A go).
sender(To, Ref, Uids, Every) ->
    Deadline = erlang:monotonic_time(millisecond) + 600000,
    sender_loop(To, Ref, list_to_tuple(Uids), Every, 0, #{}, Deadline).

sender_loop(To, Ref, Uids, Every, N, Counts, Deadline) ->
    receive
        {sent, From, Ref} ->
            From ! {sent, Ref, N},
            sender_loop(To, Ref, Uids, Every, N, Counts, Deadline);
        {stop, Ref} -> To ! {stopped, Ref, Counts}
    after Every ->
            U = element(1 + N rem tuple_size(Uids), Uids),
            K = maps:get(U, Counts, 0) + 1,
            ok = httpdcnode:send(U, integer_to_binary(K)),
            erlang:monotonic_time(millisecond) < Deadline andalso
                sender_loop(To, Ref, Uids, Every, N + 1, Counts#{U => K}, Deadline)
    end.

sent(Sender, Ref) ->
    Sender ! {sent, self(), Ref},
    receive {sent, Ref, N} -> N after scaled(?T) -> error(sender_not_answering) end.

%% How many were sent, once N or more. An answer lost when the test
%% node's link to B blinks (global, as A dies, may cut it) is asked again.
wait_sent(Sender, Ref, N) ->
    wait_until(fun() -> case catch sent(Sender, Ref) of
                            K when is_integer(K), K >= N -> {true, K};
                            K -> {false, K}
                        end
               end, ?WAIT, {sent, N}).

stop_sender(Sender, Ref) ->
    Sender ! {stop, Ref},
    receive {stopped, Ref, Counts} -> Counts after scaled(?T) -> error(sender_not_stopping) end.

%% Runs on a master: polls each condition every millisecond until each
%% held once (or Timeout ms passed), then tells To the ms from the start
%% at which each first held: {watched, Ref, #{Name => Ms}}.
watch(To, Ref, Conds, Timeout) ->
    T0 = erlang:monotonic_time(millisecond),
    watch_loop(To, Ref, Conds, T0, T0 + Timeout, #{}).

watch_loop(To, Ref, Conds, T0, Deadline, Seen) ->
    Now = erlang:monotonic_time(millisecond),
    Seen1 = lists:foldl(fun({Name, F}, Acc) ->
                                case is_map_key(Name, Acc) orelse (catch F()) =/= true of
                                    true -> Acc;
                                    false -> Acc#{Name => Now - T0}
                                end
                        end, Seen, Conds),
    case map_size(Seen1) =:= length(Conds) orelse Now > Deadline of
        true -> To ! {watched, Ref, Seen1};
        false ->
            receive after 1 -> ok end,
            watch_loop(To, Ref, Conds, T0, Deadline, Seen1)
    end.

watched(Ref, Names) ->
    receive
        {watched, Ref, Seen} ->
            ?assertEqual({held, Names}, {held, [N || N <- Names, is_map_key(N, Seen)]}),
            Seen
    after scaled(60000) -> error(watcher_silent)
    end.

%%% ------------------------------------------------------------------
%%% A C-node killed
%%% ------------------------------------------------------------------

cnode_killed(Ctx = #{a := A, b := B}) ->
    S1 = server(Ctx, 1), S3 = server(Ctx, 3),
    N1 = cnode(Ctx, 1), N3 = cnode(Ctx, 3),
    Uids = [20031, 20032, 20033],
    Ctl = sse_client(S1, 20011, []),
    Clients = [{U, sse_client(S3, U, [])} || U <- Uids],
    wait_view(A, N3, Uids), wait_view(B, N3, Uids),
    wait_online([A, B], 20011, [N1]),
    [begin
         ?assertEqual({ok, 1}, m(A, httpdcnode, send_sync, [U, <<"m1">>])),
         ?assertEqual({ok, 1}, m(B, httpdcnode, send_sync, [U, <<"m2">>]))
     end || U <- Uids],
    Last = maps:from_list(
             [begin
                  [{_, _, <<"m1">>}, {Id, _, <<"m2">>}] = wait_events(C, 2),
                  {U, Id}
              end || {U, C} <- Clients]),
    Before = maps:from_list([{M, app(M)} || M <- [A, B]]),
    T0 = erlang:monotonic_time(millisecond),
    ok = signal(S3, "KILL"),
    Gone = until_all(T0, [{M, fun() -> uids_gone(M, N3, Uids) end} || M <- [A, B]],
                     scaled(?WAIT)),
    io:format(user, "~n  convergence: C-node killed: its ~b uids left presence on A in ~b ms, "
              "on B in ~b ms~n", [length(Uids), maps:get(A, Gone, -1), maps:get(B, Gone, -1)]),
    ?assertEqual([A, B], [M || M <- [A, B], is_map_key(M, Gone)]),
    [?assert(Ms =< scaled(?CONVERGE_MS)) || Ms <- maps:values(Gone)],
    _ = kill_server(S3),
    [wait_closed(C) || {_, C} <- Clients],
    %% the other nodes' uids are untouched
    [?assertEqual([N1], m(M, httpdcnode, online, [20011])) || M <- [A, B]],
    %% sent while it is down: no stream written, kept by each master
    [?assertEqual({ok, 0}, m(M, httpdcnode, send_sync, [U, <<"down ", (down_tag(Ctx, M))/binary>>]))
     || U <- Uids, M <- [A, B]],
    S3b = restart_server(S3),
    set_server(Ctx, 3, S3b),
    [wait_known(M, maps:get(nodes, Ctx)) || M <- [A, B]],
    %% sent once it is back, before its clients are: kept there
    [begin
         ?assertEqual({ok, 0}, m(A, httpdcnode, send_sync, [U, <<"a1">>])),
         ?assertEqual({ok, 0}, m(B, httpdcnode, send_sync, [U, <<"a2">>]))
     end || U <- Uids],
    Clients2 = [{U, sse_client(S3b, U, ["Last-Event-ID: " ++ binary_to_list(maps:get(U, Last))])}
                || U <- Uids],
    [begin
         [{GapId, Type, Json} | _] = wait_events(C, 1),
         {E, _} = split_id(maps:get(U, Last)),
         {E2, _} = split_id(GapId),
         %% told of the gap first, with the id it came back with: a new epoch
         ?assertEqual({U, gap}, {U, Type}),
         ?assertMatch(#{<<"last">> := L} when L =:= map_get(U, Last), json_decode(Json)),
         ?assertNotEqual(E, E2),
         %% then what each master kept while it was down, and what it
         %% sent once the node was back, in its order
         [_ | Got] = wait_events(C, 5),
         Data = [D || {_, message, D} <- Got],
         ?assertEqual([<<"a1">>, <<"a2">>, <<"down A">>, <<"down B">>], lists:sort(Data)),
         ?assertEqual([<<"down A">>, <<"a1">>], [D || D <- Data, lists:member(D, [<<"down A">>, <<"a1">>])]),
         ?assertEqual([<<"down B">>, <<"a2">>], [D || D <- Data, lists:member(D, [<<"down B">>, <<"a2">>])]),
         ?assertEqual([{E2, I} || I <- lists:seq(1, 4)], [split_id(I) || {I, _, _} <- Got])
     end || {U, C} <- Clients2],
    [wait_online([A, B], U, [N3]) || U <- Uids],
    [begin
         ?assertEqual({ok, 1}, m(A, httpdcnode, send_sync, [U, <<"live">>])),
         {_, message, <<"live">>} = lists:nth(6, wait_events(C, 6))
     end || {U, C} <- Clients2],
    %% the application was told: nothing dropped
    [begin
         #{M := B0} = Before,
         B1 = app(M),
         io:format(user, "~n  C-node killed: master ~s dropped_offline +~b, routed_offline +~b, "
                   "held_for_down_node +~b, relayed_offline +~b~n",
                   [M, delta(dropped_offline, B0, B1), delta(routed_offline, B0, B1),
                    delta(held_for_down_node, B0, B1), delta(relayed_offline, B0, B1)]),
         ?assertEqual({M, 0}, {M, delta(dropped_offline, B0, B1)})
     end || M <- [A, B]],
    [close_client(C) || {_, C} <- [{0, Ctl} | Clients ++ Clients2]].

down_tag(#{a := M}, M) -> <<"A">>;
down_tag(_, _) -> <<"B">>.

uids_gone(M, N, Uids) ->
    m(M, httpdcnode, online_uids, [N]) =:= []
        andalso lists:all(fun(U) -> m(M, httpdcnode, online, [U]) =:= [] end, Uids).

%% Polls the conditions from this node every 5 ms until each held once or
%% Timeout passed: #{Name => ms from T0 at which it first held}.
until_all(T0, Conds, Timeout) -> until_all(T0, Conds, T0 + Timeout, #{}).

until_all(T0, Conds, Deadline, Seen) ->
    Now = erlang:monotonic_time(millisecond),
    Seen1 = lists:foldl(fun({Name, F}, Acc) ->
                                case is_map_key(Name, Acc) orelse (catch F()) =/= true of
                                    true -> Acc;
                                    false -> Acc#{Name => erlang:monotonic_time(millisecond) - T0}
                                end
                        end, Seen, Conds),
    case map_size(Seen1) =:= length(Conds) orelse Now > Deadline of
        true -> Seen1;
        false -> timer:sleep(5), until_all(T0, Conds, Deadline, Seen1)
    end.

split_id(Id) ->
    [E, S] = binary:split(Id, <<":">>),
    {E, binary_to_integer(S)}.

%%% ------------------------------------------------------------------
%%% An SSE client: a process that keeps every event
%%% ------------------------------------------------------------------

%% GET /sse/U on S (U a uid, or {path, Path} for another request, such as
%% one naming topics); returns once the head came. The process keeps each
%% event ({Id, message | gap | joined ..., Data}) and whether the stream
%% ended.
sse_client(S, U, Headers) ->
    Self = self(),
    Ref = make_ref(),
    Pid = spawn(fun() -> sse_init(Self, Ref, port_of(S), U, Headers) end),
    receive
        {Ref, ok} -> note_opened({sse, Pid}), Pid;
        {Ref, Err} -> error({sse_client, U, Err})
    after scaled(?T) -> exit(Pid, kill), error({sse_client_timeout, U})
    end.

sse_init(Owner, Ref, Port, U, Headers) ->
    erlang:monitor(process, Owner),
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}]),
    Path = case U of
               {path, P} -> P;
               _ -> "/sse/" ++ integer_to_list(U)
           end,
    ok = gen_tcp:send(Sock, request_bytes("GET", Path, "HTTP/1.1", Headers)),
    case sse_head(Sock, <<>>) of
        {ok, Rest} ->
            Owner ! {Ref, ok},
            ok = inet:setopts(Sock, [{active, true}]),
            sse_loop(Sock, Rest, [], open);
        Err -> Owner ! {Ref, Err}
    end.

sse_head(Sock, Acc) ->
    case binary:split(Acc, <<"\r\n\r\n">>) of
        [<<"HTTP/1.1 200 ", _/binary>>, Rest] -> {ok, Rest};
        [Head, _] -> {bad_head, Head};
        [_] ->
            case gen_tcp:recv(Sock, 0, scaled(?T)) of
                {ok, More} -> sse_head(Sock, <<Acc/binary, More/binary>>);
                Err -> Err
            end
    end.

sse_loop(Sock, Buf, Evs, State) ->
    {Buf1, Evs1} = sse_events(Buf, Evs),
    receive
        {tcp, Sock, D} -> sse_loop(Sock, <<Buf1/binary, D/binary>>, Evs1, State);
        {tcp_closed, Sock} -> sse_loop(Sock, Buf1, Evs1, closed);
        {tcp_error, Sock, _} -> sse_loop(Sock, Buf1, Evs1, closed);
        {get, From, R} -> From ! {R, lists:reverse(Evs1), State}, sse_loop(Sock, Buf1, Evs1, State);
        {close, From, R} -> gen_tcp:close(Sock), From ! {R, closed};
        {'DOWN', _, process, _, _} -> gen_tcp:close(Sock)
    end.

sse_events(Buf, Evs) ->
    case binary:split(Buf, <<"\n\n">>) of
        [Ev, Rest] ->
            sse_events(Rest, case sse_event(binary:split(Ev, <<"\n">>, [global]), none, message, [])
                             of
                                 skip -> Evs;
                                 E -> [E | Evs]
                             end);
        [_] -> {Buf, Evs}
    end.

%% Comments, retry advice: skipped; else {Id, Type, Data}.
sse_event([], _Id, _Type, []) -> skip;
sse_event([], Id, Type, Data) ->
    {Id, Type, iolist_to_binary(lists:join(<<"\n">>, lists:reverse(Data)))};
sse_event([<<"id: ", Id/binary>> | T], _, Type, D) -> sse_event(T, Id, Type, D);
sse_event([<<"event: ", Type/binary>> | T], Id, _, D) ->
    sse_event(T, Id, binary_to_atom(Type), D);
sse_event([<<"data: ", X/binary>> | T], Id, Type, D) -> sse_event(T, Id, Type, [X | D]);
sse_event([_ | T], Id, Type, D) -> sse_event(T, Id, Type, D).

events(C) ->
    R = make_ref(),
    C ! {get, self(), R},
    receive {R, Evs, State} -> {Evs, State} after scaled(?T) -> error(client_silent) end.

%% The client's events once it has N or more.
wait_events(C, N) ->
    wait_until(fun() ->
                       case events(C) of
                           {Evs, _} when length(Evs) >= N -> {true, Evs};
                           {Evs, St} -> {false, {St, summarize(Evs)}}
                       end
               end, ?WAIT, {events, N}).

wait_closed(C) ->
    wait_until(fun() -> element(2, events(C)) =:= closed end, ?WAIT, stream_closed).

close_client(C) ->
    R = make_ref(),
    M = erlang:monitor(process, C),
    C ! {close, self(), R},
    receive
        {R, closed} -> erlang:demonitor(M, [flush]), ok;
        {'DOWN', M, _, _, _} -> ok
    after scaled(?T) -> exit(C, kill), ok
    end.

%%% ------------------------------------------------------------------
%%% WebSocket on a plain socket
%%% ------------------------------------------------------------------

%% GET /ws/U with the subprotocol that carries ids, from Since (or none).
ws_connect(S, U, Since) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S), [binary, {active, false}]),
    Path = "/ws/" ++ integer_to_list(U) ++ case Since of
                                                none -> "";
                                                _ -> "?since=" ++ binary_to_list(Since)
                                            end,
    ws_meta_upgrade(Sock, Path),
    note_opened({ws, Sock}),
    Sock.
