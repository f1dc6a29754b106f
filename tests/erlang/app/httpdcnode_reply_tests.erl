%% SPDX-License-Identifier: Apache-2.0
%% httpdcnode:reply/2 and reply_sync/2 through the application: a master
%% running it, its inbox calling app_test_handler, a real server.
%%   - A Conn kept from before the C-node was killed and started again
%%     names none of the new run's streams: counted (conn_dropped); the
%%     new run's ids, large, go through ?conn= and {conn, Conn, Data}.
%%   - The Conn of a POST /send/N without ?conn= ({Node, 0}): a reply to
%%     it is counted (conn_dropped), the handler never crashes.
%%   - An empty reply: an empty WebSocket frame, an SSE event with empty
%%     data; a chunked stream cannot carry it: counted (conn_empty_dropped).
-module(httpdcnode_reply_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [stats/1, wait_stat/4, node_of/1]).
-import(httpdtest_inbox, [ws_open/2, ws_open/3, frame/2, recv_frame/1, collect/1,
                          nothing_more/0]).
-import(core_post_tests, [connect/1, post/4, open_sse/2, open_chunked/2, read_until/2]).

-define(T, 10000).
-define(ARGS, ["--client-rate", "100000"]).

reply_test_() ->
    [app_test("a Conn kept from before the C-node was killed (SIGKILL) and started again "
              "reaches none of the new run's streams: counted", fun restart/1),
     app_test("a reply to a POST without ?conn= (Conn {Node, 0}) is counted in conn_dropped; "
              "the handler never crashes", fun post_without_conn/1),
     app_test("an empty reply: an empty WebSocket frame, an SSE event with empty data; "
              "counted on a chunked stream, which cannot carry it", fun empty/1)].

%% The master runs the application with the inbox app_test_handler, which
%% passes each client message to a sink here; a server with --inbox.
app_test(Label, Fun) ->
    httpdtest_inbox:app_test(Label, app_test_handler, "reply_sink", ?ARGS, Fun).

%%% ---------------------------------------------------------------- cases

restart(#{server := S, mnode := MNode}) ->
    A = ws_open(S, 100),
    ok = gen_tcp:send(A, frame(1, <<"hello">>)),
    [{100, OldConn = {CNode, OldId}, <<"hello">>}] = collect(1),
    ?assertEqual({ok, 1}, m(MNode, httpdcnode, reply_sync, [OldConn, <<"to A">>])),
    ?assertEqual({1, 1, <<"to A">>}, recv_frame(A)),
    %% Killed as in a crash, started again under the same name, linked to
    %% the master again: a stream of another uid gets an id.
    httpdtest_server:kill_server(S),
    S2 = httpdtest_server:restart_server(S),
    try
        httpdtest_master:wait_master_sees(MNode, CNode, ?T),
        wait_stat(S2, erl_masters, fun(V) -> V =:= 1 end, ?T),
        B = ws_open(S2, 200),
        ok = gen_tcp:send(B, frame(1, <<"b">>)),
        [{200, BConn = {CNode, BId}, <<"b">>}] = collect(1),
        %% A reply the application computed for A's stream of the old run.
        ?assertEqual({ok, 0}, m(MNode, httpdcnode, reply_sync, [OldConn, <<"stale">>])),
        ok = m(MNode, httpdcnode, reply, [OldConn, <<"stale too">>]),
        %% B's next frame is its own reply, sent after them: theirs never came.
        ?assertEqual({ok, 1}, m(MNode, httpdcnode, reply_sync, [BConn, <<"for B">>])),
        ?assertEqual({1, 1, <<"for B">>}, recv_frame(B)),
        ?assertMatch(#{conn_dropped := 2, conn_sent := 1}, stats(S2)),
        ?assert(BId > OldId),
        %% The new run's ids are large (the clock's microseconds): ?conn= and
        %% {conn, Conn, Data} take them whole, and JavaScript's numbers too.
        {Sse, SseId} = open_sse(S2, 200),
        ?assert(SseId > BId andalso SseId < 1 bsl 53),
        P = connect(S2),
        ?assertMatch({202, _, _}, post(P, "/send/200?conn=" ++ integer_to_list(SseId), text,
                                       <<"from sse">>)),
        [{200, {CNode, SseId}, <<"from sse">>}] = collect(1),
        ?assertEqual({ok, 1}, m(MNode, httpdcnode, reply_sync, [{CNode, SseId}, <<"r">>])),
        ?assertEqual(<<"event: reply\ndata: r\n\n">>, read_until(Sse, <<"\n\n">>)),
        [gen_tcp:close(X) || X <- [B, P, Sse]]
    after
        httpdtest_server:stop_server(S2)
    end,
    gen_tcp:close(A).

post_without_conn(#{server := S, master := M, mnode := MNode}) ->
    CNode = node_of(S),
    P = connect(S),
    N = 200,
    [?assertMatch({202, _, _}, post(P, "/send/7", text, <<"echo ", (integer_to_binary(I))/binary>>))
     || I <- lists:seq(1, N)],
    Got = collect(N),
    ?assertEqual([{7, {CNode, 0}, <<"echo ", (integer_to_binary(I))/binary>>}
                  || I <- lists:seq(1, N)], Got),
    wait_stat(S, conn_dropped, fun(V) -> V =:= N end, ?T),
    ?assertEqual({ok, 0}, m(MNode, httpdcnode, reply_sync, [{CNode, 0}, <<"none">>])),
    ?assertMatch(#{conn_dropped := 201, conn_sent := 0, bad_terms := 0}, stats(S)),
    %% The handler replied each time without crashing: nothing logged.
    {ok, Log} = file:read_file(maps:get(log, M)),
    ?assertEqual(nomatch, binary:match(Log, <<"crashed">>)),
    gen_tcp:close(P).

empty(#{server := S, mnode := MNode}) ->
    %% WebSocket: an empty text frame, from the handler's reply/2 and from
    %% reply_sync/2; with ws+meta the frame says it is a reply, nothing after.
    Ws = ws_open(S, 300),
    ok = gen_tcp:send(Ws, frame(1, <<"echo ">>)),
    [{300, WsConn, <<"echo ">>}] = collect(1),
    ?assertEqual({1, 1, <<>>}, recv_frame(Ws)),
    ?assertEqual({ok, 1}, m(MNode, httpdcnode, reply_sync, [WsConn, []])),
    ?assertEqual({1, 1, <<>>}, recv_frame(Ws)),
    Meta = ws_open(S, 300, ["Sec-WebSocket-Protocol: ws+meta.httpdcnode"]),
    ok = gen_tcp:send(Meta, frame(1, <<"echo ">>)),
    [{300, _, <<"echo ">>}] = collect(1),
    ?assertEqual({1, 1, <<"event: conn\n\n">>}, recv_frame(Meta)),
    %% SSE: the event reply with one empty data line (EventSource dispatches
    %% it, data "").
    {Sse, SseId} = open_sse(S, 301),
    P = connect(S),
    ?assertMatch({202, _, _}, post(P, "/send/301?conn=" ++ integer_to_list(SseId), text,
                                   <<"echo ">>)),
    [{301, SseConn, _}] = collect(1),
    ?assertEqual(<<"event: reply\ndata: \n\n">>, read_until(Sse, <<"\n\n">>)),
    ?assertEqual({ok, 1}, m(MNode, httpdcnode, reply_sync, [SseConn, <<>>])),
    ?assertEqual(<<"event: reply\ndata: \n\n">>, read_until(Sse, <<"\n\n">>)),
    %% Chunked: an empty chunk would end the stream; counted, and the stream
    %% goes on.
    {Chunked, CId} = open_chunked(S, 302),
    ?assertMatch({202, _, _}, post(P, "/send/302?conn=" ++ integer_to_list(CId), text,
                                   <<"echo ">>)),
    [{302, CConn, _}] = collect(1),
    wait_stat(S, conn_empty_dropped, fun(V) -> V =:= 1 end, ?T),
    ?assertEqual({ok, 0}, m(MNode, httpdcnode, reply_sync, [CConn, <<>>])),
    ?assertEqual({ok, 1}, m(MNode, httpdcnode, reply_sync, [CConn, <<"after">>])),
    ?assertEqual(<<"5\r\nafter\r\n">>, read_until(Chunked, <<"after\r\n">>)),
    ?assertMatch(#{conn_empty_dropped := 2, conn_dropped := 0, conn_sent := 6, empty := 0,
                   streams_open := 4}, stats(S)),
    nothing_more(),
    [gen_tcp:close(X) || X <- [Ws, Meta, Sse, P, Chunked]].

%%% ---------------------------------------------------------------- helpers

m(Node, Mod, F, A) -> erpc:call(Node, Mod, F, A, 30000).
