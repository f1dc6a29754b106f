%% SPDX-License-Identifier: Apache-2.0
%% Connection presence (--presence-conns): the --presence process on the
%% master gets {httpdcnode, Node, conn_up, Uid, Conn, Transport, Peer} when
%% a stream opens and {httpdcnode, Node, conn_down, Uid, Conn, Reason} when
%% it ends, for every transport; a WebSocket's conn_down also reaches the
%% inbox (httpdcnode_inbox calling the handler's handle_conn_down/4). Off
%% by default. Real server, real master node (a forwarder registered as
%% the presence process, the application's inbox), clients on raw sockets.
-module(core_conn_presence_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [port_of/1, node_of/1, wait_stat/4]).
-import(httpdtest_inbox, [frame/1, frame/3]).

-define(T, 10000).

conn_presence_test_() ->
    [conns_test("conn_up for each transport with its uid, transport and peer; conn_down "
                "on a client's close", ["--presence-conns"], fun each_transport/1),
     conns_test("conn_down on a kick, to the presence process and through the inbox's "
                "handle_conn_down, after the connection's messages", ["--presence-conns"],
                fun kick_and_inbox/1),
     conns_test("conn_down says why a WebSocket was closed: shed past --max-input-total "
                "(ws_shed, 1013), a protocol error (ws_protocol, 1002)",
                ["--presence-conns", "--max-input-total", "65536",
                 "--max-client-message", "1048576"], fun ws_closes/1),
     conns_test("off by default: uid presence, no conn_up or conn_down", [],
                fun off_by_default/1)].

%% A master whose 'presence' forwards to a sink of this node, with the
%% application's inbox (conn_test_handler, to the same sink), and a server
%% --presence presence --inbox inbox Args.
conns_test(Label, Args, Fun) ->
    {Label,
     {setup,
      fun() ->
              {Sink, M, Node} = httpdtest_inbox:presence_master("conns_sink"),
              {ok, _} = httpdtest_inbox:start_inbox(Node, conn_test_handler,
                                                    {Sink, node()}),
              S = httpdtest_server:start_server(#{master => M, presence => presence,
                                                  extra_args => ["--inbox", "inbox" | Args]}),
              httpdtest_master:wait_master_sees(M, node_of(S), ?T),
              {M, S, Sink}
      end,
      fun({M, S, Sink}) -> httpdtest_inbox:stop_all(M, S, Sink) end,
      fun({_M, S, Sink}) -> httpdtest_inbox:sink_test(S, Sink, 60, fun() -> Fun(S) end) end}}.

%%% ---------------------------------------------------------------- cases

each_transport(S) ->
    Node = node_of(S),
    Opened = [{T, Uid, open(S, Path)} || {T, Uid, Path} <- [{chunked, 31, "/test/31"},
                                                            {sse, 32, "/sse/32"},
                                                            {poll, 33, "/poll/33"},
                                                            {ws, 34, "/ws/34"}]],
    Conns = [begin
                 {ok, {{127, 0, 0, 1}, Port}} = inet:sockname(Sock),
                 {httpdcnode, Node, conn_up, Uid, Conn, T, Peer} = conn_event(conn_up, Uid),
                 ?assertEqual({{127, 0, 0, 1}, Port}, Peer),
                 ?assert(is_integer(Conn) andalso Conn > 0),
                 {T, Uid, Sock, Conn}
             end || {T, Uid, Sock} <- Opened],
    ?assertEqual(4, length(lists:usort([C || {_, _, _, C} <- Conns]))),
    [begin
         gen_tcp:close(Sock),
         ?assertEqual({httpdcnode, Node, conn_down, Uid, Conn, client},
                      conn_event(conn_down, Uid))
     end || {_, Uid, Sock, Conn} <- Conns],
    %% A WebSocket's conn_down reaches the inbox too; the others do not.
    {ws, 34, _, WsConn} = lists:keyfind(ws, 1, Conns),
    ?assertEqual({conn_down, 34, {Node, WsConn}, client}, inbox_down()),
    nothing_from_inbox(),
    %% A long-poll answered has finished.
    P = open(S, "/poll/35"),
    {httpdcnode, _, conn_up, 35, PollConn, poll, _} = conn_event(conn_up, 35),
    httpdtest_server:send(S, {35, <<"m">>}),
    ?assertEqual({httpdcnode, Node, conn_down, 35, PollConn, finished},
                 conn_event(conn_down, 35)),
    gen_tcp:close(P).

kick_and_inbox(S) ->
    Node = node_of(S),
    A = open(S, "/ws/41"),
    B = open(S, "/test/41"),
    %% The two opens race: their conn_up come in either order.
    Ups = [conn_event(conn_up, 41), conn_event(conn_up, 41)],
    {httpdcnode, _, conn_up, 41, ConnA, ws, _} = lists:keyfind(ws, 6, Ups),
    {httpdcnode, _, conn_up, 41, ConnB, chunked, _} = lists:keyfind(chunked, 6, Ups),
    %% Every stream has a Conn now: a chunked one takes {conn, ...} as a
    %% chunk, once it is live (its conn_up comes when it opens, before its
    %% welcome is written: until then a reply is dropped, and counted).
    Early = reply_when_live({Node, ConnB}, <<"a chunk">>, 0),
    received_containing(B, <<"a chunk">>, <<>>),
    ?assertEqual({ok, 1}, httpdcnode:reply_sync({Node, ConnA}, <<"a frame">>)),
    ok = gen_tcp:send(A, [frame(<<"one">>), frame(<<"two">>)]),
    ?assertEqual([{in, 41, {Node, ConnA}, <<"one">>}, {in, 41, {Node, ConnA}, <<"two">>}],
                 [inbox_any(), inbox_any()]),
    httpdtest_server:send(S, {kick, 41}),
    Downs = [conn_event(conn_down, 41), conn_event(conn_down, 41)],
    ?assertEqual(lists:sort([{httpdcnode, Node, conn_down, 41, ConnA, kick},
                             {httpdcnode, Node, conn_down, 41, ConnB, kick}]),
                 lists:sort(Downs)),
    %% The inbox: the end of the WebSocket, not of the chunked stream.
    ?assertEqual({conn_down, 41, {Node, ConnA}, kick}, inbox_any()),
    nothing_from_inbox(),
    ?assertMatch(#{kicked := 2, conn_events_dropped := 0, conn_sent := 2},
                 httpdtest_server:stats(S)),
    ?assertEqual(Early, maps:get(conn_dropped, httpdtest_server:stats(S))),
    [gen_tcp:close(X) || X <- [A, B]].

%% Each reason as the call that closed it gave it, to the presence process
%% and the inbox alike.
ws_closes(S) ->
    Node = node_of(S),
    Shed = open(S, "/ws/61"),
    {httpdcnode, _, conn_up, 61, ShedConn, ws, _} = conn_event(conn_up, 61),
    %% A message that grows past the 64 KiB every client byte held shares.
    ok = gen_tcp:send(Shed, frame(2, binary:copy(<<"x">>, 131072), #{fin => 0})),
    ?assertEqual({httpdcnode, Node, conn_down, 61, ShedConn, ws_shed},
                 conn_event(conn_down, 61)),
    ?assertEqual({conn_down, 61, {Node, ShedConn}, ws_shed}, inbox_down()),
    Bad = open(S, "/ws/62"),
    {httpdcnode, _, conn_up, 62, BadConn, ws, _} = conn_event(conn_up, 62),
    ok = gen_tcp:send(Bad, <<16#81, 1, "x">>),                  % unmasked
    ?assertEqual({httpdcnode, Node, conn_down, 62, BadConn, ws_protocol},
                 conn_event(conn_down, 62)),
    ?assertEqual({conn_down, 62, {Node, BadConn}, ws_protocol}, inbox_down()),
    ?assertMatch(#{ws_shed := 1, ws_bad_frames := 1}, httpdtest_server:stats(S)),
    [gen_tcp:close(X) || X <- [Shed, Bad]].

off_by_default(S) ->
    Node = node_of(S),
    A = open(S, "/ws/51"),
    B = open(S, "/sse/52"),
    ok = gen_tcp:send(A, frame(<<"hi">>)),
    {in, 51, _, <<"hi">>} = inbox_any(),
    wait_up(Node, [51, 52]),
    gen_tcp:close(A),
    gen_tcp:close(B),
    wait_down(Node, [51, 52]),
    %% conn events are sent at once, uid presence after its window: any
    %% would have come before the downs.
    Conn = [M || M <- flush(), is_conn_event(M)],
    ?assertEqual([], Conn),
    nothing_from_inbox().

%%% ---------------------------------------------------------------- helpers

%% The next conn event of Kind for Uid the presence process got (others of
%% its messages are skipped).
conn_event(Kind, Uid) ->
    receive
        {forwarded, presence, {httpdcnode, _, Kind, Uid, _, _} = M} -> M;
        {forwarded, presence, {httpdcnode, _, Kind, Uid, _, _, _} = M} -> M
    after ?T -> erlang:error({no_presence, Kind, Uid})
    end.

inbox_down() ->
    receive {conn_down, _, _, _} = M -> M after ?T -> erlang:error(no_inbox_conn_down) end.

inbox_any() ->
    receive
        {in, _, _, _} = M -> M;
        {conn_down, _, _, _} = M -> M
    after ?T -> erlang:error(nothing_from_inbox)
    end.

nothing_from_inbox() ->
    receive
        {in, _, _, _} = M -> erlang:error({unexpected, M});
        {conn_down, _, _, _} = M -> erlang:error({unexpected, M})
    after 300 -> ok
    end.

%% Waits for uid presence `up' (or `down') of each uid, singly or in lists.
wait_up(Node, Uids) -> wait_uids(Node, up, Uids).
wait_down(Node, Uids) -> wait_uids(Node, down, Uids).

wait_uids(_Node, _Op, []) -> ok;
wait_uids(Node, Op, Uids) ->
    receive
        {forwarded, presence, {httpdcnode, Node, Op, U}} ->
            wait_uids(Node, Op, Uids -- (if is_list(U) -> U; true -> [U] end))
    after ?T -> erlang:error({no_presence, Op, Uids})
    end.

flush() -> receive M -> [M | flush()] after 0 -> [] end.

is_conn_event({forwarded, presence, {httpdcnode, _, conn_up, _, _, _, _}}) -> true;
is_conn_event({forwarded, presence, {httpdcnode, _, conn_down, _, _, _}}) -> true;
is_conn_event(_) -> false.

%% A raw socket with the GET of Path sent; a WebSocket's 101 read.
open(S, "/ws/" ++ Uid) -> httpdtest_inbox:ws_open(S, list_to_integer(Uid));
open(S, Path) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S), [binary, {active, false}]),
    ok = gen_tcp:send(Sock, httpdtest_http:request_bytes("GET", Path, "HTTP/1.1", [])),
    Sock.

%% reply_sync until it writes ({ok, 1}), at most 50 tries 20 ms apart;
%% the tries that found the stream not yet live ({ok, 0}).
reply_when_live(To, Data, Tries) when Tries < 50 ->
    case httpdcnode:reply_sync(To, Data) of
        {ok, 1} -> Tries;
        {ok, 0} -> timer:sleep(20), reply_when_live(To, Data, Tries + 1)
    end.

%% Reads Sock until what came holds Part (bounded by ?T a read).
received_containing(Sock, Part, Acc) ->
    case binary:match(Acc, Part) of
        nomatch ->
            {ok, More} = gen_tcp:recv(Sock, 0, ?T),
            received_containing(Sock, Part, <<Acc/binary, More/binary>>);
        _ -> ok
    end.

