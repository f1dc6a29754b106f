%% SPDX-License-Identifier: Apache-2.0
%% The httpdcnode application on a real master node with three real
%% C-nodes (./httpdcnode --presence httpdcnode_presence) and real HTTP
%% streams: routing, acknowledged sends, presence through a C-node's death,
%% a presence server crash and a master restart, and a pubsub publish over a
%% generated friends graph.
%%
%% The tests run in order on one cluster; each opens its own streams (uids
%% in its own range) and closes them at the end.
-module(cluster_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_http, [close/1, open_stream/2, expect_chunk/2, next_event/2, expect_end/2]).
-import(httpdtest_master, [start_master/0, master_node/1, stop_master/1, kill_master_by_name/1,
                           kill_master/1, restart_master/1]).
-import(httpdtest_server, [start_server/1, node_of/1, stop_server/1]).
-import(httpdtest_wait, [wait_until/3]).
-import(httpdtest_os, [repo_root/0, unique/1, signal/2, wait_exit/2]).

-define(WAIT, 15000).        % presence, snapshots, node up/down
-define(RECV, 5000).         % one chunk on a stream
-define(PRESENCE, httpdcnode_presence).

cluster_test_() ->
    {timeout, 900,
     {setup, fun setup/0, fun cleanup/1,
      fun(Ctx) ->
              {inorder,
               [t(Ctx, "send/2 reaches only the C-node holding the uid", 60, fun send_routes/1),
                t(Ctx, "send_sync/2 counts the connections written to", 60, fun send_sync_counts/1),
                t(Ctx, "multicast: one Erlang message per C-node", 60, fun multicast_per_node/1),
                t(Ctx, "broadcast reaches all, kick ends one uid", 60, fun broadcast_and_kick/1),
                t(Ctx, "stats/0 asks every C-node", 60, fun stats_all/1),
                t(Ctx, "a restarted presence server asks for snapshots", 60, fun presence_crash/1),
                t(Ctx, "pubsub publish reaches exactly the online subscribers", 300, fun pubsub/1),
                t(Ctx, "killed C-node: its uids vanish, the others stay", 60, fun cnode_killed/1),
                t(Ctx, "master restart: snapshots rebuild presence", 120, fun master_restart/1)]}
      end}}.

%% Streams a test left open (it failed half way) are closed after it.
t(Ctx, Label, Timeout, Fun) ->
    httpdtest_cluster:test_case(Label, Timeout, fun() -> Fun(Ctx) end,
                                fun() -> logs(Ctx) end,
                                fun() ->
                                        [catch close(C) || C <- get_conns()],
                                        erase(cluster_conns)
                                end).

get_conns() ->
    case get(cluster_conns) of
        undefined -> [];
        L -> L
    end.

logs(#{servers := Ss, master_log := ML}) ->
    [ML | [maps:get(log, S) || S <- Ss]].

%%% ------------------------------------------------------------------
%%% Cluster
%%% ------------------------------------------------------------------

setup() ->
    M = start_master(),
    MNode = master_node(M),
    start_app(MNode),
    Servers = [start_server(#{master => MNode, presence => ?PRESENCE}) || _ <- [1, 2, 3]],
    Nodes = [node_of(S) || S <- Servers],
    Ctx = #{mnode => MNode, servers => Servers, nodes => Nodes,
            master_log => maps:get(log, M), holder => hold(M)},
    wait_known(Ctx, Nodes),
    Ctx.

cleanup(#{mnode := MNode, servers := Servers, holder := H}) ->
    [catch stop_server(S) || S <- Servers],
    catch stop_master(held(H)),
    catch kill_master_by_name(MNode),
    exit(H, kill),
    ok.

%% The master's proc map changes when it restarts: kept in a small process.
hold(M) -> spawn(fun() -> hold_loop(M) end).

hold_loop(M) ->
    receive
        {get, From} -> From ! {held, M}, hold_loop(M);
        {put, M2} -> hold_loop(M2)
    end.

held(H) ->
    H ! {get, self()},
    receive {held, M} -> M after 5000 -> error(holder_gone) end.

%% Starts httpdcnode on the master, with this build's beams on its path.
start_app(MNode) -> httpdtest_cluster:start_app(MNode, []).

m(Ctx, F, A) -> m(Ctx, httpdcnode, F, A).

m(#{mnode := MNode}, Mod, F, A) ->
    erpc:call(MNode, Mod, F, A, 60000).

wait_known(#{mnode := MNode}, Nodes) -> httpdtest_cluster:wait_known(MNode, Nodes, ?WAIT).

wait_online(Ctx, Uid, Nodes) ->
    Want = lists:sort(Nodes),
    wait_until(fun() ->
                       case catch lists:sort(m(Ctx, online, [Uid])) of
                           Want -> true;
                           Other -> {false, Other}
                       end
               end, ?WAIT, {online, Uid, Want}).

%% msgs_in of every C-node, as the master's stats/0 reports it (its key
%% app is the application's own counters).
msgs_in(Ctx) ->
    maps:map(fun(_, #{msgs_in := N}) -> N end, maps:remove(app, m(Ctx, stats, []))).

%% Messages each node took between two msgs_in/1 readings, less the
%% stats request of the second reading.
delta(Before, After) ->
    maps:map(fun(N, A) -> A - maps:get(N, Before) - 1 end, After).

open(Ctx, I, Uid) ->
    C = open_stream(lists:nth(I, maps:get(servers, Ctx)), Uid),
    put(cluster_conns, [C | get_conns()]),
    C.

node(Ctx, I) -> lists:nth(I, maps:get(nodes, Ctx)).

chunk(C) -> expect_chunk(C, ?RECV).

%% Nothing arrived on C: checked after later messages on other streams
%% were seen, so anything misrouted would have come first.
silent(C) ->
    ?assertEqual(timeout, next_event(C, 0)).

close_all(Cs) -> [close(C) || C <- Cs], ok.

%%% ------------------------------------------------------------------
%%% Tests
%%% ------------------------------------------------------------------

send_routes(Ctx) ->
    [N1, N2, N3] = [node(Ctx, I) || I <- [1, 2, 3]],
    C101 = open(Ctx, 1, 101), C102 = open(Ctx, 2, 102), C103 = open(Ctx, 3, 103),
    C104a = open(Ctx, 1, 104), C104b = open(Ctx, 2, 104),
    wait_online(Ctx, 101, [N1]), wait_online(Ctx, 102, [N2]),
    wait_online(Ctx, 103, [N3]), wait_online(Ctx, 104, [N1, N2]),
    Before = msgs_in(Ctx),
    ok = m(Ctx, send, [101, <<"for 101">>]),
    ok = m(Ctx, send, [104, "for 104"]),
    ok = m(Ctx, send, [102, [<<"for ">>, "10", $2]]),
    ok = m(Ctx, send, [105, <<"nobody holds 105">>]),
    ?assertEqual(<<"for 101">>, chunk(C101)),
    ?assertEqual(<<"for 104">>, chunk(C104a)),
    ?assertEqual(<<"for 104">>, chunk(C104b)),
    ?assertEqual(<<"for 102">>, chunk(C102)),
    ?assertEqual(#{N1 => 2, N2 => 2, N3 => 0}, delta(Before, msgs_in(Ctx))),
    silent(C103), silent(C101), silent(C104a),
    close_all([C101, C102, C103, C104a, C104b]).

send_sync_counts(Ctx) ->
    [N1, N2, _] = [node(Ctx, I) || I <- [1, 2, 3]],
    Cs = [open(Ctx, 1, 201), open(Ctx, 2, 201), open(Ctx, 2, 201)],
    C202 = open(Ctx, 3, 202),
    wait_online(Ctx, 201, [N1, N2]),
    ?assertEqual({ok, 3}, m(Ctx, send_sync, [201, <<"sync 201">>])),
    [?assertEqual(<<"sync 201">>, chunk(C)) || C <- Cs],
    ?assertEqual({ok, 1}, m(Ctx, send_sync, [202, "sync 202"])),
    ?assertEqual(<<"sync 202">>, chunk(C202)),
    ?assertEqual({ok, 0}, m(Ctx, send_sync, [209, "offline"])),
    %% the last stream of 202 goes: presence drops it, nothing is written
    close(C202),
    wait_online(Ctx, 202, []),
    ?assertEqual({ok, 0}, m(Ctx, send_sync, [202, "gone"])),
    close_all(Cs).

multicast_per_node(Ctx) ->
    [N1, N2, N3] = [node(Ctx, I) || I <- [1, 2, 3]],
    C301 = open(Ctx, 1, 301), C302 = open(Ctx, 1, 302), C303 = open(Ctx, 2, 303),
    C304 = open(Ctx, 3, 304),
    [wait_online(Ctx, U, [N]) || {U, N} <- [{301, N1}, {302, N1}, {303, N2}, {304, N3}]],
    Uids = [301, 302, 303, 304, 305],
    Before = msgs_in(Ctx),
    ?assertEqual({ok, 4}, m(Ctx, multicast_sync, [Uids, <<"mc sync">>])),
    ok = m(Ctx, multicast, [Uids, "mc"]),
    [begin
         ?assertEqual(<<"mc sync">>, chunk(C)),
         ?assertEqual(<<"mc">>, chunk(C))
     end || C <- [C301, C302, C303, C304]],
    %% N1 holds two of the uids and still gets one message per call
    ?assertEqual(#{N1 => 2, N2 => 2, N3 => 2}, delta(Before, msgs_in(Ctx))),
    close_all([C301, C302, C303, C304]).

broadcast_and_kick(Ctx) ->
    [N1, N2, N3] = [node(Ctx, I) || I <- [1, 2, 3]],
    C401 = open(Ctx, 1, 401), C402 = open(Ctx, 2, 402), C403 = open(Ctx, 3, 403),
    [wait_online(Ctx, U, [N]) || {U, N} <- [{401, N1}, {402, N2}, {403, N3}]],
    ok = m(Ctx, broadcast, [<<"to everyone">>]),
    [?assertEqual(<<"to everyone">>, chunk(C)) || C <- [C401, C402, C403]],
    ok = m(Ctx, kick, [402]),
    ok = expect_end(C402, ?RECV),
    wait_online(Ctx, 402, []),
    ?assertEqual({ok, 2}, m(Ctx, multicast_sync, [[401, 402, 403], "still here"])),
    [?assertEqual(<<"still here">>, chunk(C)) || C <- [C401, C403]],
    close_all([C401, C402, C403]).

stats_all(Ctx) ->
    Nodes = maps:get(nodes, Ctx),
    C = open(Ctx, 2, 501),
    %% earlier tests' streams are closed by now; wait until their uids are gone
    wait_until(fun() ->
                       case [m(Ctx, online_uids, [N]) || N <- Nodes] of
                           [[], [501], []] -> true;
                           Other -> {false, Other}
                       end
               end, ?WAIT, only_501_online),
    {App, Stats} = maps:take(app, m(Ctx, stats, [])),
    ?assertEqual(lists:sort(Nodes), lists:sort(maps:keys(Stats))),
    [?assert(is_integer(maps:get(K, App))) || K <- [routed_offline, dropped_offline,
                                                     last_seen_entries, last_seen_bytes]],
    [?assert(is_map_key(K, S)) || S <- maps:values(Stats),
                                  K <- [streams_open, uids_online, msgs_in, deliveries]],
    ?assertEqual(1, maps:get(uids_online, maps:get(node(Ctx, 2), Stats))),
    ?assertEqual(0, maps:get(uids_online, maps:get(node(Ctx, 1), Stats))),
    close(C).

presence_crash(Ctx) ->
    [N1, _, N3] = [node(Ctx, I) || I <- [1, 2, 3]],
    C601 = open(Ctx, 1, 601), C603 = open(Ctx, 3, 603),
    wait_online(Ctx, 601, [N1]), wait_online(Ctx, 603, [N3]),
    Old = m(Ctx, erlang, whereis, [?PRESENCE]),
    true = m(Ctx, erlang, exit, [Old, kill]),
    %% the new server starts empty and rebuilds from the snapshots it asks for
    wait_until(fun() ->
                       case m(Ctx, erlang, whereis, [?PRESENCE]) of
                           P when is_pid(P), P =/= Old -> true;
                           P -> {false, P}
                       end
               end, ?WAIT, presence_restarted),
    wait_online(Ctx, 601, [N1]), wait_online(Ctx, 603, [N3]),
    wait_known(Ctx, maps:get(nodes, Ctx)),
    close_all([C601, C603]).

pubsub(Ctx) ->
    Users = 3000,
    File = filename:join([repo_root(), "build", "tests",
                          unique("friends") ++ ".txt"]),
    try
        {ok, NumEdges} = friends_graph:write(File, Users, 4, 2026),
        ?assertEqual({ok, NumEdges}, m(Ctx, friends_loader, load, [File])),
        ?assertEqual(2 * NumEdges, m(Ctx, subsmanager, count, [])),
        Friends = friends(friends_graph:edges(Users, 4, 2026)),
        %% every third user online, spread over the three C-nodes
        Online = lists:seq(1, Users, 3),
        Conns = maps:from_list([{U, open(Ctx, 1 + (U div 3) rem 3, U)} || U <- Online]),
        [wait_online(Ctx, U, [node(Ctx, 1 + (U div 3) rem 3)]) || U <- Online],
        %% the user with most friends (online), and an offline user
        Hub = hd(lists:sort(fun(A, B) -> length(maps:get(A, Friends)) >=
                                             length(maps:get(B, Friends)) end, Online)),
        Quiet = hd([U || U <- lists:seq(Users, 1, -1), not maps:is_key(U, Conns),
                         lists:any(fun(F) -> maps:is_key(F, Conns) end, maps:get(U, Friends))]),
        Expect = fun(Id) -> [U || U <- [Id | maps:get(Id, Friends)], maps:is_key(U, Conns)] end,
        ExpHub = Expect(Hub),
        ExpQuiet = Expect(Quiet),
        ?assert(length(ExpHub) > 10),
        ?assertEqual({ok, length(ExpHub)}, m(Ctx, router, send, [Hub, <<"hub news">>])),
        ?assertEqual({ok, length(ExpQuiet)}, m(Ctx, router, send, [Quiet, <<"quiet news">>])),
        ok = m(Ctx, broadcast, [<<"marker">>]),
        Got = maps:map(fun(_, C) -> until_marker(C, []) end, Conns),
        Want = maps:map(fun(U, _) ->
                                [<<"hub news">> || lists:member(U, ExpHub)] ++
                                    [<<"quiet news">> || lists:member(U, ExpQuiet)]
                        end, Conns),
        Wrong = [{U, maps:get(U, Want), G} || {U, G} <- maps:to_list(Got), G =/= maps:get(U, Want)],
        ?assertEqual([], Wrong),
        close_all(maps:values(Conns)),
        %% What went to the offline friends, never seen, waited for them
        %% (httpdcnode_presence, held messages): gone before the next case
        %% opens some of those uids.
        wait_until(fun() -> m(Ctx, ets, info, [httpdcnode_presence_held, size]) =:= 0 end,
                   ?WAIT, held_gone)
    after
        file:delete(File),
        catch m(Ctx, subsmanager, clear, [])
    end.

friends(Edges) ->
    lists:foldl(fun({A, B}, M) ->
                        M1 = maps:update_with(A, fun(L) -> [B | L] end, [B], M),
                        maps:update_with(B, fun(L) -> [A | L] end, [A], M1)
                end, #{}, Edges).

until_marker(C, Acc) ->
    case expect_chunk(C, ?RECV) of
        <<"marker">> -> lists:reverse(Acc);
        B -> until_marker(C, [B | Acc])
    end.

cnode_killed(Ctx) ->
    [S1, S2, S3] = maps:get(servers, Ctx),
    [N1, N2, N3] = [node(Ctx, I) || I <- [1, 2, 3]],
    C701 = open(Ctx, 1, 701), C702 = open(Ctx, 2, 702), C703 = open(Ctx, 3, 703),
    C704a = open(Ctx, 1, 704), C704b = open(Ctx, 3, 704),
    [wait_online(Ctx, U, Ns) || {U, Ns} <- [{701, [N1]}, {702, [N2]}, {703, [N3]},
                                            {704, [N1, N3]}]],
    ok = signal(S3, "KILL"),
    {ok, _, _} = wait_exit(S3, 10000),
    [?assertMatch(E when E =:= closed; element(1, E) =:= tcp_error, next_event(C, ?RECV))
     || C <- [C703, C704b]],
    wait_online(Ctx, 703, []),
    wait_online(Ctx, 704, [N1]),
    wait_known(Ctx, [N1, N2]),
    ?assertEqual([N1], m(Ctx, online, [701])),
    ?assertEqual([N2], m(Ctx, online, [702])),
    ?assertEqual([], m(Ctx, online_uids, [N3])),
    ?assertEqual({ok, 1}, m(Ctx, send_sync, [704, "after the kill"])),
    ?assertEqual(<<"after the kill">>, chunk(C704a)),
    _ = S1, _ = S2,
    close_all([C701, C702, C703, C704a, C704b]).

master_restart(Ctx = #{holder := H}) ->
    [N1, N2] = [node(Ctx, I) || I <- [1, 2]],
    C801 = open(Ctx, 1, 801), C802 = open(Ctx, 2, 802),
    C803a = open(Ctx, 1, 803), C803b = open(Ctx, 2, 803),
    [wait_online(Ctx, U, Ns) || {U, Ns} <- [{801, [N1]}, {802, [N2]}, {803, [N1, N2]}]],
    ok = kill_master(held(H)),
    M2 = restart_master(held(H)),
    H ! {put, M2},
    start_app(maps:get(mnode, Ctx)),
    %% the new master knew nothing: everything below came from snapshots
    [wait_online(Ctx, U, Ns) || {U, Ns} <- [{801, [N1]}, {802, [N2]}, {803, [N1, N2]}]],
    wait_known(Ctx, [N1, N2]),
    ?assertEqual({ok, 4}, m(Ctx, multicast_sync, [[801, 802, 803], "after restart"])),
    [?assertEqual(<<"after restart">>, chunk(C)) || C <- [C801, C802, C803a, C803b]],
    close_all([C801, C802, C803a, C803b]).
