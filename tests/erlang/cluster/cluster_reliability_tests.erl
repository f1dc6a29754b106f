%% SPDX-License-Identifier: Apache-2.0
%% The httpdcnode application loses no message for a uid offline for a
%% moment: a real master node with the application, real C-nodes
%% (./httpdcnode --presence httpdcnode_presence) and real SSE and long-poll
%% clients on plain sockets.
%%
%% - A message for a uid that just left goes to the C-node it was last on,
%%   through send, send_sync, multicast, multicast_sync and router:send: the
%%   SSE client resuming from E:1 gets m2 (sent while it was away) and m3;
%%   200 messages 20 ms apart reach a long-poll client (offline between its
%%   polls) all, with contiguous ids.
%% - A uid that came back on another C-node gets a gap there (another
%%   epoch), and its entry then names the new node.
%% - A uid never seen is dropped and counted (stats/0: app), once its
%%   message waited the hold time (a uid not known may be connecting).
%% - The last-seen table: an entry lasts as long as the C-node's hello says
%%   it keeps history (a real C-node with --history-ttl 1), its cap holds
%%   when filled past it, the periodic sweep removes expired entries (a
%%   hello with history_ttl 1 s), and its cost per uid is measured.
%% - Two masters and a client node: either master delivers, subscriptions
%%   made on one are on the other (mnesia copies, also after one restarts),
%%   and a node of role client forwards send, router:send and subscriptions.
-module(cluster_reliability_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_raw, [read_event/1, read_until/3]).

-import(httpdtest_master, [start_master/0, master_node/1, stop_master/1, kill_master_by_name/1,
                           kill_master/1, restart_master/1]).
-import(httpdtest_server, [start_server/1, node_of/1, stop_server/1, send/2, port_of/1]).
-import(httpdtest_wait, [wait_until/3]).
-import(httpdtest_os, [scaled/1]).
-import(httpdtest_http, [http_request/2, request_bytes/4]).
-import(httpdtest_json, [json_decode/1]).

-define(WAIT, 15000).
-define(T, 5000).
-define(PRESENCE, httpdcnode_presence).
%% The master's last-seen cap here (the cap test fills past it).
-define(CAP, 20000).
%% ms a long-poll client takes between an answer and its next poll.
-define(POLL_GAP_MS, 120).
%% Uids that never connect: publishers of router:send.
-define(PUB, 900000).

reliability_test_() ->
    {timeout, 600,
     {setup, fun setup/0, fun cleanup/1,
      fun(Ctx) ->
              {inorder,
               [t(Ctx, "SSE, send: the message sent while offline comes on resume", 60,
                  fun(C) -> sse_offline(C, send, 1001) end),
                t(Ctx, "SSE, send_sync: {ok, 0}, and the message comes on resume", 60,
                  fun(C) -> sse_offline(C, send_sync, 1002) end),
                t(Ctx, "SSE, multicast: the offline uid's message comes on resume", 60,
                  fun(C) -> sse_offline(C, multicast, 1003) end),
                t(Ctx, "SSE, multicast_sync: {ok, 0}, and it comes on resume", 60,
                  fun(C) -> sse_offline(C, multicast_sync, 1004) end),
                t(Ctx, "SSE, router:send to an offline subscriber: it comes on resume", 60,
                  fun(C) -> sse_offline(C, router, 1005) end),
                t(Ctx, "long-poll: 200 messages 20 ms apart all arrive, ids contiguous", 120,
                  fun poll_all_arrive/1),
                t(Ctx, "a uid that moved to another C-node gets a gap there", 60,
                  fun moved_gets_gap/1),
                t(Ctx, "a uid never seen: dropped and counted, no C-node gets it", 60,
                  fun never_seen_dropped/1),
                t(Ctx, "a real C-node's hello: its epoch, and its history_ttl bounds the "
                  "last-seen entry", 60, fun real_hello_ttl/1),
                t(Ctx, "the sweep removes expired last-seen entries", 60,
                  fun sweep_expires/1),
                t(Ctx, "the last-seen cap holds when filled past it; cost per uid", 120,
                  fun cap_holds/1)]}
      end}}.

two_masters_test_() ->
    {timeout, 300,
     {setup, fun setup2/0, fun cleanup2/1,
      fun(Ctx) ->
              {inorder,
               [t(Ctx, "subscriptions made on one master are on the other", 60,
                  fun subscriptions_replicated/1),
                t(Ctx, "a message sent from either master is delivered", 60,
                  fun either_master_delivers/1),
                t(Ctx, "a client node forwards send, router:send and subscriptions", 60,
                  fun client_node/1),
                t(Ctx, "a restarted master copies the subscriptions back", 120,
                  fun master_rejoins/1)]}
      end}}.

t(Ctx, Label, Timeout, Fun) ->
    httpdtest_cluster:test_case(Label, Timeout, fun() -> Fun(Ctx) end,
                                fun() -> maps:get(logs, Ctx, []) end, fun() -> ok end).

%%% ------------------------------------------------------------------
%%% One master, two C-nodes
%%% ------------------------------------------------------------------

setup() ->
    M = start_master(),
    MNode = master_node(M),
    start_app(MNode, [{last_seen_max, ?CAP}, {last_seen_sweep_ms, 200}]),
    Servers = [start_server(#{master => MNode, presence => ?PRESENCE,
                              extra_args => ["--history", "256", "--poll-timeout", "3"]})
               || _ <- [1, 2]],
    Ctx = #{mnode => MNode, master => M, servers => Servers,
            nodes => [node_of(S) || S <- Servers],
            logs => [maps:get(log, M) | [maps:get(log, S) || S <- Servers]]},
    wait_known(MNode, maps:get(nodes, Ctx)),
    Ctx.

cleanup(#{master := M, servers := Servers}) ->
    [catch stop_server(S) || S <- Servers],
    catch stop_master(M),
    ok.

start_app(Node, Env) -> httpdtest_cluster:start_app(Node, Env).

m(Ctx, F, A) -> m(Ctx, httpdcnode, F, A).

m(#{mnode := MNode}, Mod, F, A) -> erpc:call(MNode, Mod, F, A, 60000);
m(MNode, Mod, F, A) when is_atom(MNode) -> erpc:call(MNode, Mod, F, A, 60000).

wait_known(MNode, Nodes) -> httpdtest_cluster:wait_known(MNode, Nodes, ?WAIT).

%% Waits until the master's presence says Uid is on Nodes ([]: offline).
%% Through online/1, as before the last-seen table, so that what fails on an
%% application without it is the delivery check.
wait_online(MNode, Uid, Nodes) ->
    Want = lists:sort(Nodes),
    wait_until(fun() ->
                       case catch lists:sort(m(MNode, httpdcnode, online, [Uid])) of
                           Want -> true;
                           Other -> {false, Other}
                       end
               end, ?WAIT, {online, MNode, Uid, Want}).

%% Where the master routes Uid now.
route(MNode, Uid) -> norm(m(MNode, ?PRESENCE, route, [Uid])).

norm({online, Ns}) when is_list(Ns) -> {online, lists:sort(Ns)};
norm(R) -> R.

mnode(#{mnode := MNode}) -> MNode.

server(Ctx, I) -> lists:nth(I, maps:get(servers, Ctx)).
cnode(Ctx, I) -> lists:nth(I, maps:get(nodes, Ctx)).

%% The application's counters on the master (what stats/0 shows as app);
%% #{} from an application without them, so that the delivery checks,
%% which come first, are what fails there.
app(Ctx) ->
    try m(Ctx, app_stats, [])
    catch error:{exception, undef, _} -> #{}
    end.

%% The messages held for uids not known yet (httpdcnode_presence, env
%% hold_ms) have gone: sent, or dropped and counted.
held_gone(Ctx) ->
    wait_until(fun() -> m(Ctx, ets, info, [httpdcnode_presence_held, size]) =:= 0 end,
               ?WAIT, held_gone).

deltas(Before, After) ->
    maps:from_list([{K, V - maps:get(K, Before, 0)} || {K, V} <- maps:to_list(After),
                                                   lists:member(K, [routed_offline,
                                                                    dropped_offline,
                                                                    last_seen_evicted,
                                                                    last_seen_expired])]).

%% Every message the master sent to the C-nodes before is applied there: a
%% stats request goes the same way and is answered in order.
barrier(Ctx) -> _ = m(Ctx, stats, []), ok.

%% Msg to Uid through one of the five ways; the sync ones' reply.
via(Ctx, send, Uid, Msg) -> ok = m(Ctx, send, [Uid, Msg]);
via(Ctx, send_sync, Uid, Msg) -> m(Ctx, send_sync, [Uid, Msg]);
via(Ctx, multicast, Uid, Msg) -> ok = m(Ctx, multicast, [[Uid], Msg]);
via(Ctx, multicast_sync, Uid, Msg) -> m(Ctx, multicast_sync, [[Uid], Msg]);
via(Ctx, router, Uid, Msg) -> m(Ctx, router, send, [?PUB + Uid, Msg]).

%% router:send goes to a publisher nobody is: Uid is subscribed to it.
subscribe(Ctx, Uid) ->
    ok = m(Ctx, subsmanager, add_subscriptions, [[{subscription, Uid, ?PUB + Uid}]]).

%%% ------------------------------------------------------------------
%%% Tests
%%% ------------------------------------------------------------------

sse_offline(Ctx, Via, U) ->
    S1 = server(Ctx, 1), N1 = cnode(Ctx, 1),
    Via =:= router andalso subscribe(Ctx, U),
    Sock = sse_connect(S1, U, []),
    wait_online(mnode(Ctx), U, [N1]),
    R1 = via(Ctx, Via, U, <<"m1">>),
    {E, 1, [<<"m1">>]} = parse(read_event(Sock)),
    is_sync(Via) andalso ?assertEqual({ok, 1}, R1),
    check_hello_epoch(Ctx, N1, E),
    gen_tcp:close(Sock),
    wait_online(mnode(Ctx), U, []),
    held_gone(Ctx),
    Before = app(Ctx),
    R2 = via(Ctx, Via, U, <<"m2">>),
    %% no stream written, but kept for the resume
    is_sync(Via) andalso ?assertEqual({ok, 0}, R2),
    barrier(Ctx),
    ok = send(S1, {U, <<"m3">>}),
    Sock2 = sse_connect(S1, U, ["Last-Event-ID: " ++ binary_to_list(E) ++ ":1"]),
    ?assertEqual({E, 2, [<<"m2">>]}, parse(read_event(Sock2))),
    ?assertEqual({E, 3, [<<"m3">>]}, parse(read_event(Sock2))),
    %% Its up (sent at once) is in before the close, so that a late one
    %% cannot follow the [] awaited below.
    wait_online(mnode(Ctx), U, [N1]),
    gen_tcp:close(Sock2),
    held_gone(Ctx),
    D = deltas(Before, app(Ctx)),
    ?assertMatch(#{routed_offline := 1}, D),
    wait_online(mnode(Ctx), U, []),
    ?assertEqual({offline, N1}, route(mnode(Ctx), U)),
    %% router:send's publisher is never seen: it is the one dropped
    ?assertEqual(case Via of router -> 1; _ -> 0 end, maps:get(dropped_offline, D)).

is_sync(Via) -> lists:member(Via, [send_sync, multicast_sync, router]).

%% A long-poll client has no stream between its polls: each answer ends
%% its stream. The messages sent meanwhile wait in the C-node's history.
poll_all_arrive(Ctx) ->
    S1 = server(Ctx, 1), N1 = cnode(Ctx, 1),
    U = 2001,
    subscribe(Ctx, U),
    Count = 200,
    Poller = spawn_poller(S1, U, Count),
    wait_online(mnode(Ctx), U, [N1]),
    Before = app(Ctx),
    Vias = {send, send_sync, multicast, multicast_sync, router},
    [begin
         via(Ctx, element(1 + I rem 5, Vias), U, <<"p", (integer_to_binary(I))/binary>>),
         timer:sleep(20)              % the pace of the traffic, not a wait
     end || I <- lists:seq(1, Count)],
    Got = receive {polled, Poller, G} -> G after 60000 -> error(poller_timeout) end,
    io:format(user, "~n  poll: ~b of ~b messages arrived~n", [length(Got), Count]),
    ?assertEqual([<<"p", (integer_to_binary(I))/binary>> || I <- lists:seq(1, Count)],
                 [D || {_, D, _} <- Got]),
    ?assertEqual([], [Gap || {_, _, Gap} <- Got, Gap =/= false]),
    [E | _] = Epochs = [hd(binary:split(Id, <<":">>)) || {Id, _, _} <- Got],
    ?assertEqual([E], lists:usort(Epochs)),
    ?assertEqual([<<E/binary, ":", (integer_to_binary(I))/binary>> || I <- lists:seq(1, Count)],
                 [Id || {Id, _, _} <- Got]),
    D = deltas(Before, app(Ctx)),
    io:format(user, "~n  poll: ~b of ~b messages went to the uid while it was offline~n",
              [maps:get(routed_offline, D), Count]),
    ?assert(maps:get(routed_offline, D) > 0).

%% Polls until N messages came, or for 30 s (a poll waits 3 s at most):
%% [{Id, Data, Gap}] to the caller.
spawn_poller(S, U, N) ->
    Self = self(),
    Deadline = erlang:monotonic_time(millisecond) + scaled(30000),
    spawn_link(fun() -> Self ! {polled, self(), poll_loop(S, U, "", N, [], Deadline)} end).

poll_loop(S, U, Since, N, Acc, Deadline) ->
    case length(Acc) >= N orelse erlang:monotonic_time(millisecond) > Deadline of
        true -> lists:reverse(Acc);
        false -> poll_once(S, U, Since, N, Acc, Deadline)
    end.

poll_once(S, U, Since, N, Acc, Deadline) ->
    Path = "/poll/" ++ integer_to_list(U) ++ case Since of "" -> ""; _ -> "?since=" ++ Since end,
    R = http_request(port_of(S), request_bytes("GET", Path, "HTTP/1.1",
                                                ["Connection: close"])),
    200 = maps:get(status, R),
    #{<<"messages">> := Ms, <<"gap">> := Gap} = J = json_decode(maps:get(body, R)),
    Next = case J of
               #{<<"next">> := Nx} when is_binary(Nx) -> binary_to_list(Nx);
               _ -> Since
           end,
    Acc1 = lists:foldl(fun(#{<<"id">> := Id, <<"data">> := D}, A) -> [{Id, D, Gap} | A] end,
                       Acc, Ms),
    %% A client on a slow link: longer than the C-node's presence window
    %% (50 ms), so the master hears it go offline between two polls.
    timer:sleep(?POLL_GAP_MS),
    poll_loop(S, U, Next, N, Acc1, Deadline).

moved_gets_gap(Ctx) ->
    [S1, S2] = maps:get(servers, Ctx),
    [N1, N2] = maps:get(nodes, Ctx),
    U = 3001,
    Sock = sse_connect(S1, U, []),
    wait_online(mnode(Ctx), U, [N1]),
    ok = m(Ctx, send, [U, <<"m1">>]),
    {E1, 1, [<<"m1">>]} = parse(read_event(Sock)),
    gen_tcp:close(Sock),
    wait_online(mnode(Ctx), U, []),
    ?assertEqual({ok, 0}, m(Ctx, send_sync, [U, <<"m2">>])),   % kept on N1
    %% back on the other C-node with the id of the first: another epoch
    Sock2 = sse_connect(S2, U, ["Last-Event-ID: " ++ binary_to_list(E1) ++ ":1"]),
    Gap = read_event(Sock2),
    ?assertNotEqual(nomatch, binary:match(Gap, <<"\nevent: gap\ndata: ">>)),
    wait_online(mnode(Ctx), U, [N2]),
    ok = m(Ctx, send, [U, <<"m3">>]),
    {E2, 1, [<<"m3">>]} = parse(read_event(Sock2)),
    ?assertNotEqual(E1, E2),
    gen_tcp:close(Sock2),
    %% the old node's entry was replaced by the new one
    wait_online(mnode(Ctx), U, []),
    ?assertEqual({offline, N2}, route(mnode(Ctx), U)).

never_seen_dropped(Ctx) ->
    U = 4001,
    held_gone(Ctx),
    Before = app(Ctx),
    In0 = msgs_in(Ctx),
    ok = m(Ctx, send, [U, <<"x">>]),
    ?assertEqual({ok, 0}, m(Ctx, send_sync, [U, <<"x">>])),
    ok = m(Ctx, multicast, [[U, U + 1], <<"x">>]),
    ?assertEqual({ok, 0}, m(Ctx, multicast_sync, [[U], <<"x">>])),
    ?assertEqual({ok, 0}, m(Ctx, router, send, [U, <<"x">>])),
    held_gone(Ctx),
    In1 = msgs_in(Ctx),
    ?assertMatch(#{dropped_offline := 6, routed_offline := 0}, deltas(Before, app(Ctx))),
    %% only the second stats request came
    ?assertEqual(maps:map(fun(_, V) -> V + 1 end, In0), In1),
    ?assertEqual(none, route(mnode(Ctx), U)).

msgs_in(Ctx) ->
    maps:from_list([{N, maps:get(msgs_in, S)} || {N, S} <- maps:to_list(m(Ctx, stats, [])),
                                                  N =/= app]).

%% The epoch of the ids is the one the C-node's hello told (when it sent one
%% with a map: a C-node of several masters does).
check_hello_epoch(Ctx, Node, Epoch) ->
    case catch m(Ctx, ?PRESENCE, node_info, [Node]) of
        {'EXIT', _} -> ok;                        % no hello kept here
        {_, #{epoch := HE}} -> ?assertEqual(Epoch, HE);
        {_, #{}} -> ok
    end.

%% A C-node started with --history-ttl 1: after its uid leaves, the master
%% routes to it for 1 s, then drops and counts.
real_hello_ttl(Ctx) ->
    S = start_server(#{master => mnode(Ctx), presence => ?PRESENCE,
                       extra_args => ["--history-ttl", "1"]}),
    try
        N = node_of(S),
        wait_until(fun() ->
                           case m(Ctx, ?PRESENCE, node_info, [N]) of
                               {1000, #{history_ttl := 1, epoch := <<_:8/binary>>}} -> true;
                               Other -> {false, Other}
                           end
                   end, ?WAIT, hello_kept),
        U = 7001,
        Sock = sse_connect(S, U, []),
        wait_online(mnode(Ctx), U, [N]),
        gen_tcp:close(Sock),
        wait_online(mnode(Ctx), U, []),
        ?assertEqual({offline, N}, route(mnode(Ctx), U)),
        wait_until(fun() -> route(mnode(Ctx), U) =:= none end, 5000, ttl_passed),
        %% and swept (so that the sweep test counts only its own)
        wait_until(fun() -> m(Ctx, ets, lookup, [httpdcnode_presence_last, U]) =:= [] end,
                   5000, swept),
        held_gone(Ctx),
        Before = app(Ctx),
        ?assertEqual({ok, 0}, m(Ctx, send_sync, [U, <<"too late">>])),
        held_gone(Ctx),
        ?assertMatch(#{dropped_offline := 1, routed_offline := 0}, deltas(Before, app(Ctx)))
    after
        stop_server(S),
        wait_known(mnode(Ctx), maps:get(nodes, Ctx))
    end.

%% A C-node that keeps its history 1 s says so in its hello (stood for by
%% this test: reports sent to the master's presence as a C-node would).
sweep_expires(Ctx) ->
    Fake = 'fake_ttl@nohost',
    Uids = lists:seq(500001, 500100),
    P = {?PRESENCE, mnode(Ctx)},
    Before = app(Ctx),
    P ! {httpdcnode, Fake, hello, #{history_ttl => 1, history => 32,
                                    epoch => <<"0000abcd">>, max_users => 1000000}},
    P ! {httpdcnode, Fake, snapshot, Uids},
    P ! {httpdcnode, Fake, snapshot, []},
    ok = m(Ctx, ?PRESENCE, sync, []),
    ?assertEqual({offline, Fake}, m(Ctx, ?PRESENCE, route, [500001])),
    ?assertEqual({1000, #{history_ttl => 1, history => 32, epoch => <<"0000abcd">>,
                          max_users => 1000000}}, m(Ctx, ?PRESENCE, node_info, [Fake])),
    %% the periodic sweep (every 200 ms here), not a call
    wait_until(fun() ->
                       case m(Ctx, ets, lookup, [httpdcnode_presence_last, 500100]) of
                           [] -> true;
                           R -> {false, R}
                       end
               end, 5000, swept),
    ?assertEqual(none, m(Ctx, ?PRESENCE, route, [500001])),
    ?assertMatch(#{last_seen_expired := 100}, deltas(Before, app(Ctx))),
    P ! {nodedown, Fake, []},
    ok = m(Ctx, ?PRESENCE, sync, []).

cap_holds(Ctx) ->
    Fake = 'fake_cap@nohost',
    N = ?CAP + 5000,
    Uids = lists:seq(600001, 600000 + N),
    P = {?PRESENCE, mnode(Ctx)},
    #{last_seen_entries := E0} = Before = app(Ctx),
    [begin
         P ! {httpdcnode, Fake, up, Chunk},
         P ! {httpdcnode, Fake, down, Chunk}
     end || Chunk <- chunks(Uids, 1000)],
    ok = m(Ctx, ?PRESENCE, sync, []),
    #{last_seen_entries := E1, last_seen_bytes := Bytes} = After = app(Ctx),
    ?assertEqual(?CAP, E1),
    ?assertEqual(?CAP, m(Ctx, ets, info, [httpdcnode_presence_last_t, size])),
    ?assertMatch(#{last_seen_evicted := V} when V =:= E0 + N - ?CAP, deltas(Before, After)),
    %% the newest are kept, the oldest went
    ?assertEqual({offline, Fake}, m(Ctx, ?PRESENCE, route, [600000 + N])),
    ?assertEqual(none, m(Ctx, ?PRESENCE, route, [600001])),
    PerUid = Bytes / E1,
    io:format(user, "~n  last seen: ~b entries, ~b bytes, ~.1f bytes per uid~n",
              [E1, Bytes, PerUid]),
    ?assert(PerUid < 200),
    P ! {nodedown, Fake, []},
    ok = m(Ctx, ?PRESENCE, sync, []).

chunks([], _) -> [];
chunks(L, K) when length(L) =< K -> [L];
chunks(L, K) -> {A, B} = lists:split(K, L), [A | chunks(B, K)].

%%% ------------------------------------------------------------------
%%% Two masters and a client node
%%% ------------------------------------------------------------------

setup2() ->
    Procs = [start_master() || _ <- [1, 2, 3]],
    try setup2(Procs)
    catch C:E:St ->
            [catch stop_master(P) || P <- Procs],
            erlang:raise(C, E, St)
    end.

setup2(Procs) ->
    [NA, NB, NC] = [master_node(X) || X <- Procs],
    Masters = [NA, NB],
    start_app(NA, [{masters, Masters}]),
    start_app(NB, [{masters, Masters}]),
    start_app(NC, [{masters, Masters}, {role, client}]),
    Logs = [maps:get(log, X) || X <- Procs],
    Ctx = #{a => NA, b => NB, c => NC, procs => Procs, logs => Logs},
    %% A C-node that takes several masters (--master A,B) connects to both;
    %% one that takes a single master reports to A alone.
    Opts = #{presence => ?PRESENCE, extra_args => ["--history", "64"]},
    Both = try start_server(Opts#{master => list_to_atom(atom_to_list(NA) ++ "," ++
                                                             atom_to_list(NB))}) of
               S2 ->
                   try wait_known(NA, [node_of(S2)]), wait_known(NB, [node_of(S2)]), S2
                   catch error:{timeout_waiting_for, _, _} -> catch stop_server(S2), false
                   end
           catch error:{server_not_ready, _, _} -> false
           end,
    S = case Both of
            false ->
                io:format(user, "~n  this C-node takes one --master: it reports to A only, "
                          "so only A's delivery is checked~n", []),
                S1 = start_server(Opts#{master => NA}),
                wait_known(NA, [node_of(S1)]),
                S1;
            _ -> Both
        end,
    Ctx#{both => Both =/= false, server => S, cnode => node_of(S),
         logs => [maps:get(log, S) | Logs]}.

cleanup2(Ctx = #{procs := Procs, server := S}) ->
    catch stop_server(S),
    [catch stop_master(P) || P <- Procs],
    catch kill_master_by_name(maps:get(b, Ctx)),
    ok.

sub(X, Y) -> {subscription, X, Y}.

subscriptions_replicated(#{a := NA, b := NB}) ->
    [?assertEqual(lists:sort([NA, NB]),
                  lists:sort(m(N, mnesia, table_info, [subscription, ram_copies])))
     || N <- [NA, NB]],
    ok = m(NA, subsmanager, add_subscriptions, [[sub(11, 10), sub(12, 10)]]),
    ok = m(NB, subsmanager, add_subscriptions, [[sub(13, 10)]]),
    %% dirty writes reach the other copy a moment later
    [wait_subscribers(N, 10, [11, 12, 13]) || N <- [NA, NB]],
    %% a transaction: on both copies when it returns
    ok = m(NB, subsmanager, remove_subscriptions, [[sub(12, 10)]]),
    ?assertEqual([11, 13], lists:sort(m(NA, subsmanager, get_subscribers, [10]))).

wait_subscribers(Node, Id, Want) ->
    wait_until(fun() ->
                       case lists:sort(m(Node, subsmanager, get_subscribers, [Id])) of
                           Want -> true;
                           Other -> {false, Other}
                       end
               end, ?T, {subscribers, Node, Id, Want}).

either_master_delivers(Ctx = #{a := NA, b := NB, server := S, cnode := CN, both := Both}) ->
    U = 5001,
    Sock = sse_connect(S, U, []),
    Senders = case Both of true -> [NA, NB]; false -> [NA] end,
    [wait_online(N, U, [CN]) || N <- Senders],
    [begin
         Msg = atom_to_binary(N),
         ?assertEqual({ok, 1}, m(N, httpdcnode, send_sync, [U, Msg])),
         ?assertMatch({_, _, [Msg]}, parse(read_event(Sock)))
     end || N <- Senders],
    {E, Seq, _} = case Both of
                      true ->
                          ok = m(NB, httpdcnode, send, [U, <<"b async">>]),
                          parse(read_event(Sock));
                      false -> {undefined, 0, []}
                  end,
    gen_tcp:close(Sock),
    %% offline for a moment: routed from either master
    Both andalso begin
                     [wait_online(N, U, []) || N <- Senders],
                     ?assertEqual({ok, 0}, m(NB, httpdcnode, send_sync, [U, <<"while away">>])),
                     Sock2 = sse_connect(S, U, ["Last-Event-ID: " ++ binary_to_list(E) ++ ":" ++
                                                    integer_to_list(Seq)]),
                     ?assertEqual({E, Seq + 1, [<<"while away">>]}, parse(read_event(Sock2))),
                     gen_tcp:close(Sock2),
                     true
                 end,
    _ = Ctx,
    ok.

client_node(#{a := NA, b := NB, c := NC, server := S, cnode := CN}) ->
    U = 6001,
    ?assertEqual(undefined, m(NC, erlang, whereis, [?PRESENCE])),
    ?assertEqual([CN], m(NC, httpdcnode, nodes, [])),
    ok = m(NC, subsmanager, add_subscriptions, [[sub(U, 6000)]]),
    [wait_subscribers(N, 6000, [U]) || N <- [NA, NB, NC]],
    Sock = sse_connect(S, U, []),
    wait_online(NA, U, [CN]),
    ?assertEqual([CN], m(NC, httpdcnode, online, [U])),
    ok = m(NC, httpdcnode, send, [U, <<"from the client">>]),
    {E, 1, [<<"from the client">>]} = parse(read_event(Sock)),
    ?assertEqual({ok, 1}, m(NC, router, send, [6000, <<"published">>])),
    {E, 2, [<<"published">>]} = parse(read_event(Sock)),
    ok = m(NC, httpdcnode, broadcast, [<<"to all">>]),
    {E, 3, [<<"to all">>]} = parse(read_event(Sock)),
    ?assertMatch(#{app := #{}}, m(NC, httpdcnode, stats, [])),
    ok = m(NC, httpdcnode, kick, [U]),
    ?assertEqual(closed, read_closed(Sock)).

master_rejoins(#{a := NA, b := NB, procs := [_, B, _]}) ->
    ok = m(NA, subsmanager, add_subscriptions, [[sub(21, 20)]]),
    wait_subscribers(NB, 20, [21]),
    ok = kill_master(B),
    B2 = restart_master(B),
    _ = B2,
    start_app(NB, [{masters, [NA, NB]}]),
    ?assertEqual([21], m(NB, subsmanager, get_subscribers, [20])),
    ?assertEqual([11, 13], lists:sort(m(NB, subsmanager, get_subscribers, [10]))),
    ok = m(NB, subsmanager, add_subscriptions, [[sub(22, 20)]]),
    wait_subscribers(NA, 20, [21, 22]).

%%% ------------------------------------------------------------------
%%% SSE on a plain socket
%%% ------------------------------------------------------------------

%% GET /sse/Uid; returns the socket once the head and the retry advice came.
sse_connect(S, Uid, Headers) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S), [binary, {active, false}]),
    ok = gen_tcp:send(Sock, request_bytes("GET", "/sse/" ++ integer_to_list(Uid),
                                          "HTTP/1.1", Headers)),
    {Head, Rest} = read_until(Sock, <<"\r\n\r\n">>, <<>>),
    ?assertMatch(<<"HTTP/1.1 200 OK\r\n", _/binary>>, Head),
    put({buf, Sock}, Rest),
    <<"retry: ", _/binary>> = read_event(Sock),
    Sock.

%% The stream ends (a kick): whatever bytes come, then the close.
read_closed(Sock) ->
    case gen_tcp:recv(Sock, 0, scaled(?T)) of
        {ok, _} -> read_closed(Sock);
        {error, closed} -> closed;
        Other -> Other
    end.

parse(Event) ->
    [<<"id: ", Id/binary>> | Rest] = binary:split(Event, <<"\n">>, [global, trim_all]),
    [Epoch, Seq] = binary:split(Id, <<":">>),
    {Epoch, binary_to_integer(Seq), [D || <<"data: ", D/binary>> <- Rest]}.
