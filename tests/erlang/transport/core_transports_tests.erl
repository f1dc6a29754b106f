%% SPDX-License-Identifier: Apache-2.0
%% Every transport at once: a multicast and a broadcast reach the chunked
%% stream, SSE, WebSocket and a waiting long-poll alike; and a client that
%% comes back to a restarted server (a new epoch) is told of a gap.
-module(core_transports_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [send/2, port_of/1, wait_stat/4]).
-import(httpdtest_http, [open_stream/2, expect_chunk/2, close/1, request_bytes/4]).
-import(httpdtest_json, [json_decode/1]).
-import(httpdtest_raw, [read_until/3, take/2, spawn_poll/2]).

-define(T, 5000).

transports_test_() ->
    [httpdtest_server:server_test("multicast and broadcast reach chunked, SSE, WebSocket "
                                  "and long-poll clients at once", #{}, 30, fun all_at_once/1),
     {"SSE after a server restart: a gap (the epoch changed), then the new ids",
      {timeout, 60, fun after_restart/0}}].

all_at_once(S) ->
    Chunked = open_stream(S, 1),
    Sse = sse(S, 2, []),
    Ws = ws(S, 3),
    send(S, {[1, 2, 3], <<"to three">>}),
    ?assertEqual(<<"to three">>, expect_chunk(Chunked, ?T)),
    ?assertMatch([<<"id: ", _/binary>>, <<"data: to three">>], sse_event(Sse)),
    ?assertEqual(<<"to three">>, ws_text(Ws)),
    Poll = spawn_poll(S, "/poll/4"),
    wait_stat(S, streams_open, fun(V) -> V =:= 4 end, ?T),
    send(S, {broadcast, <<"to all">>}),
    ?assertEqual(<<"to all">>, expect_chunk(Chunked, ?T)),
    ?assertMatch([<<"id: ", _/binary>>, <<"data: to all">>], sse_event(Sse)),
    ?assertEqual(<<"to all">>, ws_text(Ws)),
    #{<<"messages">> := [#{<<"data">> := <<"to all">>}]} = poll_answer(Poll),
    close(Chunked),
    gen_tcp:close(Sse),
    gen_tcp:close(Ws).

after_restart() ->
    S1 = httpdtest_server:start_server(#{}),
    Id = try
             Sock = sse(S1, 9, []),
             send(S1, {9, <<"before">>}),
             [<<"id: ", I/binary>>, <<"data: before">>] = sse_event(Sock),
             gen_tcp:close(Sock),
             I
         after
             httpdtest_server:stop_server(S1)
         end,
    S2 = httpdtest_server:start_server(#{}),
    try
        Sock2 = sse(S2, 9, ["Last-Event-ID: " ++ binary_to_list(Id)]),
        %% The gap's id is the new server's newest for the uid (none yet: 0).
        [<<"id: ", GapId/binary>>, <<"event: gap">>, GapData] = sse_event(Sock2),
        ?assertMatch([_, <<"0">>], binary:split(GapId, <<":">>)),
        ?assertEqual(iolist_to_binary(["data: {\"last\":\"", Id, "\",\"first\":null,\"next\":\"",
                                       GapId, "\"}"]), GapData),
        send(S2, {9, <<"after">>}),
        [<<"id: ", New/binary>>, <<"data: after">>] = sse_event(Sock2),
        [E1, _] = binary:split(Id, <<":">>),
        [E2, <<"1">>] = binary:split(New, <<":">>),
        ?assertNotEqual(E1, E2),
        gen_tcp:close(Sock2)
    after
        httpdtest_server:stop_server(S2)
    end.

%%% ---------------------------------------------------------------- clients

connect(S, Req) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S), [binary, {active, false}]),
    ok = gen_tcp:send(Sock, Req),
    {Head, Rest} = read_until(Sock, <<"\r\n\r\n">>, <<>>),
    put({buf, Sock}, Rest),
    {Sock, Head}.

sse(S, Uid, Headers) ->
    {Sock, Head} = connect(S, request_bytes("GET", "/sse/" ++ integer_to_list(Uid), "HTTP/1.1",
                                            Headers)),
    ?assertMatch(<<"HTTP/1.1 200 OK", _/binary>>, Head),
    [<<"retry: ", _/binary>>] = sse_event(Sock),
    Sock.

%% The next event's lines.
sse_event(Sock) ->
    {Event, Rest} = read_until(Sock, <<"\n\n">>, get({buf, Sock})),
    put({buf, Sock}, Rest),
    binary:split(Event, <<"\n">>, [global]).

ws(S, Uid) ->
    {Sock, Head} = connect(S, request_bytes("GET", "/ws/" ++ integer_to_list(Uid), "HTTP/1.1",
                                            ["Upgrade: websocket", "Connection: Upgrade",
                                             "Sec-WebSocket-Version: 13",
                                             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="])),
    ?assertMatch(<<"HTTP/1.1 101 ", _/binary>>, Head),
    ?assertNotEqual(nomatch, binary:match(Head, <<"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=">>)),
    Sock.

%% The next frame: a text frame of fewer than 126 bytes, unmasked.
ws_text(Sock) ->
    <<16#81, Len>> = take(Sock, 2),
    ?assert(Len < 126),
    take(Sock, Len).

poll_answer(P) ->
    receive {poll_answer, P, Bytes} ->
            [_, Body] = binary:split(Bytes, <<"\r\n\r\n">>),
            json_decode(Body)
    after ?T -> erlang:error(no_poll_answer)
    end.
