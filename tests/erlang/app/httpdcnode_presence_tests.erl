%% SPDX-License-Identifier: Apache-2.0
%% Presence server fed with fake C-node reports, in this node.
-module(httpdcnode_presence_tests).
-include_lib("eunit/include/eunit.hrl").

-define(P, httpdcnode_presence).
-define(A, 'fake_a@nohost').
-define(B, 'fake_b@nohost').
-define(C, 'fake_c@nohost').

presence_test_() ->
    {foreach,
     fun() -> {ok, Pid} = ?P:start_link([?C]), unlink(Pid), Pid end,
     fun(Pid) ->
             M = erlang:monitor(process, Pid),
             ?P:stop(),
             receive {'DOWN', M, _, _, _} -> ok end
     end,
     [fun up_single_and_list/1,
      fun up_on_two_nodes/1,
      fun repeated_up_is_one_entry/1,
      fun down_single_and_list/1,
      fun snapshot_replaces_only_its_node/1,
      fun empty_snapshot_clears_node/1,
      fun nodedown_cleans_node/1,
      fun configured_node_stays_known/1,
      fun hello_announces/1,
      fun first_report_up_asks_snapshot/1,
      fun first_report_snapshot_asks_nothing/1,
      fun junk_is_ignored/1,
      fun conn_events_ignored_or_passed_on/1,
      fun api_reads_presence/1,
      fun offline_uid_routes_to_last_node/1,
      fun online_elsewhere_is_not_offline/1,
      fun back_on_another_node_replaces/1,
      fun snapshot_and_nodedown_remember/1,
      fun snapshot_more_adds/1,
      fun hello_ttl_and_no_history/1,
      fun hello_asks_nothing/1,
      fun offline_told/1,
      fun client_message_marks_online/1,
      fun held_until_known/1]}.

report(Msg) ->
    ?P ! Msg,
    ok = ?P:sync().

up_single_and_list(_) ->
    report({httpdcnode, ?A, up, 7}),
    report({httpdcnode, ?A, up, [8, 9]}),
    [?_assertEqual([?A], ?P:online(7)),
     ?_assertEqual([?A], ?P:online(9)),
     ?_assertEqual([], ?P:online(10)),
     ?_assertEqual([7, 8, 9], ?P:online_uids(?A)),
     ?_assertEqual(3, ?P:count())].

up_on_two_nodes(_) ->
    report({httpdcnode, ?A, up, 5}),
    report({httpdcnode, ?B, up, [5, 6]}),
    [?_assertEqual([?A, ?B], lists:sort(?P:online(5))),
     ?_assertEqual([?B], ?P:online(6)),
     ?_assertEqual([?A, ?B, ?C], ?P:nodes())].

repeated_up_is_one_entry(_) ->
    report({httpdcnode, ?A, up, 5}),
    report({httpdcnode, ?A, up, [5, 5]}),
    Online = ?P:online(5),
    report({httpdcnode, ?A, down, 5}),
    [?_assertEqual([?A], Online),
     ?_assertEqual([], ?P:online(5)),
     ?_assertEqual(0, ?P:count())].

down_single_and_list(_) ->
    report({httpdcnode, ?A, up, [1, 2, 3, 4]}),
    report({httpdcnode, ?B, up, [1, 2]}),
    report({httpdcnode, ?A, down, 1}),
    report({httpdcnode, ?A, down, [2, 3, 99]}),
    [?_assertEqual([?B], ?P:online(1)),
     ?_assertEqual([?B], ?P:online(2)),
     ?_assertEqual([], ?P:online(3)),
     ?_assertEqual([4], ?P:online_uids(?A)),
     ?_assertEqual([1, 2], ?P:online_uids(?B))].

snapshot_replaces_only_its_node(_) ->
    report({httpdcnode, ?A, up, [1, 2, 3]}),
    report({httpdcnode, ?B, up, [1, 2]}),
    report({httpdcnode, ?A, snapshot, [3, 4]}),
    [?_assertEqual([?B], ?P:online(1)),
     ?_assertEqual([?B], ?P:online(2)),
     ?_assertEqual([?A], ?P:online(3)),
     ?_assertEqual([?A], ?P:online(4)),
     ?_assertEqual([3, 4], ?P:online_uids(?A)),
     ?_assertEqual(4, ?P:count())].

empty_snapshot_clears_node(_) ->
    report({httpdcnode, ?A, up, [1, 2]}),
    report({httpdcnode, ?A, snapshot, []}),
    [?_assertEqual([], ?P:online(1)),
     ?_assertEqual([], ?P:online_uids(?A)),
     ?_assert(lists:member(?A, ?P:nodes()))].

nodedown_cleans_node(_) ->
    report({httpdcnode, ?A, up, [1, 2, 3]}),
    report({httpdcnode, ?B, up, [2, 3, 4]}),
    report({nodedown, ?A, [{node_type, hidden}]}),
    [?_assertEqual([], ?P:online(1)),
     ?_assertEqual([?B], ?P:online(2)),
     ?_assertEqual([?B], ?P:online(3)),
     ?_assertEqual([?B], ?P:online(4)),
     ?_assertEqual([], ?P:online_uids(?A)),
     ?_assertEqual([?B, ?C], ?P:nodes()),
     ?_assertEqual(3, ?P:count())].

configured_node_stays_known(_) ->
    report({httpdcnode, ?C, up, 1}),
    report({nodedown, ?C, [{node_type, hidden}]}),
    Known = ?P:nodes(),
    report({nodeup, ?C, [{node_type, hidden}]}),
    %% an unconfigured hidden node (a remote shell, say) is not a C-node
    report({nodeup, ?B, [{node_type, hidden}]}),
    [?_assertEqual([], ?P:online(1)),
     ?_assertEqual([?C], Known),
     ?_assertEqual([?C], ?P:nodes())].

hello_announces(_) ->
    report({httpdcnode, ?B, hello}),
    ok = ?P:add_node(?A),
    [?_assertEqual([?A, ?B, ?C], ?P:nodes()),
     ?_assertEqual(0, ?P:count())].

%% This node stands for a C-node: what the server sends to {any, node()}
%% comes here.
snapshot_requests_after(Reports) ->
    register(any, self()),
    try
        [report(R) || R <- Reports],
        snapshot_requests([])
    after
        unregister(any)
    end.

%% The server sent its requests before it answered sync/0: they are here.
snapshot_requests(Acc) ->
    receive {From, Ref, snapshot} when is_reference(Ref) -> snapshot_requests([From | Acc])
    after 0 -> Acc
    end.

%% A first report that is not a snapshot: the node's snapshot went out
%% before the server ran, so it is asked for one, once.
first_report_up_asks_snapshot(Pid) ->
    Asked = snapshot_requests_after([{httpdcnode, node(), up, 5},
                                     {httpdcnode, node(), up, 6}]),
    [?_assertEqual([Pid], Asked),
     ?_assertEqual([5, 6], ?P:online_uids(node()))].

first_report_snapshot_asks_nothing(_) ->
    Asked = snapshot_requests_after([{httpdcnode, node(), snapshot, [5]},
                                     {httpdcnode, node(), up, 6}]),
    [?_assertEqual([], Asked),
     ?_assertEqual([5, 6], ?P:online_uids(node()))].

junk_is_ignored(Pid) ->
    report({httpdcnode, ?A, up, -5}),
    report({httpdcnode, ?A, up, [0, foo, 3]}),
    report({httpdcnode, ?A, bogus, 1}),
    report({httpdcnode, ?A, snapshot, not_a_list}),
    report({httpdcnode, "not an atom", up, 1}),
    report(whatever),
    [?_assertEqual(Pid, whereis(?P)),
     ?_assertEqual([3], ?P:online_uids(?A)),
     ?_assertEqual([], ?P:online(foo)),
     ?_assertEqual({error, unknown_call}, gen_server:call(?P, nonsense))].

%% conn_up / conn_down change no presence and crash nothing; with env
%% conn_events they are passed on to that process.
conn_events_ignored_or_passed_on(Pid) ->
    Up = {httpdcnode, ?A, conn_up, 5, 77, ws, {{127, 0, 0, 1}, 40000}},
    Down = {httpdcnode, ?A, conn_down, 5, 77, client},
    report(Up),
    report(Down),
    report({httpdcnode, ?A, conn_down, 5}),
    Without = ?P:online_uids(?A),
    application:set_env(httpdcnode, conn_events, self()),
    report(Up),
    report(Down),
    application:unset_env(httpdcnode, conn_events),
    report(Down),
    Got = receive_all(),
    [?_assertEqual(Pid, whereis(?P)),
     ?_assertEqual([], Without),
     ?_assertEqual([], ?P:online_uids(?A)),
     ?_assertEqual([Up, Down], Got)].

receive_all() ->
    receive {httpdcnode, _, _, _, _, _} = M -> [M | receive_all()];
            {httpdcnode, _, _, _, _, _, _} = M -> [M | receive_all()]
    after 0 -> []
    end.

%% The API functions that only read presence, with nothing to send.
api_reads_presence(_) ->
    report({httpdcnode, ?A, up, 11}),
    [?_assertEqual([?A], httpdcnode:online(11)),
     ?_assertEqual([11], httpdcnode:online_uids(?A)),
     ?_assertEqual(ok, httpdcnode:send(12, <<"nobody">>)),
     ?_assertEqual({ok, 0}, httpdcnode:send_sync(12, <<"nobody">>)),
     ?_assertEqual({ok, 0}, httpdcnode:multicast_sync([12, 13], "nobody")),
     ?_assertEqual(ok, httpdcnode:kick(12))].

%%% Last seen: where an offline uid's messages go

offline_uid_routes_to_last_node(_) ->
    report({httpdcnode, ?A, up, [21, 22]}),
    report({httpdcnode, ?A, down, 21}),
    [?_assertEqual({offline, ?A}, ?P:route(21)),
     ?_assertEqual({online, [?A]}, ?P:route(22)),
     ?_assertEqual(none, ?P:route(23)),
     ?_assertEqual([], ?P:online(21)),
     ?_assertEqual(?A, ?P:last_seen(21)),
     ?_assertMatch(#{entries := 1}, ?P:last_seen_info())].

online_elsewhere_is_not_offline(_) ->
    report({httpdcnode, ?A, up, 31}),
    report({httpdcnode, ?B, up, 31}),
    report({httpdcnode, ?A, down, 31}),
    Route1 = ?P:route(31),
    report({httpdcnode, ?B, down, 31}),
    [?_assertEqual({online, [?B]}, Route1),
     ?_assertEqual({offline, ?B}, ?P:route(31))].

back_on_another_node_replaces(_) ->
    report({httpdcnode, ?A, up, 41}),
    report({httpdcnode, ?A, down, 41}),
    report({httpdcnode, ?B, up, 41}),
    Online = ?P:route(41),
    Entries = maps:get(entries, ?P:last_seen_info()),
    report({httpdcnode, ?B, down, 41}),
    [?_assertEqual({online, [?B]}, Online),
     ?_assertEqual(0, Entries),
     ?_assertEqual({offline, ?B}, ?P:route(41)),
     ?_assertEqual(1, ets:info(httpdcnode_presence_last_t, size))].

snapshot_and_nodedown_remember(_) ->
    report({httpdcnode, ?A, up, [51, 52, 53]}),
    report({httpdcnode, ?A, snapshot, [52, 53]}),
    R51 = ?P:route(51),
    report({nodedown, ?A, [{node_type, hidden}]}),
    [?_assertEqual({offline, ?A}, R51),
     ?_assertEqual({offline, ?A}, ?P:route(52)),
     ?_assertEqual({offline, ?A}, ?P:route(53))].

snapshot_more_adds(_) ->
    report({httpdcnode, ?A, up, [61, 62]}),
    report({httpdcnode, ?A, snapshot, [63]}),
    report({httpdcnode, ?A, snapshot_more, [64, 61]}),
    [?_assertEqual([61, 63, 64], ?P:online_uids(?A)),
     ?_assertEqual({offline, ?A}, ?P:route(62)),
     ?_assertEqual({online, [?A]}, ?P:route(61))].

hello_ttl_and_no_history(_) ->
    report({httpdcnode, ?A, hello, #{history_ttl => 0, history => 32,
                                     epoch => <<"0badcafe">>, max_users => 100}}),
    report({httpdcnode, ?B, hello, #{history_ttl => 60, history => 0,
                                     epoch => <<"0badcaff">>, max_users => 100}}),
    report({httpdcnode, ?C, hello, #{history_ttl => 7, history => 32,
                                     epoch => <<"0badcb00">>, max_users => 100}}),
    [report({httpdcnode, N, up, 71}) || N <- [?A, ?B, ?C]],
    report({httpdcnode, ?C, down, 71}),
    {online, KeptOn} = ?P:route(71),
    Kept = {online, lists:sort(KeptOn)},
    report({httpdcnode, ?C, up, 71}),
    [report({httpdcnode, N, down, 71}) || N <- [?C, ?B]],
    NoHistory = ?P:route(71),
    [?_assertEqual({7000, #{history_ttl => 7, history => 32, epoch => <<"0badcb00">>,
                            max_users => 100}}, ?P:node_info(?C)),
     ?_assertMatch({0, _}, ?P:node_info(?B)),
     ?_assertEqual({online, [?A, ?B]}, Kept),
     %% the last node keeps no history: nothing to route there
     ?_assertEqual({online, [?A]}, NoHistory),
     ?_assertEqual(ok, report({httpdcnode, ?A, down, 71})),
     ?_assertEqual(none, ?P:route(71))].

%% A hello comes right before the snapshot: it asks for none.
hello_asks_nothing(_) ->
    Asked = snapshot_requests_after([{httpdcnode, node(), hello, #{history_ttl => 120}},
                                     {httpdcnode, node(), snapshot, [5]}]),
    [?_assertEqual([], Asked),
     ?_assertEqual([5], ?P:online_uids(node()))].

%% Uids offline everywhere (a down, a snapshot without them) are told to
%% the process of env offline_events; one still on another node is not.
offline_told(_) ->
    application:set_env(httpdcnode, offline_events, self()),
    try
        report({httpdcnode, ?A, up, [21, 22]}),
        report({httpdcnode, ?B, up, 22}),
        report({httpdcnode, ?A, down, [21, 22]}),
        First = receive_offline(),
        report({httpdcnode, ?B, snapshot, []}),
        Second = receive_offline(),
        [?_assertEqual([[21]], First),
         ?_assertEqual([[22]], Second)]
    after
        application:unset_env(httpdcnode, offline_events)
    end.

receive_offline() ->
    receive {httpdcnode, offline, Uids} -> [Uids | receive_offline()] after 0 -> [] end.

counter(Name) -> maps:get(Name, ?P:counter_values()).

%% ensure_online/2 (the inbox, before a client message) marks a uid not
%% known on that node; the node's up confirms it, its snapshot without it
%% or 5 s without either ends it.
client_message_marks_online(_) ->
    C0 = counter(online_by_message),
    ok = ?P:ensure_online(?A, 31),
    Marked = ?P:online(31),
    ok = ?P:ensure_online(?A, 31),              % known: nothing more
    report({httpdcnode, ?A, up, 31}),
    ok = ?P:ensure_online(?A, 32),
    report({httpdcnode, ?A, snapshot, [31]}),
    AfterSnapshot = ?P:online(32),
    ok = ?P:ensure_online(?B, 33),
    httpdtest_wait:wait_until(fun() -> ?P:online(33) =:= [] end, 10000, mark_ended),
    [?_assertEqual([?A], Marked),
     ?_assertEqual([], AfterSnapshot),
     ?_assertEqual([?A], ?P:online(31)),         % its 5 s passed too: confirmed
     ?_assertEqual(C0 + 3, counter(online_by_message))].

%% Messages for uids not known wait: this node stands for the C-node (what
%% goes to {any, node()} comes here); a uid that comes online gets its
%% own, in order; one that never does is dropped once hold_ms passed.
held_until_known(_) ->
    register(any, self()),
    try
        S0 = counter(held_sent),
        D0 = counter(dropped_offline),
        ok = ?P:hold([41, 42], <<"m1">>),
        ok = httpdcnode:send(41, <<"m2">>),
        Held = ?P:held_count(),
        report({httpdcnode, node(), up, 41}),
        Got = [receive {41, M} -> M after 1000 -> none end || _ <- [1, 2]],
        ok = httpdcnode:send(41, <<"m3">>),            % known now: at once
        Direct = receive {41, M3} -> M3 after 1000 -> none end,
        httpdtest_wait:wait_until(fun() -> ?P:held_count() =:= 0 end, 10000, held_gone),
        [?_assertEqual(3, Held),
         ?_assertEqual([<<"m1">>, <<"m2">>], Got),
         ?_assertEqual(<<"m3">>, Direct),
         ?_assertEqual(S0 + 2, counter(held_sent)),
         ?_assertEqual(D0 + 1, counter(dropped_offline))]
    after
        unregister(any)
    end.
