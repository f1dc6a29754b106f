%% SPDX-License-Identifier: Apache-2.0
%% Nothing published to a topic through the httpdcnode application is lost
%% without its clients being told: two real masters with the application
%% (env masters, net_ticktime 4), a real C-node (./httpdcnode --master A,B
%% --presence httpdcnode_presence --erl-tick-seconds 4), real SSE clients of
%% topics on plain sockets, and 1,000 publishes a second through
%% httpdcnode:publish/2 on master A, numbered as its messages to uids are.
%%
%% - The link between master A and the C-node dies silently (its packets
%%   dropped, iptables) while A publishes into it: what A wrote there is
%%   lost on the way. A sends it again, and what it publishes until the
%%   C-node links again, through master B. Every client gets every
%%   message once, in order, with no gap.
%% - The C-node frozen (SIGSTOP) past the tick time, then let go: both
%%   masters drop their link with what was queued there, and keep the
%%   node's topics meanwhile (it may come back: a link died, not it). The
%%   same: once, in order, no gap.
%% - The same with a hold bound smaller than the outage (application env
%%   unacked_max_bytes): the oldest kept publishes go (held_dropped), and
%%   each topic's clients are told a gap where they were: none lost
%%   without one.
%%
%% - A C-node killed for good: the masters keep its topics (with no
%%   stream) for its history's TTL (--history-ttl), then drop them.
%%
%% Each case prints what it measured ("delivery: ...").
-module(topics_delivery_tests).
-include_lib("eunit/include/eunit.hrl").

%% run on master A
-export([link_ports/1]).

-import(httpdtest_server, [start_server/1, node_of/1, stop_server/1, stats/1, kill_server/1]).
-import(httpdtest_os, [signal/2, iptables/1]).
-import(httpdtest_master, [stop_master/1, kill_master_by_name/1]).
-import(httpdtest_wait, [wait_until/3]).

-define(F, cluster_failure_tests).
-define(D, cluster_delivery_tests).
-define(PRESENCE, httpdcnode_presence).
-define(WAIT, 30000).
%% The C-node's --erl-tick-seconds: the masters' net_ticktime
%% (cluster_delivery_tests), s.
-define(TICK, 4).
%% Master A's bound in the bounded case: about 1,000 of the publishes here
%% (a few bytes each, and their topic's), far fewer than are sent while the
%% node is frozen.
-define(HOLD_BYTES, 15000).

topics_delivery_test_() ->
    {timeout, 600,
     {setup, fun setup/0, fun cleanup/1,
      fun(Ctx) ->
              {inorder,
               [t(Ctx, "master A's link to the C-node dropped silently under 1,000 "
                  "publishes/s: every publish once, in order, no gap", fun silent_link/1),
                t(Ctx, "the C-node frozen past the tick time under 1,000 publishes/s: every "
                  "publish once, in order, no gap", fun(C) -> frozen(C, unbounded) end),
                t(Ctx, "the same past the hold bound: the oldest dropped and counted, each "
                  "topic told a gap, none lost without one",
                  fun(C) -> frozen(C, {bounded, unacked_max_bytes, ?HOLD_BYTES}) end),
                t(Ctx, "a C-node killed for good: its topics kept for its history's TTL, then "
                  "dropped", fun gone/1)]}
      end}}.

t(Ctx, Label, Fun) ->
    httpdtest_cluster:test_case(Label, 180, fun() -> Fun(Ctx) end, fun() -> logs(Ctx) end,
                                fun() -> [?F:close_client(C) || C <- erase_opened()] end).

erase_opened() ->
    case erase(topics_delivery_opened) of
        undefined -> [];
        L -> L
    end.

logs(#{procs := Procs, s := S}) -> [maps:get(log, P) || P <- Procs] ++ [maps:get(log, S)].

%%% ------------------------------------------------------------------
%%% The cluster: masters A and B, one C-node
%%% ------------------------------------------------------------------

setup() ->
    httpdtest_cluster:start_masters(2, fun setup/1).

setup(Procs = [_, _]) ->
    {[A, B] = Masters, Both} = ?D:masters(Procs),
    S = start_server(#{master => Both, presence => ?PRESENCE,
                       extra_args => ["--history", "4096", "--erl-tick-seconds",
                                      integer_to_list(?TICK)]}),
    %% this node ticks at its own (longer) net_ticktime: the keeper sends
    %% the masters something twice a second
    {Keeper, _} = ?D:keeper(Masters),
    [httpdtest_cluster:wait_known(M, [node_of(S)], ?WAIT) || M <- Masters],
    #{a => A, b => B, procs => Procs, s => S, node => node_of(S), keeper => Keeper}.

cleanup(#{a := A, b := B, procs := Procs, s := S, keeper := Keeper}) ->
    _ = signal(S, "CONT"),
    catch stop_server(S),
    [catch stop_master(P) || P <- Procs],
    [catch kill_master_by_name(N) || N <- [A, B]],
    Keeper ! stop,
    ok.

m(Node, Mod, F, A) -> erpc:call(Node, Mod, F, A, 60000).

app(M) -> m(M, httpdcnode, app_stats, []).

delta(K, Before, After) -> maps:get(K, After, 0) - maps:get(K, Before, 0).

%% An SSE client of uid U subscribed to Topic, per topic: [{{topic, T}, C}].
clients(S, Uid0, Topics) ->
    [begin
         Path = "/sse/" ++ integer_to_list(Uid0 + I) ++ "?topics=" ++ binary_to_list(T),
         C = ?F:sse_client(S, {path, Path}, []),
         put(topics_delivery_opened, [C | case get(topics_delivery_opened) of
                                              undefined -> [];
                                              L -> L
                                          end]),
         {{topic, T}, C}
     end || {I, T} <- lists:zip(lists:seq(1, length(Topics)), Topics)].

%% Until both masters count N streams of each of Topics on the C-node.
wait_topics(#{a := A, b := B, node := Node}, Topics, N) ->
    [wait_until(fun() ->
                        case catch m(M, httpdcnode, topic_nodes, [T]) of
                            [{Node, N}] -> true;
                            Other -> {false, Other}
                        end
                end, ?WAIT, {topic_nodes, M, T, N}) || M <- [A, B], T <- Topics],
    ok.

linked(M, Node) -> lists:member(Node, m(M, erlang, nodes, [hidden])).

%% The two ports of this node's distribution link to Node: {Here, There}.
link_ports(Node) ->
    {Node, Port} = lists:keyfind(Node, 1, erlang:system_info(dist_ctrl)),
    {ok, {_, Here}} = inet:sockname(Port),
    {ok, {_, There}} = inet:peername(Port),
    {Here, There}.

%% What each client got against what was sent, after Counts were sent.
report(Clients, Counts) ->
    [?D:judge(U, C, maps:get(U, Counts, 0)) || {U, C} <- Clients].

%%% ------------------------------------------------------------------
%%% Master A's link cut silently
%%% ------------------------------------------------------------------

silent_link(Ctx = #{a := A, node := N, s := S}) ->
    Topics = [<<"silent:1">>, <<"silent:2">>],
    Clients = clients(S, 5200, Topics),
    wait_topics(Ctx, Topics, 1),
    Before = app(A),
    Sender = ?D:start_sender(A, [{topic, T} || T <- Topics]),
    ?D:wait_sent(Sender, 500),
    {Here, There} = m(A, ?MODULE, link_ports, [N]),
    Rules = ["INPUT -p tcp --sport " ++ integer_to_list(P1) ++ " --dport " ++ integer_to_list(P2)
             ++ " -j DROP" || {P1, P2} <- [{Here, There}, {There, Here}]],
    [ok = iptables("-I " ++ R) || R <- Rules],
    try
        %% A drops the link once what it wrote waited the tick time
        wait_until(fun() -> not linked(A, N) end, ?WAIT, {a_dropped, N}),
        ?D:wait_sent(Sender, ?D:sent(Sender) + 2000)
    after
        [iptables("-D " ++ R) || R <- Rules]
    end,
    %% the C-node links to A again
    wait_until(fun() -> linked(A, N) end, ?WAIT, {a_linked, N}),
    ?D:wait_sent(Sender, ?D:sent(Sender) + 1000),
    Counts = ?D:stop_sender(Sender),
    Report = report(Clients, Counts),
    After = app(A),
    ?D:print("master A's link to the C-node dropped silently, publishes", Report,
             maps:merge(?D:delta_map(Before, After), ?D:seq_stats(S))),
    [?assertEqual({U, 0, 0, 0}, {U, Lost, Dup, Gaps})
     || #{uid := U, lost_without_gap := Lost, duplicated := Dup, gaps := Gaps} <- Report],
    %% they went through B, or waited for the node
    ?assert(delta(held_for_down_node, Before, After) > 0).

%%% ------------------------------------------------------------------
%%% The C-node frozen
%%% ------------------------------------------------------------------

frozen(Ctx = #{a := A, b := B, node := N, s := S}, Bound) ->
    {Uid0, Topics} = case Bound of
                         unbounded -> {5300, [<<"frozen:1">>, <<"frozen:2">>]};
                         {bounded, _, _} -> {5400, [<<"bounded:1">>, <<"bounded:2">>]}
                     end,
    Clients = clients(S, Uid0, Topics),
    wait_topics(Ctx, Topics, 1),
    [ok = m(A, application, set_env, [httpdcnode, K, V]) || {bounded, K, V} <- [Bound]],
    Before = app(A),
    Sender = ?D:start_sender(A, [{topic, T} || T <- Topics]),
    try
        ?D:wait_sent(Sender, 500),
        ok = signal(S, "STOP"),
        %% both masters drop their link to it (their tick time passed)
        wait_until(fun() -> not linked(A, N) andalso not linked(B, N) end, ?WAIT,
                   {masters_dropped, N}),
        %% and a while longer
        ?D:wait_sent(Sender, ?D:sent(Sender) + 2000),
        ok = signal(S, "CONT"),
        wait_until(fun() -> linked(A, N) andalso linked(B, N) end, ?WAIT, {linked, N}),
        ?D:wait_sent(Sender, ?D:sent(Sender) + 1000)
    after
        _ = signal(S, "CONT"),
        [ok = m(A, application, set_env, [httpdcnode, K, 64 bsl 20])
         || {bounded, K, _} <- [Bound]]
    end,
    Counts = ?D:stop_sender(Sender),
    Report = report(Clients, Counts),
    After = app(A),
    ?D:print(io_lib:format("C-node frozen past the tick time, publishes (~p)", [Bound]), Report,
             maps:merge(?D:delta_map(Before, After), ?D:seq_stats(S))),
    [?assertEqual({U, 0, 0}, {U, Lost, Dup})
     || #{uid := U, lost_without_gap := Lost, duplicated := Dup} <- Report],
    case Bound of
        unbounded ->
            [?assertEqual({U, 0}, {U, Gaps}) || #{uid := U, gaps := Gaps} <- Report],
            ?assertEqual(0, delta(held_dropped, Before, After));
        {bounded, _, _} ->
            %% the dropped ones are behind a gap, each topic's own
            [?assert(Gaps >= 1 andalso Lost > 0)
             || #{gaps := Gaps, lost_with_gap := Lost} <- Report],
            ?assert(delta(held_dropped, Before, After) > 0),
            ?assert(maps:get(seq_gap_topics, stats(S)) >= length(Topics))
    end,
    ?assert(delta(held_for_down_node, Before, After) > 0).

%%% ------------------------------------------------------------------
%%% A C-node gone for good
%%% ------------------------------------------------------------------

gone(#{a := A, b := B}) ->
    Both = list_to_atom(atom_to_list(A) ++ "," ++ atom_to_list(B)),
    S = start_server(#{master => Both, presence => ?PRESENCE,
                       extra_args => ["--history-ttl", "2"]}),
    N = node_of(S),
    try
        C = ?F:sse_client(S, {path, "/sse/5500?topics=gone"}, []),
        put(topics_delivery_opened, [C]),
        [wait_until(fun() -> m(M, httpdcnode, topic_nodes, [<<"gone">>]) =:= [{N, 1}] end,
                    ?WAIT, {held, M}) || M <- [A, B]],
        kill_server(S),
        %% kept with no stream, as one whose link went down, for its TTL
        [wait_until(fun() -> m(M, httpdcnode, topic_nodes, [<<"gone">>]) =:= [{N, 0}] end,
                    ?WAIT, {kept, M}) || M <- [A, B]],
        [wait_until(fun() -> m(M, httpdcnode, topic_nodes, [<<"gone">>]) =:= [] end,
                    ?WAIT, {dropped, M}) || M <- [A, B]]
    after
        catch stop_server(S)
    end.
