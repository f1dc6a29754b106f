%% SPDX-License-Identifier: Apache-2.0
%% Nothing sent through the httpdcnode application is lost without the
%% client being told: two real masters with the application (env masters,
%% net_ticktime 4), real C-nodes (./httpdcnode --master A,B --presence
%% httpdcnode_presence), real SSE clients on plain sockets, and messages at
%% 1,000 a second through httpdcnode:send/2 on master A.
%%
%% - A C-node frozen (SIGSTOP) for longer than the masters' tick time, so
%%   that both drop their link to it with what was queued there, then let
%%   go (SIGCONT): every client gets every message once, in order, with no
%%   gap (what the masters kept is handed over once the node is back).
%% - A C-node killed (SIGKILL) and started again under its name while the
%%   messages go on: its clients come back with the id they had and get a
%%   gap (a new epoch), then every message sent since, in order, then the
%%   live ones. With --history-file the ids go on (the same epoch), with no
%%   gap: the node tells each master the last of its numbers the file
%%   holds, and gets only the rest again (the messages it had delivered
%%   but not acknowledged when killed are not doubled, those it had not
%%   are not lost); a case kills it with such messages on purpose, and
%%   another with such publishes to topics (httpdcnode:publish/2). With a
%%   hold bound smaller than the outage (application env
%%   unacked_max_bytes), the oldest held messages go (held_dropped) and their
%%   uids are told a gap: still nothing lost without one.
%% - The link from A to a C-node cut (A disconnects it and refuses it) just
%%   after A's messages arrived but before their acknowledgements reached
%%   A: A hands them to B, which delivers them again; the C-node drops the
%%   copies (seq_duplicates) and each client gets each message once.
%%
%% Each case prints what it measured ("delivery: ...").
-module(cluster_delivery_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [start_server/1, node_of/1, stop_server/1, restart_server/1,
                           kill_server/1, stats/1, wait_stat/4]).
-import(httpdtest_master, [master_node/1, stop_master/1, kill_master_by_name/1]).
-import(httpdtest_wait, [wait_until/3]).
-import(httpdtest_os, [signal/2, proc_status/1, repo_root/0, unique/1, scaled/1]).

-define(F, cluster_failure_tests).
-define(PRESENCE, httpdcnode_presence).
-define(WAIT, 30000).
-define(T, 5000).
%% The masters' net_ticktime, s.
-define(TICK, 4).
%% Messages a second through master A.
-define(RATE, 1000).
%% Master A's bounds in the bounded cases: unacked_max_bytes about 700 of
%% the messages here (a few bytes each, 8 more for the uid), unacked_max_ms a
%% third of the ~3 s the node is down; far less than it is sent meanwhile.
-define(HOLD_BYTES, 10000).
-define(HOLD_MS, 1000).

%% run on master A
-export([sender/4]).
%% for topics_delivery_tests
-export([masters/1, keeper/1, start_sender/2, wait_sent/2, sent/1, counts/1, stop_sender/1, judge/3,
         judge_events/3, settle/2, print/3, delta_map/2, seq_stats/1]).

delivery_test_() ->
    {timeout, 600,
     {setup, fun setup/0, fun cleanup/1,
      fun(Ctx) ->
              {inorder,
               [t(Ctx, "a C-node frozen past the tick time under 1,000 msg/s: every message "
                  "once, in order, no gap", 180, fun frozen/1),
                t(Ctx, "a C-node killed and restarted under 1,000 msg/s: a gap (new epoch), "
                  "then every message sent while it was down, in order", 180,
                  fun(C) -> killed(C, unbounded) end),
                t(Ctx, "the same past the hold bound in bytes: the oldest dropped and "
                  "counted, their uids told a gap, none lost without one", 180,
                  fun(C) -> killed(C, {bounded, unacked_max_bytes, ?HOLD_BYTES}) end),
                t(Ctx, "the same past the hold bound in time", 180,
                  fun(C) -> killed(C, {bounded, unacked_max_ms, ?HOLD_MS}) end),
                t(Ctx, "the same with --history-file: the ids go on, no gap, every message "
                  "once, in order, whatever the node had not acknowledged when killed",
                  180, fun killed_history_file/1),
                t(Ctx, "--history-file, killed with messages it had delivered and not "
                  "acknowledged (in doubt): not sent again, none told a gap, each once", 180,
                  fun killed_in_doubt/1),
                t(Ctx, "--history-file, killed with publishes it had delivered and not "
                  "acknowledged (in doubt): not published again, none told a gap, each once, "
                  "the topic's ids one after another", 180, fun killed_in_doubt_topics/1),
                t(Ctx, "a resend through the other master after the original arrived: the "
                  "copy dropped, each message once", 120, fun duplicate/1)]}
      end}}.

t(Ctx, Label, Timeout, Fun) ->
    httpdtest_cluster:test_case(Label, Timeout, fun() -> Fun(Ctx) end,
                                fun() -> logs(Ctx) end, fun() -> close_opened() end).

close_opened() ->
    [?F:close_client(C) || C <- get_opened()],
    put(delivery_opened, []).

get_opened() -> case get(delivery_opened) of undefined -> []; L -> L end.

%%% ------------------------------------------------------------------
%%% The cluster: masters A and B, one C-node
%%% ------------------------------------------------------------------

setup() ->
    httpdtest_cluster:start_masters(2, fun setup/1).

setup(Procs = [_, _]) ->
    {[A, B] = Masters, Both} = masters(Procs),
    S = start_server(#{master => Both, presence => ?PRESENCE,
                       extra_args => ["--history", "4096"]}),
    {Keeper, Tab} = keeper(Masters),
    ets:insert(Tab, [{server, S}, {masters, Procs}]),
    Ctx = #{a => A, b => B, node => node_of(S), tab => Tab, keeper => Keeper},
    [httpdtest_cluster:wait_known(M, [node_of(S)], ?WAIT) || M <- Masters],
    Ctx.

%% The master nodes of Procs at net_ticktime ?TICK, each running the
%% application (env masters: both): {[A, B], the --master naming both}.
masters(Procs) ->
    [A, B] = Masters = [master_node(P) || P <- Procs],
    [begin
         _ = m(M, net_kernel, set_net_ticktime, [?TICK, 0]),
         wait_until(fun() -> m(M, net_kernel, get_net_ticktime, []) =:= ?TICK end, ?WAIT,
                    {net_ticktime, M})
     end || M <- Masters],
    [httpdtest_cluster:start_app(N, [{masters, Masters}]) || N <- Masters],
    {Masters, list_to_atom(atom_to_list(A) ++ "," ++ atom_to_list(B))}.

cleanup(Ctx = #{a := A, b := B, keeper := Keeper}) ->
    S = server(Ctx),
    _ = signal(S, "CONT"),
    catch stop_server(S),
    [catch stop_master(P) || P <- ets:lookup_element(maps:get(tab, Ctx), masters, 2)],
    [catch kill_master_by_name(N) || N <- [A, B]],
    Keeper ! stop,
    ok.

%% Keeps the setup's table, and sends each master something twice a
%% second: this node ticks at its own (longer) net_ticktime, and a master
%% hearing nothing from it for ?TICK s would drop it.
keeper(Masters) ->
    Self = self(),
    Pid = spawn(fun() ->
                        T = ets:new(cluster_delivery_state, [public]),
                        Self ! {tab, self(), T},
                        keep(Masters)
                end),
    receive {tab, Pid, T} -> {Pid, T} after 5000 -> error(no_keeper) end.

keep(Masters) ->
    receive stop -> ok
    after 500 ->
            [erlang:send({cluster_delivery_nobody, M}, tick, [noconnect]) || M <- Masters],
            keep(Masters)
    end.

server(#{tab := Tab}) -> ets:lookup_element(Tab, server, 2).
set_server(#{tab := Tab}, S) -> ets:insert(Tab, {server, S}).

logs(Ctx = #{tab := Tab}) ->
    [maps:get(log, P) || P <- ets:lookup_element(Tab, masters, 2)] ++ [maps:get(log, server(Ctx))];
logs(_) -> [].

m(Node, Mod, F, A) -> erpc:call(Node, Mod, F, A, 60000).

%% The application's counters on M.
app(M) -> m(M, httpdcnode, app_stats, []).

delta(K, Before, After) -> maps:get(K, After, 0) - maps:get(K, Before, 0).

%% Until master M's presence says the C-node holds exactly Uids.
wait_view(M, N, Uids) -> ?F:wait_view(M, N, Uids).

sse(S, U) -> sse(S, U, []).

sse(S, U, Headers) ->
    C = ?F:sse_client(S, U, Headers),
    put(delivery_opened, [C | get_opened()]),
    C.

%%% ------------------------------------------------------------------
%%% A C-node frozen
%%% ------------------------------------------------------------------

frozen(Ctx = #{a := A, b := B, node := N}) ->
    S = server(Ctx),
    Uids = [5001, 5002, 5003, 5004, 5005],
    Clients = [{U, sse(S, U)} || U <- Uids],
    [wait_view(M, N, Uids) || M <- [A, B]],
    Before = app(A),
    Sender = start_sender(A, Uids),
    wait_sent(Sender, 500),
    ok = signal(S, "STOP"),
    %% both masters drop their link to it (their tick time passed)
    wait_until(fun() -> not lists:member(N, m(A, erlang, nodes, [hidden])) andalso
                            not lists:member(N, m(B, erlang, nodes, [hidden]))
               end, ?WAIT, {masters_dropped, N}),
    %% and a while longer
    wait_sent(Sender, sent(Sender) + 2000),
    ok = signal(S, "CONT"),
    [wait_view(M, N, Uids) || M <- [A, B]],
    wait_sent(Sender, sent(Sender) + 1000),
    Counts = stop_sender(Sender),
    Report = [judge(U, C, maps:get(U, Counts, 0)) || {U, C} <- Clients],
    print("C-node frozen past the tick time", Report,
          maps:merge(delta_map(Before, app(A)), seq_stats(S))),
    [?assertEqual({U, 0, 0, 0}, {U, Lost, Dup, Gaps})
     || #{uid := U, lost_without_gap := Lost, duplicated := Dup, gaps := Gaps} <- Report].

%%% ------------------------------------------------------------------
%%% A C-node killed and restarted
%%% ------------------------------------------------------------------

%% With Bound = {bounded, Key, Value}, master A keeps at most that for the node,
%% fewer than it is sent while the node is down.
killed(Ctx = #{a := A, b := B, node := N}, Bound) ->
    S = server(Ctx),
    Uids = case Bound of
               unbounded -> [6001, 6002, 6003];
               {bounded, unacked_max_bytes, _} -> [6101, 6102, 6103];
               {bounded, unacked_max_ms, _} -> [6201, 6202, 6203]
           end,
    Clients = [{U, sse(S, U)} || U <- Uids],
    [wait_view(M, N, Uids) || M <- [A, B]],
    Default = #{unacked_max_bytes => 64 bsl 20, unacked_max_ms => 30000},
    [ok = m(A, application, set_env, [httpdcnode, K, V]) || {bounded, K, V} <- [Bound]],
    Before = app(A),
    Sender = start_sender(A, Uids),
    try killed(Ctx, Bound, S, fun(S2) -> set_server(Ctx, S2) end, Uids, Clients, Before, Sender)
    after
        element(1, Sender) ! {stop, element(2, Sender)},
        [ok = m(A, application, set_env, [httpdcnode, K, maps:get(K, Default)])
         || {bounded, K, _} <- [Bound]],
        %% the next case finds the node up, whatever became of this one
        running(server(Ctx)) orelse set_server(Ctx, restart_server(server(Ctx)))
    end.

running(S) -> proc_status(maps:get(proc, S)) =:= running.

%% The same on a C-node of its own started with --history-file: back with
%% its epoch and ids, its clients resume with no gap. The file keeps, with
%% the messages, the last number of each master's stream they came with,
%% which the node's hello tells the master: it sends again only what the
%% file lacks, whatever was acknowledged.
killed_history_file(Ctx = #{a := A, b := B}) ->
    with_history_file(Ctx, fun(S, N) ->
        Uids = [6301, 6302, 6303],
        Clients = [{U, sse(S, U)} || U <- Uids],
        [wait_view(M, N, Uids) || M <- [A, B]],
        Before = app(A),
        Sender = start_sender(A, Uids),
        try killed(Ctx#{node := N}, history_file, S, fun(S2) -> put(history_file_server, S2) end,
                   Uids, Clients, Before, Sender)
        after
            element(1, Sender) ! {stop, element(2, Sender)}
        end
    end).

%% Fun(S, N) with a C-node of its own started with --history-file (S, node
%% N), known to both masters; the node and its file gone after.
with_history_file(#{a := A, b := B}, Fun) ->
    File = filename:join(case filelib:is_dir("/dev/shm") of
                             true -> "/dev/shm";
                             false -> filename:join([repo_root(), "build", "tests"])
                         end, unique("delivery") ++ ".hist"),
    Both = list_to_atom(atom_to_list(A) ++ "," ++ atom_to_list(B)),
    put(history_file_server,
        start_server(#{master => Both, presence => ?PRESENCE,
                       extra_args => ["--history", "4096", "--history-file", File]})),
    try
        S = get(history_file_server),
        N = node_of(S),
        [wait_until(fun() -> lists:member(N, m(M, httpdcnode, nodes, [])) end, ?WAIT,
                    {known, M, N}) || M <- [A, B]],
        Fun(S, N)
    after
        catch stop_server(get(history_file_server)),
        file:delete(File)
    end.

%% The moment a kill leaves in doubt, made on purpose: master A hears no
%% acknowledgement (its httpdcnode_outq is not registered while they
%% come), its messages reach the clients (so they are in the node's
%% file), then the node is killed. Every one of them is in A's copies,
%% unacknowledged, when the node comes back; more are sent while it is
%% down. The node must get the later ones once and not the earlier ones
%% again, and no client may be told a gap for either.
killed_in_doubt(Ctx = #{a := A, b := B}) ->
    with_history_file(Ctx, fun(S, N) ->
        Uids = [6401, 6402],
        K = 50,
        Clients = [{U, sse(S, U)} || U <- Uids],
        [wait_view(M, N, Uids) || M <- [A, B]],
        Before = app(A),
        OutQ = m(A, erlang, whereis, [httpdcnode_outq]),
        true = m(A, erlang, unregister, [httpdcnode_outq]),
        try
            [ok = m(A, httpdcnode, send, [U, integer_to_binary(I)])
             || I <- lists:seq(1, K), U <- Uids],
            [?F:wait_events(C, K) || {_, C} <- Clients],
            _ = kill_server(S)
        after
            m(A, erlang, register, [httpdcnode_outq, OutQ])
        end,
        wait_until(fun() -> m(A, httpdcnode, online_uids, [N]) =:= [] end, ?WAIT, {gone, N}),
        %% all of them in doubt: sent, none acknowledged
        InDoubt = maps:get(unacked, app(A)),
        ?assert(InDoubt >= 2 * K),
        Last = maps:from_list([{U, last_id(C)} || {U, C} <- Clients]),
        [ok = m(A, httpdcnode, send, [U, integer_to_binary(I)])
         || I <- lists:seq(K + 1, 2 * K), U <- Uids],
        S2 = restart_server(S),
        put(history_file_server, S2),
        Clients2 = [{U, sse(S2, U, ["Last-Event-ID: " ++ binary_to_list(maps:get(U, Last))])}
                    || U <- Uids],
        [wait_view(M, N, Uids) || M <- [A, B]],
        wait_until(fun() -> maps:get(unacked, app(A)) =:= 0 end, ?WAIT, a_acked),
        Report = [begin
                      {Evs1, _} = ?F:events(C1),
                      Evs2 = settle(C2, 2 * K),
                      R = judge_events(U, 2 * K, Evs1 ++ Evs2),
                      R#{told => [T || {_, T, _} <- Evs2, T =/= message],
                         back => [D || {_, message, D} <- Evs2],
                         ids => [Id || {Id, message, _} <- Evs1 ++ Evs2]}
                  end || {{U, C1}, {U, C2}} <- lists:zip(Clients, Clients2)],
        After = app(A),
        print("C-node killed with messages in doubt (history_file)", Report,
              (delta_map(Before, After))#{in_doubt_at_kill => InDoubt}),
        [begin
             ?assertEqual({U, 2 * K, 0, 0, 0, []}, {U, D, Lost, Dup, Gaps, Told}),
             %% what it had is not sent again; what it lacked comes, in order
             ?assertEqual({U, [integer_to_binary(I) || I <- lists:seq(K + 1, 2 * K)]},
                          {U, Back}),
             %% one epoch, the ids one after another
             {E, S0} = ?F:split_id(hd(Ids)),
             ?assertEqual({U, [{E, S0 + I} || I <- lists:seq(0, 2 * K - 1)]},
                          {U, [?F:split_id(Id) || Id <- Ids]})
         end || #{uid := U, delivered := D, lost_without_gap := Lost, duplicated := Dup,
                  gaps := Gaps, told := Told, back := Back, ids := Ids} <- Report],
        ?assertEqual(0, delta(gap_in_doubt, Before, After))
    end).

%% The same for topics: publishes through httpdcnode:publish/2, each
%% topic's clients resuming it with its last id there.
killed_in_doubt_topics(Ctx = #{a := A, b := B}) ->
    with_history_file(Ctx, fun(S, N) ->
        Topics = [<<"doubt:1">>, <<"doubt:2">>],
        K = 50,
        Path = fun(U, T) -> "/sse/" ++ integer_to_list(U) ++ "?topics=" ++ T end,
        Subs = [{6501, <<"doubt:1">>}, {6502, <<"doubt:1">>}, {6503, <<"doubt:2">>}],
        Clients = [{{U, T}, sse(S, {path, Path(U, binary_to_list(T))}, [])} || {U, T} <- Subs],
        wait_topic_nodes([A, B], Topics, [{N, 2}, {N, 1}]),
        Before = app(A),
        OutQ = m(A, erlang, whereis, [httpdcnode_outq]),
        true = m(A, erlang, unregister, [httpdcnode_outq]),
        try
            [ok = m(A, httpdcnode, publish, [T, integer_to_binary(I)])
             || I <- lists:seq(1, K), T <- Topics],
            [wait_messages(C, K) || {_, C} <- Clients],
            _ = kill_server(S)
        after
            m(A, erlang, register, [httpdcnode_outq, OutQ])
        end,
        wait_topic_nodes([A, B], Topics, [{N, 0}, {N, 0}]),
        InDoubt = maps:get(unacked, app(A)),
        ?assert(InDoubt >= 2 * K),
        Last = maps:from_list([{Who, last_id(C)} || {Who, C} <- Clients]),
        [ok = m(A, httpdcnode, publish, [T, integer_to_binary(I)])
         || I <- lists:seq(K + 1, 2 * K), T <- Topics],
        S2 = restart_server(S),
        put(history_file_server, S2),
        %% each resumes its topic with its last id there (NAME@EPOCH:SEQ)
        Clients2 = [{Who, sse(S2, {path, Path(U, binary_to_list(maps:get(Who, Last)))}, [])}
                    || {Who = {U, _}, _} <- Clients],
        wait_topic_nodes([A, B], Topics, [{N, 2}, {N, 1}]),
        wait_until(fun() -> maps:get(unacked, app(A)) =:= 0 end, ?WAIT, a_acked),
        Report = [begin
                      {Evs1, _} = ?F:events(C1),
                      Evs2 = settle(C2, 2 * K),
                      R = judge_events(U, 2 * K, Evs1 ++ Evs2),
                      R#{topic => T,
                         told => [Ty || {_, Ty, _} <- Evs2, Ty =/= message, Ty =/= joined],
                         back => [D || {_, message, D} <- Evs2],
                         ids => [Id || {Id, message, _} <- Evs1 ++ Evs2]}
                  end || {{{U, T}, C1}, {{U, T}, C2}} <- lists:zip(Clients, Clients2)],
        After = app(A),
        print("C-node killed with publishes in doubt (history_file)", Report,
              (delta_map(Before, After))#{in_doubt_at_kill => InDoubt}),
        [begin
             ?assertEqual({U, 2 * K, 0, 0, 0, []}, {U, D, Lost, Dup, Gaps, Told}),
             ?assertEqual({U, [integer_to_binary(I) || I <- lists:seq(K + 1, 2 * K)]},
                          {U, Back}),
             %% the topic's epoch, its ids one after another
             [{T, E, S0} | _] = Split = [split_topic_id(Id) || Id <- Ids],
             ?assertEqual({U, [{T, E, S0 + I} || I <- lists:seq(0, 2 * K - 1)]}, {U, Split})
         end || #{uid := U, topic := T, delivered := D, lost_without_gap := Lost,
                  duplicated := Dup, gaps := Gaps, told := Told, back := Back,
                  ids := Ids} <- Report],
        ?assertEqual(0, delta(gap_in_doubt, Before, After))
    end).

%% Until each of masters Ms counts, for each of Topics, Want's streams.
wait_topic_nodes(Ms, Topics, Want) ->
    [wait_until(fun() -> m(M, httpdcnode, topic_nodes, [T]) =:= [W] end, ?WAIT,
                {topic_nodes, M, T, W})
     || M <- Ms, {T, W} <- lists:zip(Topics, Want)],
    ok.

%% The client's events once K messages came.
wait_messages(C, K) ->
    wait_until(fun() ->
                       {Evs, _} = ?F:events(C),
                       length([x || {_, message, _} <- Evs]) >= K
               end, ?WAIT, {messages, K}).

%% NAME@EPOCH:SEQ
split_topic_id(Id) ->
    [T, Rest] = binary:split(Id, <<"@">>),
    {E, S} = ?F:split_id(Rest),
    {T, E, S}.

killed(#{a := A, b := B, node := N}, Bound, S, Keep, Uids, Clients, Before, Sender) ->
    wait_sent(Sender, 300),
    _ = kill_server(S),
    wait_until(fun() -> m(A, httpdcnode, online_uids, [N]) =:= [] end, ?WAIT, {gone, N}),
    AtKill = counts(Sender),
    %% the last id each client had
    Last = maps:from_list([{U, last_id(C)} || {U, C} <- Clients]),
    wait_sent(Sender, sent(Sender) + 2000),
    S2 = restart_server(S),
    Keep(S2),
    Clients2 = [{U, sse(S2, U, ["Last-Event-ID: " ++ binary_to_list(maps:get(U, Last))])}
                || U <- Uids],
    [wait_view(M, N, Uids) || M <- [A, B]],
    wait_sent(Sender, sent(Sender) + 500),
    Counts = stop_sender(Sender),
    %% and master A hears that the node has everything it kept
    wait_until(fun() -> maps:get(unacked, app(A)) =:= 0 end, ?WAIT, a_acked),
    Report = [begin
                  {Evs1, _} = ?F:events(C1),
                  Evs2 = settle(C2, maps:get(U, Counts)),
                  R = judge_events(U, maps:get(U, Counts), Evs1 ++ Evs2),
                  R#{back => [D || {_, message, D} <- Evs2],
                     told => [T || {_, T, _} <- Evs2, T =/= message],
                     ids => [{Id, T} || {Id, T, _} <- Evs2]}
              end || {{U, C1}, {U, C2}} <- lists:zip(Clients, Clients2)],
    After = app(A),
    print(io_lib:format("C-node killed and restarted (~p)", [Bound]), Report,
          delta_map(Before, After)),
    [begin
         ?assertEqual({U, 0, 0, 0}, {U, Lost, Dup, OutOfOrder}),
         case Bound of
             %% the ids go on, with no gap: what the node had not
             %% acknowledged when it was killed is in its file or sent again
             history_file ->
                 {E, _} = ?F:split_id(maps:get(U, Last)),
                 ?assertEqual({U, [E]}, {U, lists:usort([element(1, ?F:split_id(Id))
                                                         || {Id, _} <- Ids])}),
                 ?assertEqual({U, []}, {U, Told});
             %% told of a gap (the new epoch) before anything else
             _ -> ?assertMatch({U, [gap | _]}, {U, Told})
         end,
         %% everything sent once it was down came, in order, the newest last
         Want = maps:get(U, Counts),
         Down = [integer_to_binary(I) || I <- lists:seq(maps:get(U, AtKill) + 1, Want)],
         Got = [D || D <- Back, lists:member(D, Down)],
         case Bound of
             {bounded, _, _} -> ok;
             _ -> ?assertEqual({U, Down}, {U, Got})
         end,
         case Bound of
             {bounded, _, _} ->
                 ?assertEqual({U, lists:nthtail(length(Down) - length(Got), Down)}, {U, Got}),
                 ?assertNotEqual({U, []}, {U, Got});
             _ -> ok
         end
     end || #{uid := U, lost_without_gap := Lost, duplicated := Dup, out_of_order := OutOfOrder,
              back := Back, told := Told, ids := Ids} <- Report],
    case Bound of
        {bounded, _, _} -> ?assert(delta(held_dropped, Before, After) > 0);
        _ -> ?assertEqual(0, delta(held_dropped, Before, After))
    end,
    Bound =:= history_file andalso ?assertEqual(0, delta(gap_in_doubt, Before, After)),
    ?assert(delta(held_for_down_node, Before, After) > 0).

last_id(C) ->
    {Evs, _} = ?F:events(C),
    [{Id, message, _} | _] = lists:reverse(Evs),
    Id.

%%% ------------------------------------------------------------------
%%% A message sent again through the other master
%%% ------------------------------------------------------------------

%% A's acknowledgements are lost (its httpdcnode_outq is not registered
%% while they come), then A's link to the node is cut: A sends what it
%% thinks unacknowledged again through B, the node has it already.
duplicate(Ctx = #{a := A, b := B, node := N}) ->
    S = server(Ctx),
    Uids = [7001, 7002],
    Clients = [{U, sse(S, U)} || U <- Uids],
    [wait_view(M, N, Uids) || M <- [A, B]],
    K = 50,
    Stats0 = stats(S),
    OutQ = m(A, erlang, whereis, [httpdcnode_outq]),
    true = m(A, erlang, unregister, [httpdcnode_outq]),
    try
        [ok = m(A, httpdcnode, send, [U, integer_to_binary(I)])
         || I <- lists:seq(1, K), U <- Uids],
        [?F:wait_events(C, K) || {_, C} <- Clients]
    after
        m(A, erlang, register, [httpdcnode_outq, OutQ])
    end,
    Others = [X || X <- m(A, erlang, nodes, [connected]), X =/= N],
    ok = m(A, net_kernel, allow, [[node() | Others]]),
    try
        true = m(A, erlang, disconnect_node, [N]),
        wait_stat(S, seq_duplicates, fun(D) -> D >= maps:get(seq_duplicates, Stats0) + K * 2 end,
                  ?WAIT),
        %% and A hears, through B, that the node has them
        wait_until(fun() -> maps:get(unacked, app(A)) =:= 0 end, ?WAIT, a_acked)
    after
        m(A, net_kernel, allow, [[N]])
    end,
    Report = [judge_events(U, K, ?F:wait_events(C, K)) || {U, C} <- Clients],
    Stats1 = stats(S),
    print("sent again through the other master", Report,
          #{seq_duplicates => maps:get(seq_duplicates, Stats1) - maps:get(seq_duplicates, Stats0)}),
    [?assertEqual({U, K, 0, 0, 0}, {U, D, Lost, Dup, Gaps})
     || #{uid := U, delivered := D, lost_without_gap := Lost, duplicated := Dup, gaps := Gaps}
            <- Report].

%% The C-node's counters of numbered messages.
seq_stats(S) ->
    maps:filter(fun(K, _) -> lists:prefix("seq_", atom_to_list(K)) end, stats(S)).

delta_map(Before, After) ->
    maps:from_list([{K, delta(K, Before, After)} || K <- maps:keys(After),
                                                    is_integer(maps:get(K, After))]).

print(What, Report, Counts) ->
    Sum = fun(K) -> lists:sum([maps:get(K, R) || R <- Report]) end,
    Shown = [io_lib:format(" ~s ~b", [K, V]) || {K, V} <- lists:sort(maps:to_list(Counts)),
                                                V =/= 0],
    io:format(user, "~n  delivery: ~s: sent ~b, delivered ~b, lost without a gap ~b, "
              "duplicated ~b, gaps told ~b, out of order ~b;~s~n",
              [What, Sum(sent), Sum(delivered), Sum(lost_without_gap), Sum(duplicated),
               Sum(gaps), Sum(out_of_order), Shown]).

%%% ------------------------------------------------------------------
%%% What each client got against what was sent
%%% ------------------------------------------------------------------

%% Client C of uid U was sent 1..K (as text): waits until it has K, or
%% until nothing more comes for a while, then judges its events: a
%% message not received is lost with a gap when a gap was told between
%% the messages around it (or after the last one), else without.
judge(U, C, K) ->
    Evs = settle(C, K),
    judge_events(U, K, Evs).

judge_events(U, K, Evs) ->
    {Last, GapOpen, Acc} =
        lists:foldl(
          fun({_Id, gap, _}, {L, _, R}) -> {L, true, R#{gaps := maps:get(gaps, R) + 1}};
             ({_Id, message, D}, {L, G, R}) ->
                  I = binary_to_integer(D),
                  if I =< L ->
                          {L, G, R#{duplicated := maps:get(duplicated, R) + 1,
                                    out_of_order := maps:get(out_of_order, R) +
                                        case I < L of true -> 1; false -> 0 end}};
                     true ->
                          {I, false, lost(I - L - 1, G, R#{delivered := maps:get(delivered, R) + 1})}
                  end;
             (_, Acc0) -> Acc0
          end,
          {0, false, #{uid => U, sent => K, delivered => 0, duplicated => 0, gaps => 0,
                       out_of_order => 0, lost_with_gap => 0, lost_without_gap => 0}},
          Evs),
    lost(K - Last, GapOpen, Acc).

lost(0, _, R) -> R;
lost(N, true, R) -> R#{lost_with_gap := maps:get(lost_with_gap, R) + N};
lost(N, false, R) -> R#{lost_without_gap := maps:get(lost_without_gap, R) + N}.

%% The client's events once the last message (K) came, or once nothing new
%% came for 3 s (then what is missing is judged).
settle(C, K) ->
    settle(C, integer_to_binary(K), -1, erlang:monotonic_time(millisecond)).

settle(C, Want, Seen, Since) ->
    {Evs, _} = ?F:events(C),
    Now = erlang:monotonic_time(millisecond),
    case lists:keymember(Want, 3, Evs) of
        true -> Evs;
        false when length(Evs) =/= Seen -> timer:sleep(50), settle(C, Want, length(Evs), Now);
        false when Now - Since > 3000 -> Evs;
        false -> timer:sleep(50), settle(C, Want, Seen, Since)
    end.

%%% ------------------------------------------------------------------
%%% The sender, on master A
%%% ------------------------------------------------------------------

start_sender(M, Uids) ->
    Ref = make_ref(),
    Pid = erlang:spawn(M, ?MODULE, sender, [self(), Ref, Uids, ?RATE]),
    {Pid, Ref}.

%% Sends 1, 2, 3, ... to the uids in turn through httpdcnode:send/2 (to
%% {topic, T} through httpdcnode:publish/2), Rate a second (paced by the
%% clock, in steps of 10 ms), until stopped, for 10 minutes at most.
sender(To, Ref, Uids, Rate) ->
    T0 = erlang:monotonic_time(millisecond),
    sender_loop(To, Ref, list_to_tuple(Uids), Rate, T0, 0, #{}).

sender_loop(To, Ref, Uids, Rate, T0, N, Counts) ->
    receive
        {sent, From, R} ->
            From ! {R, N},
            sender_loop(To, Ref, Uids, Rate, T0, N, Counts);
        {counts, From, R} ->
            From ! {R, maps:merge(maps:from_list([{U, 0} || U <- tuple_to_list(Uids)]), Counts)},
            sender_loop(To, Ref, Uids, Rate, T0, N, Counts);
        {stop, Ref} -> To ! {stopped, Ref, Counts}
    after 10 ->
            Now = erlang:monotonic_time(millisecond),
            Due = (Now - T0) * Rate div 1000,
            {N1, Counts1} = send_due(Uids, N, Due, Counts),
            Now - T0 < 600000 andalso sender_loop(To, Ref, Uids, Rate, T0, N1, Counts1)
    end.

send_due(_Uids, N, Due, Counts) when N >= Due -> {N, Counts};
send_due(Uids, N, Due, Counts) ->
    U = element(1 + N rem tuple_size(Uids), Uids),
    K = maps:get(U, Counts, 0) + 1,
    ok = case U of
             {topic, T} -> httpdcnode:publish(T, integer_to_binary(K));
             _ -> httpdcnode:send(U, integer_to_binary(K))
         end,
    send_due(Uids, N + 1, Due, Counts#{U => K}).

sent({Pid, _}) ->
    R = make_ref(),
    Pid ! {sent, self(), R},
    receive {R, N} -> N after scaled(?T) -> error(sender_not_answering) end.

%% Per uid, how many were sent so far.
counts({Pid, _}) ->
    R = make_ref(),
    Pid ! {counts, self(), R},
    receive {R, C} -> C after scaled(?T) -> error(sender_not_answering) end.

wait_sent(Sender, N) ->
    wait_until(fun() -> case catch sent(Sender) of
                            K when is_integer(K), K >= N -> {true, K};
                            K -> {false, K}
                        end
               end, ?WAIT, {sent, N}).

stop_sender({Pid, Ref}) ->
    Pid ! {stop, Ref},
    receive {stopped, Ref, Counts} -> Counts after scaled(?T) -> error(sender_not_stopping) end.
