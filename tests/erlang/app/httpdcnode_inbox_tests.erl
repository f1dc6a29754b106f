%% SPDX-License-Identifier: Apache-2.0
%% The inbox window through the application (httpdcnode_inbox under its
%% supervisor, calling app_test_handler; a real server): a handler that
%% holds fills the window (256 client messages not acknowledged) and the
%% rest wait on the C-node.
%%   - Held for 5 s the window shows as stuck (/stats, /metrics, the
%%     Erlang stats), and no more once the handler goes on.
%%   - Killed, the inbox is started again by its supervisor and announces
%%     itself: the C-node starts its window afresh (what the dead one held
%%     counted as maybe lost), what waited reaches the new handler, then
%%     new WebSocket and POST /send/N messages.
-module(httpdcnode_inbox_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [stats/1, wait_stat/4, node_of/1]).
-import(httpdtest_wait, [wait_until/3]).
-import(httpdtest_os, [scaled/1]).
-import(httpdtest_inbox, [ws_open/2, frame/2, collect/1, nothing_more/0]).

-define(T, 10000).
-define(INBOX, httpdcnode_inbox).
-define(WINDOW, 256).

inbox_test_() ->
    [app_test("a handler that holds: the window full with no ack for 5 s shows as stuck, "
              "then not once it goes on; nothing lost", fun stuck/1),
     app_test("the inbox killed with its window full: the supervisor's new one announces "
              "itself, what waited and new messages (WebSocket, POST) reach it; counted",
              fun killed/1)].

app_test(Label, Fun) ->
    httpdtest_inbox:app_test(Label, app_test_handler, "inbox_app_sink",
                             ["--client-rate", "100000"], Fun).

%%% ---------------------------------------------------------------- cases

stuck(#{server := S, mnode := MNode}) ->
    {A, Msgs, Inbox} = fill(S, MNode, 7),
    wait_stat(S, in_windows_stuck, fun(V) -> V =:= 1 end, scaled(20000)),
    ?assertEqual(1, metric(S, "httpdcnode_inbox_windows_stuck")),
    ?assertMatch(#{in_windows_stuck := 1}, cnode_stats(S, MNode)),
    %% The handler goes on: everything arrives, in order; not stuck.
    {?INBOX, MNode} ! release,
    ?assertEqual(Msgs, [D || {7, _, D} <- collect(300)]),
    wait_stat(S, in_windows_stuck, fun(V) -> V =:= 0 end, ?T),
    ?assertEqual(Inbox, m(MNode, erlang, whereis, [?INBOX])),
    ?assertMatch(#{in_resets := 0, in_reset_unacked := 0, in_park_dropped := 0,
                   client_in := 301}, stats(S)),
    nothing_more(),
    gen_tcp:close(A).

killed(#{server := S, mnode := MNode}) ->
    CNode = node_of(S),
    {A, Msgs, Inbox} = fill(S, MNode, 7),
    true = m(MNode, erlang, exit, [Inbox, kill]),
    wait_until(fun() ->
                       New = m(MNode, erlang, whereis, [?INBOX]),
                       is_pid(New) andalso New =/= Inbox
               end, ?T, inbox_restarted),
    %% What waited on the C-node comes to the new inbox, in order; the 255
    %% in the dead one's mailbox went with it.
    ?assertEqual(lists:nthtail(?WINDOW - 1, Msgs), [D || {7, _, D} <- collect(300 - 255)]),
    ok = gen_tcp:send(A, frame(1, <<"ws after">>)),
    ?assertMatch([{7, {CNode, _}, <<"ws after">>}], collect(1)),
    P = core_post_tests:connect(S),
    ?assertMatch({202, _, _}, core_post_tests:post(P, "/send/8", text, <<"post after">>)),
    ?assertEqual([{8, {CNode, 0}, <<"post after">>}], collect(1)),
    %% Counted: one reset, the 256 the dead inbox did not acknowledge.
    ?assertMatch(#{in_resets := 1, in_reset_unacked := ?WINDOW, in_park_dropped := 0,
                   in_windows_stuck := 0, client_in := 303}, stats(S)),
    ?assertMatch(#{in_resets := 1, in_reset_unacked := ?WINDOW}, cnode_stats(S, MNode)),
    ?assertEqual(1, metric(S, "httpdcnode_inbox_resets_total")),
    ?assertEqual(?WINDOW, metric(S, "httpdcnode_inbox_reset_unacked_total")),
    %% And the window works as before: 300 more, all through.
    More = [<<"n", (integer_to_binary(I))/binary>> || I <- lists:seq(1, 300)],
    ok = gen_tcp:send(A, [frame(1, D) || D <- More]),
    ?assertEqual(More, [D || {7, _, D} <- collect(300)]),
    nothing_more(),
    [gen_tcp:close(X) || X <- [A, P]].

%%% ---------------------------------------------------------------- helpers

%% A WebSocket of Uid sends "hold" then m1..m300: the handler holds at the
%% first, the C-node sent it the window (the hold and 255 more, which wait
%% in the inbox's mailbox), the other 45 wait on the C-node.
%% {Socket, the 300, the inbox's pid}.
fill(S, MNode, Uid) ->
    A = ws_open(S, Uid),
    Msgs = [<<"m", (integer_to_binary(I))/binary>> || I <- lists:seq(1, 300)],
    ok = gen_tcp:send(A, [frame(1, <<"hold">>) | [frame(1, D) || D <- Msgs]]),
    ?assertMatch([{Uid, _, <<"hold">>}], collect(1)),
    wait_stat(S, client_in, fun(V) -> V =:= 301 end, ?T),
    Inbox = m(MNode, erlang, whereis, [?INBOX]),
    wait_until(fun() ->
                       m(MNode, erlang, process_info, [Inbox, message_queue_len])
                           =:= {message_queue_len, ?WINDOW - 1}
               end, ?T, window_full),
    {A, Msgs, Inbox}.

%% The C-node's counters as the application's stats/0 has them.
cnode_stats(S, MNode) ->
    maps:get(node_of(S), m(MNode, httpdcnode, stats, [])).

metric(S, Name) ->
    maps:get(list_to_binary(Name), httpdtest_server:metrics(S)).

m(Node, Mod, F, A) -> erpc:call(Node, Mod, F, A, 30000).
