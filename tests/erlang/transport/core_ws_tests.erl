%% SPDX-License-Identifier: Apache-2.0
%% GET /ws/N: WebSocket on plain sockets, so that every byte is checked,
%% and everything a good client would never send: bad handshakes, unmasked,
%% oversized, fragmented control and reserved frames, invalid UTF-8, a
%% client that never answers pings.
-module(core_ws_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [send/2, stats/1, wait_stat/4, port_of/1]).
-import(httpdtest_http, [open_stream/2, expect_chunk/2, close/1]).
-import(httpdtest_raw, [read_until/3, take/2, recv_frame/1, meta_frame/1, frame/2, frame/3,
                        sync/1]).

-define(T, 5000).
-define(KEY, "dGhlIHNhbXBsZSBub25jZQ==").
-define(UPGRADE, ["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13"]).

ws_test_() ->
    [httpdtest_server:server_test("handshake: accept key, refusals (426, 400, 403), Origin "
                                  "rules, since= without ws+meta",
                                  #{extra_args => ["--allow-origin", "http://app.example"]},
                                  30, fun handshake/1),
     httpdtest_server:server_test("frames: text or binary by UTF-8 validity, 7/16/64-bit "
                                  "lengths, order",
                                  #{max_message => 100000}, 30, fun frames/1),
     httpdtest_server:server_test("ws+meta: id prefix, binary stays binary", #{}, 30,
                                  fun meta/1),
     httpdtest_server:server_test("resume with since=: missed once, in order, then live", #{},
                                  30, fun resume/1),
     httpdtest_server:server_test("history too short: a gap frame, then what is kept",
                                  #{extra_args => ["--history", "2"]}, 30, fun gap/1),
     httpdtest_server:server_test("client frames: ping answered, pong and data ignored and "
                                  "counted, fragments, a frame a byte at a time", #{}, 30,
                                  fun client_frames/1),
     httpdtest_server:server_test("close handshake: the client's close answered, socket "
                                  "closed", #{}, 30, fun close_handshake/1),
     httpdtest_server:server_test("protocol errors: 1002, 1007, 1009", #{}, 30,
                                  fun protocol_errors/1),
     httpdtest_server:server_test("heartbeat pings; a client that answers none is closed "
                                  "(1001), one that answers stays",
                                  #{extra_args => ["--heartbeat", "1"]}, 30, fun dead/1),
     httpdtest_server:server_test("multicast and broadcast reach WebSocket and chunked "
                                  "streams at once; kick closes with 4001 (do not come back)", #{}, 30,
                                  fun mixed/1),
     httpdtest_server:server_test("SIGTERM closes WebSockets with 1012 (service restart), exit 0", #{}, 30,
                                  fun sigterm/1)].

%%% ---------------------------------------------------------------- cases

handshake(S) ->
    {Sock, Head} = connect(S, "1", ?UPGRADE ++ ["Sec-WebSocket-Key: " ?KEY]),
    ?assertMatch(<<"HTTP/1.1 101 Switching Protocols\r\n", _/binary>>, Head),
    %% RFC 6455's own example key and answer.
    ?assertNotEqual(nomatch, binary:match(Head, <<"Sec-WebSocket-Accept: "
                                                  "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n">>)),
    ?assertEqual(nomatch, binary:match(Head, <<"Sec-WebSocket-Protocol">>)),
    gen_tcp:close(Sock),
    Key = ["Sec-WebSocket-Key: " ?KEY],
    %% Not a version-13 upgrade: 426 naming the version.
    {426, H1} = refused(S, "1", []),
    ?assertNotEqual(nomatch, binary:match(H1, <<"Sec-WebSocket-Version: 13\r\n">>)),
    {426, _} = refused(S, "1", ["Upgrade: websocket", "Connection: Upgrade",
                                "Sec-WebSocket-Version: 8" | Key]),
    {426, _} = refused(S, "1", ["Connection: Upgrade", "Sec-WebSocket-Version: 13" | Key]),
    %% No key, or not the base64 of 16 bytes.
    {400, _} = refused(S, "1", ?UPGRADE),
    {400, _} = refused(S, "1", ?UPGRADE ++ ["Sec-WebSocket-Key: short=="]),
    {400, _} = refused(S, "1", ?UPGRADE ++ ["Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ!!"]),
    %% Another site's page: 403 (cross-site WebSocket hijacking).
    {403, _} = refused(S, "1", ?UPGRADE ++ ["Origin: http://evil.example" | Key]),
    {403, _} = refused(S, "1", ?UPGRADE ++ ["Origin: null" | Key]),
    %% Resume without ids in frames.
    {400, _} = refused(S, "1?since=00000000:1", ?UPGRADE ++ Key),
    ?assertMatch(#{ws_refused := 9}, stats(S)),
    %% The request's own host (Host: x), an allowed origin; Connection as a list.
    [begin
         {Sock2, Head2} = connect(S, "1", ["Upgrade: WebSocket", "Connection: keep-alive, Upgrade",
                                           "Sec-WebSocket-Version: 13", "Origin: " ++ O | Key]),
         ?assertMatch(<<"HTTP/1.1 101 ", _/binary>>, Head2),
         gen_tcp:close(Sock2)
     end || O <- ["http://x", "http://app.example"]],
    ?assertMatch(#{ws_refused := 9}, stats(S)).

frames(S) ->
    Sock = open(S, 2),
    send(S, {2, <<"hello">>}),
    ?assertEqual({1, 1, <<"hello">>}, recv_frame(Sock)),
    send(S, {2, <<"caf", 16#c3, 16#a9>>}),                    % UTF-8
    ?assertEqual({1, 1, <<"caf", 16#c3, 16#a9>>}, recv_frame(Sock)),
    [send(S, {2, B}) || B <- [<<255, 0, 1>>, <<"caf", 16#e9>>, <<16#ed, 16#a0, 16#80>>]],
    ?assertEqual({1, 2, <<255, 0, 1>>}, recv_frame(Sock)),      % not UTF-8: binary
    ?assertEqual({1, 2, <<"caf", 16#e9>>}, recv_frame(Sock)),   % Latin-1
    ?assertEqual({1, 2, <<16#ed, 16#a0, 16#80>>}, recv_frame(Sock)),   % a surrogate
    Mid = binary:copy(<<"m">>, 300),
    Big = binary:copy(<<"b">>, 70000),
    send(S, {2, Mid}),
    send(S, {2, Big}),
    ?assertEqual({1, 1, Mid}, recv_frame(Sock)),
    ?assertEqual({1, 1, Big}, recv_frame(Sock)),
    Ms = [<<"n", (integer_to_binary(I))/binary>> || I <- lists:seq(1, 50)],
    [send(S, {2, M}) || M <- Ms],
    ?assertEqual([{1, 1, M} || M <- Ms], [recv_frame(Sock) || _ <- Ms]),
    gen_tcp:close(Sock).

meta(S) ->
    {Sock, Head} = connect(S, "3", ?UPGRADE ++ ["Sec-WebSocket-Key: " ?KEY,
                                                "Sec-WebSocket-Protocol: chat, ws+meta.httpdcnode"]),
    ?assertNotEqual(nomatch, binary:match(Head, <<"Sec-WebSocket-Protocol: ws+meta.httpdcnode\r\n">>)),
    send(S, {3, <<"hello">>}),
    {1, 1, <<"id: ", Epoch:8/binary, ":1\n\nhello">>} = recv_frame(Sock),
    send(S, {3, <<0, 255>>}),
    ?assertEqual({1, 2, <<"id: ", Epoch/binary, ":2\n\n", 0, 255>>}, recv_frame(Sock)),
    send(S, {3, <<"line\n\nwith a blank line">>}),
    ?assertEqual({1, 1, <<"id: ", Epoch/binary, ":3\n\nline\n\nwith a blank line">>},
                 recv_frame(Sock)),
    gen_tcp:close(Sock).

resume(S) ->
    Sock = open_meta(S, "4"),
    send(S, {4, <<"m1">>}),
    {Epoch, 1, <<"m1">>} = meta_frame(Sock),
    gen_tcp:close(Sock),
    wait_stat(S, streams_open, fun(V) -> V =:= 0 end, ?T),
    [send(S, {4, <<"m", (integer_to_binary(I))/binary>>}) || I <- lists:seq(2, 5)],
    sync(S),
    Sock2 = open_meta(S, "4?since=" ++ binary_to_list(Epoch) ++ "%3A1"),
    [?assertEqual({Epoch, I, <<"m", (integer_to_binary(I))/binary>>}, meta_frame(Sock2))
     || I <- lists:seq(2, 5)],
    send(S, {4, <<"m6">>}),
    ?assertEqual({Epoch, 6, <<"m6">>}, meta_frame(Sock2)),
    %% Up to date: nothing replayed, the next live message only.
    Sock3 = open_meta(S, "4?since=" ++ binary_to_list(Epoch) ++ ":6"),
    send(S, {4, <<"m7">>}),
    ?assertEqual({Epoch, 7, <<"m7">>}, meta_frame(Sock3)),
    ?assertEqual({Epoch, 7, <<"m7">>}, meta_frame(Sock2)),
    gen_tcp:close(Sock2),
    gen_tcp:close(Sock3).

gap(S) ->
    Sock = open_meta(S, "5"),
    send(S, {5, <<"m1">>}),
    {Epoch, 1, _} = meta_frame(Sock),
    gen_tcp:close(Sock),
    [send(S, {5, <<"m", (integer_to_binary(I))/binary>>}) || I <- lists:seq(2, 6)],
    sync(S),
    Sock2 = open_meta(S, "5?since=" ++ binary_to_list(Epoch) ++ ":1"),
    ?assertEqual({1, 1, iolist_to_binary(["event: gap\n\n{\"last\":\"", Epoch, ":1\",\"first\":\"",
                                          Epoch, ":5\",\"next\":\"", Epoch, ":4\"}"])},
                 recv_frame(Sock2)),
    ?assertEqual({Epoch, 5, <<"m5">>}, meta_frame(Sock2)),
    ?assertEqual({Epoch, 6, <<"m6">>}, meta_frame(Sock2)),
    gen_tcp:close(Sock2),
    %% An id that is no id: a gap from null.
    Sock3 = open_meta(S, "5?since=nonsense"),
    {1, 1, <<"event: gap\n\n{\"last\":null,\"first\":\"", _/binary>>} = recv_frame(Sock3),
    ?assertEqual({Epoch, 5, <<"m5">>}, meta_frame(Sock3)),
    gen_tcp:close(Sock3).

client_frames(S) ->
    Sock = open(S, 6),
    ok = gen_tcp:send(Sock, frame(9, <<"are you there">>)),
    ?assertEqual({1, 10, <<"are you there">>}, recv_frame(Sock)),
    ok = gen_tcp:send(Sock, frame(10, <<"unasked pong">>)),
    ok = gen_tcp:send(Sock, frame(1, <<"hi">>)),
    ok = gen_tcp:send(Sock, frame(2, <<1, 2, 3>>)),
    %% A text message in fragments, a character split between them, with a
    %% ping between the fragments.
    ok = gen_tcp:send(Sock, [frame(1, <<"caf", 16#c3>>, #{fin => 0}), frame(9, <<"p">>),
                             frame(0, <<16#a9>>)]),
    ?assertEqual({1, 10, <<"p">>}, recv_frame(Sock)),
    %% A ping a byte at a time: its parse state waits between reads. A
    %% /stats answer after each byte: the loop, which read the WebSocket
    %% as soon as the byte was there, has gone round since.
    ok = inet:setopts(Sock, [{nodelay, true}]),
    [begin ok = gen_tcp:send(Sock, [B]), stats(S) end || <<B>> <= frame(9, <<"slow">>)],
    ?assertEqual({1, 10, <<"slow">>}, recv_frame(Sock)),
    send(S, {6, <<"still here">>}),
    ?assertEqual({1, 1, <<"still here">>}, recv_frame(Sock)),
    ?assertMatch(#{ws_ignored := 3, ws_bad_frames := 0, streams_open := 1}, stats(S)),
    gen_tcp:close(Sock).

close_handshake(S) ->
    Sock = open(S, 7),
    ok = gen_tcp:send(Sock, frame(8, <<1000:16, "bye">>)),
    expect_close(Sock, 1000),
    Sock2 = open(S, 7),
    ok = gen_tcp:send(Sock2, frame(8, <<>>)),
    ?assertEqual({1, 8, <<>>}, recv_frame(Sock2)),
    ?assertEqual({error, closed}, gen_tcp:recv(Sock2, 0, ?T)),
    wait_stat(S, client_closed, fun(V) -> V =:= 2 end, ?T),
    ?assertMatch(#{streams_open := 0, ws_bad_frames := 0}, stats(S)).

protocol_errors(S) ->
    Cases = [{1002, frame(1, <<"unmasked">>, #{mask => false})},
             {1002, frame(9, <<"fragmented ping">>, #{fin => 0})},
             {1002, frame(9, binary:copy(<<"p">>, 126))},
             {1002, frame(1, <<"reserved bit">>, #{rsv => 4})},
             {1002, frame(3, <<"reserved opcode">>)},
             {1002, frame(11, <<"reserved control opcode">>)},
             {1002, frame(0, <<"continuation of nothing">>)},
             {1002, [frame(1, <<"a">>, #{fin => 0}), frame(1, <<"b">>)]},
             {1002, frame(8, <<1005:16>>)},
             {1002, frame(8, <<1>>)},
             {1009, frame(2, binary:copy(<<"x">>, 5000))},
             {1009, [frame(2, binary:copy(<<"x">>, 3000), #{fin => 0}),
                     frame(0, binary:copy(<<"x">>, 3000))]},
             {1007, frame(1, <<"caf", 16#e9, "!">>)},
             {1007, frame(1, <<"caf", 16#c3>>)},
             {1007, frame(8, <<1000:16, 255>>)}],
    [begin
         Sock = open(S, 8),
         ok = gen_tcp:send(Sock, Bytes),
         expect_close(Sock, Code)
     end || {Code, Bytes} <- Cases],
    wait_stat(S, ws_bad_frames, fun(V) -> V =:= length(Cases) end, ?T),
    wait_stat(S, streams_open, fun(V) -> V =:= 0 end, ?T).

dead(S) ->
    Self = self(),
    %% One client answers every ping (in its own process), one never does.
    Alive = spawn_link(fun() -> answer_pings(open(S, 9), Self, 0) end),
    Sock = open(S, 10),
    ?assertEqual({1, 9, <<>>}, recv_frame(Sock)),
    ?assertEqual({1, 9, <<>>}, recv_frame(Sock)),
    expect_close(Sock, 1001),
    ?assertMatch(#{ws_dead := 1}, stats(S)),
    %% The answering one has had as many pings, and is still served.
    receive {pinged, Alive, N} when N >= 3 -> ok after ?T -> erlang:error(no_third_ping) end,
    send(S, {9, <<"alive">>}),
    receive {message, Alive, <<"alive">>} -> ok after ?T -> erlang:error(alive_not_served) end,
    ?assertMatch(#{ws_dead := 1, streams_open := 1}, stats(S)),
    unlink(Alive),
    exit(Alive, kill).

mixed(S) ->
    Plain = open(S, 11),
    Meta = open_meta(S, "12"),
    C = open_stream(S, 13),
    send(S, {[11, 12, 13], <<"some">>}),
    ?assertEqual({1, 1, <<"some">>}, recv_frame(Plain)),
    {Epoch, 1, <<"some">>} = meta_frame(Meta),
    ?assertEqual(<<"some">>, expect_chunk(C, ?T)),
    send(S, {broadcast, <<"all">>}),
    ?assertEqual({1, 1, <<"all">>}, recv_frame(Plain)),
    ?assertEqual({Epoch, 2, <<"all">>}, meta_frame(Meta)),
    ?assertEqual(<<"all">>, expect_chunk(C, ?T)),
    %% Several connections per uid: each gets every message.
    Plain2 = open(S, 11),
    send(S, {11, <<"twice">>}),
    ?assertEqual({1, 1, <<"twice">>}, recv_frame(Plain)),
    ?assertEqual({1, 1, <<"twice">>}, recv_frame(Plain2)),
    send(S, {kick, 11}),
    expect_close(Plain, 4001),
    expect_close(Plain2, 4001),
    send(S, {kick, 12}),
    expect_close(Meta, 4001),
    close(C).

sigterm(S) ->
    Sock = open(S, 14),
    Meta = open_meta(S, "15"),
    httpdtest_os:signal(S, "TERM"),
    expect_close(Sock, 1012),
    expect_close(Meta, 1012),
    ?assertMatch({ok, 0, _}, httpdtest_os:wait_exit(S, ?T)).

%%% ---------------------------------------------------------------- helpers

answer_pings(Sock, Parent, N) ->
    case recv_frame(Sock) of
        {1, 9, P} ->
            ok = gen_tcp:send(Sock, frame(10, P)),
            Parent ! {pinged, self(), N + 1},
            answer_pings(Sock, Parent, N + 1);
        {1, 1, M} ->
            Parent ! {message, self(), M},
            answer_pings(Sock, Parent, N)
    end.

%% GET /ws/Path with Headers; the socket and the response head.
connect(S, Path, Headers) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S), [binary, {active, false}]),
    ok = gen_tcp:send(Sock, httpdtest_http:request_bytes("GET", "/ws/" ++ Path,
                                                          "HTTP/1.1", Headers)),
    {Head, Rest} = read_until(Sock, <<"\r\n\r\n">>, <<>>),
    put({buf, Sock}, Rest),
    {Sock, <<Head/binary, "\r\n">>}.

%% A refused handshake: its status and head.
refused(S, Path, Headers) ->
    {Sock, Head} = connect(S, Path, Headers),
    gen_tcp:close(Sock),
    <<"HTTP/1.1 ", Code:3/binary, _/binary>> = Head,
    {binary_to_integer(Code), Head}.

open(S, Uid) ->
    {Sock, Head} = connect(S, integer_to_list(Uid), ?UPGRADE ++ ["Sec-WebSocket-Key: " ?KEY]),
    ?assertMatch(<<"HTTP/1.1 101 ", _/binary>>, Head),
    Sock.

open_meta(S, Path) ->
    {Sock, Head} = connect(S, Path, ?UPGRADE ++ ["Sec-WebSocket-Key: " ?KEY,
                                                 "Sec-WebSocket-Protocol: ws+meta.httpdcnode"]),
    ?assertMatch(<<"HTTP/1.1 101 ", _/binary>>, Head),
    Sock.

%% A close frame with Code, then the end of the connection.
expect_close(Sock, Code) ->
    {1, 8, <<Got:16, _/binary>>} = recv_frame(Sock),
    ?assertEqual(Code, Got),
    ?assertEqual({error, closed}, gen_tcp:recv(Sock, 0, ?T)).
