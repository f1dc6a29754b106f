%% SPDX-License-Identifier: Apache-2.0
%% A message's type, said by Erlang: httpdcnode:send(Uid, {binary, Bin})
%% (and multicast, broadcast, the _sync forms, reply) reaches the client as
%% binary whatever Bin's bytes, valid UTF-8 too: a WebSocket binary frame
%% (opcode 2), SSE's "event: base64", long-poll's "data_base64", and so
%% again when replayed from the history on a resume; an untagged message
%% is judged by its bytes as before. Through the application on a real
%% master, to a real server, on raw sockets.
-module(core_binary_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_raw, [read_event/1, read_until/3, recv_frame/1, frame/2, ws_meta_upgrade/2,
                        spawn_poll/2, poll_raw/2]).

-import(httpdtest_server, [stats/1, node_of/1, port_of/1, send/2, wait_stat/4, metrics/1,
                           start_server/1]).
-import(httpdtest_http, [open/2, get_request/1, expect_head/2, expect_chunk/2, close/1,
                         request_bytes/4]).
-import(httpdtest_os, [unique/1]).
-import(httpdtest_master, [start_sink/1, start_master/0, master_node/1, stop_master/1,
                           stop_sink/1]).
-import(httpdtest_wait, [wait_until/3]).
-import(httpdtest_json, [json_decode/1]).

-define(T, 10000).
-define(INBOX, httpdcnode_inbox).

binary_test_() ->
    {setup, fun start/0, fun stop/1,
     fun(Ctx) ->
             [t(Ctx, "WebSocket: {binary, Bin} of valid UTF-8 is an opcode-2 frame from send, "
                "send_sync, multicast, multicast_sync and broadcast; untagged as its bytes say; "
                "{text, Data} a text frame", fun ws/1),
              t(Ctx, "SSE: {binary, Bin} is event: base64 whatever its bytes; long-poll: "
                "data_base64", fun sse_and_poll/1),
              t(Ctx, "resume from the history: each message replayed as it went live, on "
                "ws+meta, SSE and long-poll (own and shared entries)", fun resume/1),
              t(Ctx, "reply/2 and reply_sync/2 with {binary, Bin}: opcode 2 on a WebSocket, "
                "event: reply_base64 on SSE; chunked streams get the bytes", fun reply/1),
              t(Ctx, "{text, Data} not UTF-8: badarg from the API; as a raw term dropped and "
                "counted (not_utf8)", fun not_utf8/1)]
     end}.

%%% ---------------------------------------------------------------- cases

ws(#{server := S} = Ctx) ->
    A = ws_open(Ctx, 101),
    B = ws_open(Ctx, 102),
    app(Ctx, send, [101, {binary, <<"hello">>}]),
    ?assertEqual({1, 2, <<"hello">>}, recv_frame(A)),
    %% Untagged: the guess of before, text when UTF-8, else binary.
    app(Ctx, send, [101, <<"hello">>]),
    ?assertEqual({1, 1, <<"hello">>}, recv_frame(A)),
    app(Ctx, send, [101, <<255, 0>>]),
    ?assertEqual({1, 2, <<255, 0>>}, recv_frame(A)),
    app(Ctx, send, [101, {text, [<<"caf">>, 233]}]),     % chardata, sent as UTF-8
    ?assertEqual({1, 1, <<"caf", 16#c3, 16#a9>>}, recv_frame(A)),
    app(Ctx, send, [101, {binary, [<<"io">>, "li", [$s, $t]]}]),
    ?assertEqual({1, 2, <<"iolist">>}, recv_frame(A)),
    ?assertEqual({ok, 1}, app(Ctx, send_sync, [101, {binary, <<"sync">>}])),
    ?assertEqual({1, 2, <<"sync">>}, recv_frame(A)),
    app(Ctx, multicast, [[101, 102], {binary, <<"multi">>}]),
    [?assertEqual({1, 2, <<"multi">>}, recv_frame(X)) || X <- [A, B]],
    ?assertEqual({ok, 2}, app(Ctx, multicast_sync, [[101, 102], {binary, <<"msync">>}])),
    [?assertEqual({1, 2, <<"msync">>}, recv_frame(X)) || X <- [A, B]],
    app(Ctx, broadcast, [{binary, <<"all">>}]),
    [?assertEqual({1, 2, <<"all">>}, recv_frame(X)) || X <- [A, B]],
    app(Ctx, broadcast, [<<"all text">>]),
    [?assertEqual({1, 1, <<"all text">>}, recv_frame(X)) || X <- [A, B]],
    ?assertMatch(#{not_utf8 := 0, bad_terms := 0}, stats(S)),
    [gen_tcp:close(X) || X <- [A, B]].

sse_and_poll(Ctx) ->
    Sock = sse_open(Ctx, 103, ""),
    app(Ctx, send, [103, {binary, <<"hello">>}]),
    {Epoch, 1, <<"event: base64\ndata: aGVsbG8=\n">>} = sse_event(Sock),
    app(Ctx, send, [103, <<"hello">>]),
    ?assertEqual({Epoch, 2, <<"data: hello\n">>}, sse_event(Sock)),
    app(Ctx, multicast, [[103], {binary, <<"multi">>}]),
    ?assertEqual({Epoch, 3, <<"event: base64\ndata: bXVsdGk=\n">>}, sse_event(Sock)),
    gen_tcp:close(Sock),
    %% A waiting poll answers with the next message.
    Poller = spawn_poll(server(Ctx), "/poll/104"),
    wait_online(Ctx, 104),
    app(Ctx, send, [104, {binary, <<"hello">>}]),
    #{<<"messages">> := [#{<<"id">> := Id, <<"data_base64">> := <<"aGVsbG8=">>} = M]} =
        poll_answer(Poller),
    ?assertNot(is_map_key(<<"data">>, M)),
    ?assertEqual(<<Epoch/binary, ":1">>, Id).

%% Everything sent to uid 105 while it was connected, replayed to a
%% client that saw none of it, on each transport.
resume(Ctx) ->
    Sock = gen_tcp_connect(Ctx),
    ws_meta_upgrade(Sock, "/ws/105"),
    wait_online(Ctx, 105),
    app(Ctx, send, [105, {binary, <<"b1">>}]),
    app(Ctx, send, [105, <<"t2">>]),
    app(Ctx, multicast, [[105], {binary, <<"m3">>}]),
    app(Ctx, multicast, [[105], <<"m4">>]),
    app(Ctx, send, [105, <<255>>]),
    Want = [{2, <<"b1">>}, {1, <<"t2">>}, {2, <<"m3">>}, {1, <<"m4">>}, {2, <<255>>}],
    Live = [meta_frame(Sock) || _ <- Want],
    [{_, Epoch, _, _} | _] = Live,
    ?assertEqual([{Op, Epoch, I, P} || {I, {Op, P}} <- lists:enumerate(Want)], Live),
    gen_tcp:close(Sock),
    %% ws+meta from the start: the same frames, the same opcodes.
    Again = gen_tcp_connect(Ctx),
    ws_meta_upgrade(Again, "/ws/105?since=" ++ binary_to_list(Epoch) ++ ":0"),
    ?assertEqual(Live, [meta_frame(Again) || _ <- Want]),
    gen_tcp:close(Again),
    %% SSE: base64 events for the binary ones.
    E = binary_to_list(Epoch),
    Sse = sse_open(Ctx, 105, "Last-Event-ID: " ++ E ++ ":0"),
    Events = [sse_event(Sse) || _ <- Want],
    gen_tcp:close(Sse),
    ?assertEqual([{Epoch, 1, <<"event: base64\ndata: YjE=\n">>},
                  {Epoch, 2, <<"data: t2\n">>},
                  {Epoch, 3, <<"event: base64\ndata: bTM=\n">>},
                  {Epoch, 4, <<"data: m4\n">>},
                  {Epoch, 5, <<"event: base64\ndata: /w==\n">>}], Events),
    %% Long-poll: data_base64 for the binary ones.
    {_, #{<<"messages">> := Ms}} = poll_raw(server(Ctx), "/poll/105?since=" ++ E ++ ":0"),
    ?assertEqual([#{<<"data_base64">> => <<"YjE=">>}, #{<<"data">> => <<"t2">>},
                  #{<<"data_base64">> => <<"bTM=">>}, #{<<"data">> => <<"m4">>},
                  #{<<"data_base64">> => <<"/w==">>}],
                 [maps:remove(<<"id">>, M) || M <- Ms]).

reply(#{server := S} = Ctx) ->
    CNode = node_of(S),
    %% A WebSocket client talks; the inbox passes its Conn on to here.
    A = ws_open(Ctx, 106),
    ok = gen_tcp:send(A, frame(1, <<"hi">>)),
    [{106, Conn, <<"hi">>}] = httpdtest_inbox:collect(1),
    ok = app(Ctx, reply, [Conn, {binary, <<"r1">>}]),
    ?assertEqual({1, 2, <<"r1">>}, recv_frame(A)),
    ok = app(Ctx, reply, [Conn, <<"r2">>]),
    ?assertEqual({1, 1, <<"r2">>}, recv_frame(A)),
    ?assertEqual({ok, 1}, app(Ctx, reply_sync, [Conn, {binary, <<"r3">>}])),
    ?assertEqual({1, 2, <<"r3">>}, recv_frame(A)),
    ?assertEqual({ok, 1}, app(Ctx, reply_sync, [Conn, {text, <<"r4">>}])),
    ?assertEqual({1, 1, <<"r4">>}, recv_frame(A)),
    gen_tcp:close(A),
    %% SSE, opened with ?conn=1: its id is the first event.
    Sse = sse_open(Ctx, 107, "", "?conn=1"),
    <<"event: conn\ndata: {\"conn\":\"", IdQ/binary>> = read_event(Sse),
    [Id, _] = binary:split(IdQ, <<"\"">>),
    SseConn = {CNode, binary_to_integer(Id)},
    ?assertEqual({ok, 1}, app(Ctx, reply_sync, [SseConn, {binary, <<"hello">>}])),
    ?assertEqual(<<"event: reply_base64\ndata: aGVsbG8=\n\n">>, read_event(Sse)),
    ?assertEqual({ok, 1}, app(Ctx, reply_sync, [SseConn, <<"hello">>])),
    ?assertEqual(<<"event: reply\ndata: hello\n\n">>, read_event(Sse)),
    gen_tcp:close(Sse),
    %% Chunked: the bytes, binary or not.
    C = open(port_of(S), get_request("/test/108?conn=1")),
    #{status := 200} = expect_head(C, ?T),
    <<"Welcome", _/binary>> = expect_chunk(C, ?T),
    <<"{\"conn\":\"", CIdQ/binary>> = expect_chunk(C, ?T),
    [CId, _] = binary:split(CIdQ, <<"\"">>),
    wait_online(Ctx, 108),
    ?assertEqual({ok, 1}, app(Ctx, reply_sync, [{CNode, binary_to_integer(CId)},
                                                {binary, <<"hello">>}])),
    ?assertEqual(<<"hello">>, expect_chunk(C, ?T)),
    ?assertEqual({ok, 1}, app(Ctx, send_sync, [108, {binary, <<"sent">>}])),
    ?assertEqual(<<"sent">>, expect_chunk(C, ?T)),
    close(C).

%% {text, Data} promises text: bytes that are not UTF-8 cannot go as a
%% text frame (a browser closes the WebSocket for it) nor as SSE data
%% lines. The API refuses them at the call; a raw term with them is
%% dropped and counted, and the client gets nothing of it.
not_utf8(#{server := S} = Ctx) ->
    A = ws_open(Ctx, 109),
    ?assertError({exception, badarg, _}, app(Ctx, send, [109, {text, <<"caf", 233>>}])),
    ?assertError({exception, badarg, _}, app(Ctx, reply, [{node_of(S), 1}, {text, <<255>>}])),
    send(S, {109, {text, <<"caf", 233>>}}),
    send(S, {[109], {text, <<255>>}}),
    wait_stat(S, not_utf8, fun(V) -> V =:= 2 end, ?T),
    ?assertMatch(#{<<"httpdcnode_messages_dropped_total{reason=\"not_utf8\"}">> := 2},
                 metrics(S)),
    app(Ctx, send, [109, <<"after">>]),
    ?assertEqual({1, 1, <<"after">>}, recv_frame(A)),          % and nothing before it
    gen_tcp:close(A).

%%% ---------------------------------------------------------------- fixture

%% A master running the application as a user does, its inbox passing
%% client messages to a sink here; a server with presence and --inbox that
%% the master knows.
start() ->
    Sink = list_to_atom(unique("binary_sink")),
    start_sink(Sink),
    M = start_master(),
    MNode = master_node(M),
    try
        httpdtest_cluster:start_app(MNode, [{inbox, {?INBOX, inbox_test_handler,
                                                     {Sink, node()}}}]),
        S = start_server(#{master => M, presence => httpdcnode_presence,
                           extra_args => ["--inbox", atom_to_list(?INBOX)]}),
        CNode = node_of(S),
        wait_until(fun() -> lists:member(CNode, erpc:call(MNode, httpdcnode, nodes, []))
                   end, ?T, {master_knows, CNode}),
        wait_stat(S, erl_masters, fun(V) -> V =:= 1 end, ?T),
        #{master => M, mnode => MNode, server => S, sink => Sink}
    catch C:E:St ->
            stop_master(M),
            stop_sink(Sink),
            erlang:raise(C, E, St)
    end.

stop(#{master := M, server := S, sink := Sink}) ->
    httpdtest_inbox:stop_all(M, S, Sink).

t(#{server := S, sink := Sink} = Ctx, Label, Fun) ->
    {Label, httpdtest_inbox:sink_test(S, Sink, 60, fun() -> Fun(Ctx) end)}.

server(#{server := S}) -> S.

%% httpdcnode:F(Args...) on the master, as the application's user calls it.
app(#{mnode := MNode}, F, Args) -> erpc:call(MNode, httpdcnode, F, Args, ?T).

%% Until the master's presence has Uid on the server: a send before that
%% would be dropped as offline.
wait_online(#{mnode := MNode, server := S}, Uid) ->
    CNode = node_of(S),
    wait_until(fun() -> lists:member(CNode, erpc:call(MNode, httpdcnode, online, [Uid])) end,
               ?T, {online, Uid}).

%%% ---------------------------------------------------------------- clients

gen_tcp_connect(Ctx) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(server(Ctx)),
                                 [binary, {active, false}]),
    Sock.

%% A plain WebSocket of Uid, known online to the master.
ws_open(Ctx, Uid) ->
    Sock = httpdtest_inbox:ws_open(server(Ctx), Uid),
    wait_online(Ctx, Uid),
    Sock.

%% {Opcode, Epoch, Seq, Payload} of a ws+meta message frame.
meta_frame(Sock) ->
    {1, Op, <<"id: ", Epoch:8/binary, ":", Rest/binary>>} = recv_frame(Sock),
    [Seq, Payload] = binary:split(Rest, <<"\n\n">>),
    {Op, Epoch, binary_to_integer(Seq), Payload}.

%% GET /sse/Uid with a header line (or ""), its retry advice read, known
%% online to the master.
sse_open(Ctx, Uid, Header) -> sse_open(Ctx, Uid, Header, "").

sse_open(Ctx, Uid, Header, Query) ->
    Sock = gen_tcp_connect(Ctx),
    ok = gen_tcp:send(Sock, request_bytes("GET", "/sse/" ++ integer_to_list(Uid) ++ Query,
                                           "HTTP/1.1", [H || H <- [Header], H =/= ""])),
    {Head, Rest} = read_until(Sock, <<"\r\n\r\n">>, <<>>),
    ?assertMatch(<<"HTTP/1.1 200 OK\r\n", _/binary>>, Head),
    put({buf, Sock}, Rest),
    <<"retry: ", _/binary>> = read_event(Sock),
    wait_online(Ctx, Uid),
    Sock.

%% {Epoch, Seq, the lines after the id} of a message event.
sse_event(Sock) ->
    <<"id: ", Epoch:8/binary, ":", Rest/binary>> = read_event(Sock),
    [Seq, Lines] = binary:split(Rest, <<"\n">>),
    {Epoch, binary_to_integer(Seq), binary:part(Lines, 0, byte_size(Lines) - 1)}.

poll_answer(Poller) ->
    receive {poll_answer, Poller, Bytes} ->
            [Head, Body] = binary:split(Bytes, <<"\r\n\r\n">>),
            ?assertMatch(<<"HTTP/1.1 200 OK\r\n", _/binary>>, Head),
            json_decode(Body)
    after ?T -> erlang:error(no_poll_answer)
    end.
