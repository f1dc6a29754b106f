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
      fun api_reads_presence/1]}.

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

%% The API functions that only read presence, with nothing to send.
api_reads_presence(_) ->
    report({httpdcnode, ?A, up, 11}),
    [?_assertEqual([?A], httpdcnode:online(11)),
     ?_assertEqual([11], httpdcnode:online_uids(?A)),
     ?_assertEqual(ok, httpdcnode:send(12, <<"nobody">>)),
     ?_assertEqual({ok, 0}, httpdcnode:send_sync(12, <<"nobody">>)),
     ?_assertEqual({ok, 0}, httpdcnode:multicast_sync([12, 13], "nobody")),
     ?_assertEqual(ok, httpdcnode:kick(12))].
