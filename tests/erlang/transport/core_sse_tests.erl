%% SPDX-License-Identifier: Apache-2.0
%% GET /sse/N: Server-Sent Events with message ids, history, resume and
%% gaps, read on plain sockets so that every byte is checked.
-module(core_sse_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [send/2, stats/1, wait_stat/4, port_of/1]).
-import(httpdtest_http, [open_stream/2, expect_chunk/2, close/1]).
-import(httpdtest_raw, [read_event/1, read_until/3, sync/1]).

-define(T, 5000).

sse_test_() ->
    [httpdtest_server:server_test("head, retry advice, ids and data lines", #{}, 30,
                                  fun head_and_events/1),
     httpdtest_server:server_test("line breaks: \\n kept, \\r\\n and \\r arrive as \\n", #{},
                                  30, fun line_breaks/1),
     httpdtest_server:server_test("a payload that is not UTF-8: event: base64, its bytes "
                                  "intact, live and replayed", #{}, 30, fun not_utf8/1),
     httpdtest_server:server_test("resume after Last-Event-ID: what was sent meanwhile, "
                                  "once, in order, then live", #{}, 30, fun resume/1),
     httpdtest_server:server_test("history kept for an offline uid; ?since= on a first "
                                  "connect", #{}, 30, fun offline_and_since/1),
     httpdtest_server:server_test("history too short: a gap event, then what is kept",
                                  #{extra_args => ["--history", "2"]}, 30, fun gap/1),
     httpdtest_server:server_test("an id of another epoch (a restarted server): a gap", #{},
                                  30, fun other_epoch/1),
     httpdtest_server:server_test("--history 0: ids, no replay, a gap on resume",
                                  #{extra_args => ["--history", "0"]}, 30, fun no_history/1),
     httpdtest_server:server_test("heartbeat comments", #{extra_args => ["--heartbeat", "1"]},
                                  30, fun heartbeat/1),
     httpdtest_server:server_test("multicast and broadcast reach SSE and chunked streams; "
                                  "kick ends an SSE stream", #{}, 30, fun mixed/1),
     httpdtest_server:server_test("SIGTERM closes SSE streams after an end event (drain), exit 0", #{}, 30,
                                  fun sigterm/1)].

%%% ---------------------------------------------------------------- cases

head_and_events(S) ->
    {Sock, Head} = connect(S, 5, []),
    ?assertMatch(<<"HTTP/1.1 200 OK\r\n", _/binary>>, Head),
    ?assertNotEqual(nomatch, binary:match(Head, <<"Content-Type: text/event-stream">>)),
    ?assertNotEqual(nomatch, binary:match(Head, <<"Cache-Control: no-cache">>)),
    ?assertNotEqual(nomatch, binary:match(Head, <<"X-Accel-Buffering: no">>)),
    %% The retry advice is drawn per stream, in [1000, 5000] ms.
    <<"retry: ", Retry/binary>> = read_event(Sock),
    RetryMs = binary_to_integer(string:trim(Retry)),
    ?assert(RetryMs >= 1000 andalso RetryMs =< 5000),
    send(S, {5, <<"hello">>}),
    send(S, {5, <<"two\nlines">>}),
    {Epoch, 1, [<<"hello">>]} = parse(read_event(Sock)),
    ?assertMatch({Epoch, 2, [<<"two">>, <<"lines">>]}, parse(read_event(Sock))),
    ?assertEqual(8, byte_size(Epoch)),
    gen_tcp:close(Sock).

line_breaks(S) ->
    {Sock, _} = connect(S, 6, []),
    <<"retry: ", _/binary>> = read_event(Sock),
    send(S, {6, <<"a\r\nb\rc\n\nd">>}),
    ?assertMatch({_, 1, [<<"a">>, <<"b">>, <<"c">>, <<>>, <<"d">>]}, parse(read_event(Sock))),
    gen_tcp:close(Sock).

%% text/event-stream is UTF-8 only: such a payload goes base64, with its id.
not_utf8(S) ->
    {Sock, _} = connect(S, 16, []),
    <<"retry: ", _/binary>> = read_event(Sock),
    Bin = <<255, 254, 0, 1>>,
    Bin2 = <<"\n", 200, "\r">>,             % line breaks around a stray byte
    send(S, {16, Bin}),
    <<"id: ", Epoch:8/binary, ":1\n", Rest/binary>> = read_event(Sock),
    ?assertEqual(<<"event: base64\ndata: //4AAQ==\n\n">>, Rest),
    send(S, {16, Bin2}),
    send(S, {16, <<"caf", 16#c3, 16#a9>>}),   % UTF-8: data: lines as before
    ?assertEqual({Bin2, 2}, base64_event(Epoch, read_event(Sock))),
    ?assertEqual({Epoch, 3, [<<"caf", 16#c3, 16#a9>>]}, parse(read_event(Sock))),
    gen_tcp:close(Sock),
    %% The replay of history frames them alike.
    {Sock2, _} = connect(S, 16, ["Last-Event-ID: " ++ binary_to_list(Epoch) ++ ":0"]),
    <<"retry: ", _/binary>> = read_event(Sock2),
    ?assertEqual({Bin, 1}, base64_event(Epoch, read_event(Sock2))),
    ?assertEqual({Bin2, 2}, base64_event(Epoch, read_event(Sock2))),
    ?assertEqual({Epoch, 3, [<<"caf", 16#c3, 16#a9>>]}, parse(read_event(Sock2))),
    gen_tcp:close(Sock2).

%% {Payload, Seq} of "id: E:S\nevent: base64\ndata: B64\n\n".
base64_event(Epoch, Event) ->
    [<<"id: ", Epoch:8/binary, ":", Seq/binary>>, <<"event: base64">>, <<"data: ", B64/binary>>] =
        binary:split(Event, <<"\n">>, [global, trim_all]),
    {base64:decode(B64), binary_to_integer(Seq)}.

resume(S) ->
    {Sock, _} = connect(S, 7, []),
    <<"retry: ", _/binary>> = read_event(Sock),
    send(S, {7, <<"m1">>}),
    {Epoch, 1, _} = parse(read_event(Sock)),
    gen_tcp:close(Sock),
    wait_stat(S, streams_open, fun(V) -> V =:= 0 end, ?T),
    [send(S, {7, <<"m", (integer_to_binary(I))/binary>>}) || I <- lists:seq(2, 5)],
    sync(S),
    {Sock2, _} = connect(S, 7, ["Last-Event-ID: " ++ binary_to_list(Epoch) ++ ":1"]),
    <<"retry: ", _/binary>> = read_event(Sock2),
    [?assertEqual({Epoch, I, [<<"m", (integer_to_binary(I))/binary>>]}, parse(read_event(Sock2)))
     || I <- lists:seq(2, 5)],
    send(S, {7, <<"m6">>}),
    ?assertEqual({Epoch, 6, [<<"m6">>]}, parse(read_event(Sock2))),
    gen_tcp:close(Sock2).

offline_and_since(S) ->
    [send(S, {8, <<"m", (integer_to_binary(I))/binary>>}) || I <- lists:seq(1, 3)],
    sync(S),
    %% A first connect without an id: live messages only.
    {Sock, _} = connect(S, 8, []),
    <<"retry: ", _/binary>> = read_event(Sock),
    send(S, {8, <<"m4">>}),
    {Epoch, 4, [<<"m4">>]} = parse(read_event(Sock)),
    gen_tcp:close(Sock),
    %% ?since= when the client cannot set headers (URL-decoded: %3A is ':').
    {Sock2, _} = connect(S, "8?since=" ++ binary_to_list(Epoch) ++ "%3A1", []),
    <<"retry: ", _/binary>> = read_event(Sock2),
    ?assertEqual({Epoch, 2, [<<"m2">>]}, parse(read_event(Sock2))),
    ?assertEqual({Epoch, 3, [<<"m3">>]}, parse(read_event(Sock2))),
    ?assertEqual({Epoch, 4, [<<"m4">>]}, parse(read_event(Sock2))),
    gen_tcp:close(Sock2).

gap(S) ->
    {Sock, _} = connect(S, 9, []),
    <<"retry: ", _/binary>> = read_event(Sock),
    send(S, {9, <<"m1">>}),
    {Epoch, 1, _} = parse(read_event(Sock)),
    gen_tcp:close(Sock),
    [send(S, {9, <<"m", (integer_to_binary(I))/binary>>}) || I <- lists:seq(2, 6)],
    sync(S),
    {Sock2, _} = connect(S, 9, ["Last-Event-ID: " ++ binary_to_list(Epoch) ++ ":1"]),
    <<"retry: ", _/binary>> = read_event(Sock2),
    %% The gap's id is the one to come back with: just before the first kept.
    Gap = iolist_to_binary(["id: ", Epoch, ":4\nevent: gap\ndata: {\"last\":\"", Epoch,
                            ":1\",\"first\":\"", Epoch, ":5\",\"next\":\"", Epoch, ":4\"}\n\n"]),
    ?assertEqual(Gap, read_event(Sock2)),
    ?assertEqual({Epoch, 5, [<<"m5">>]}, parse(read_event(Sock2))),
    ?assertEqual({Epoch, 6, [<<"m6">>]}, parse(read_event(Sock2))),
    gen_tcp:close(Sock2).

other_epoch(S) ->
    send(S, {10, <<"kept">>}),
    sync(S),
    {Sock, _} = connect(S, 10, ["Last-Event-ID: 0000000g:3"]),    % not even an id
    <<"retry: ", _/binary>> = read_event(Sock),
    GapEvent = read_event(Sock),
    ?assertMatch({_, _}, binary:match(GapEvent, <<"\nevent: gap\ndata: {\"last\":null,\"first\":\"">>)),
    ?assertMatch({_, 1, [<<"kept">>]}, parse(read_event(Sock))),
    gen_tcp:close(Sock).

no_history(S) ->
    send(S, {11, <<"gone">>}),
    sync(S),
    {Sock, _} = connect(S, 11, []),
    <<"retry: ", _/binary>> = read_event(Sock),
    send(S, {11, <<"live">>}),
    {Epoch, 2, [<<"live">>]} = parse(read_event(Sock)),
    gen_tcp:close(Sock),
    {Sock2, _} = connect(S, 11, ["Last-Event-ID: " ++ binary_to_list(Epoch) ++ ":1"]),
    <<"retry: ", _/binary>> = read_event(Sock2),
    %% Nothing kept: the gap's id is the newest, so that coming back with it
    %% is no gap again.
    ?assertEqual(iolist_to_binary(["id: ", Epoch, ":2\nevent: gap\ndata: {\"last\":\"", Epoch,
                                   ":1\",\"first\":null,\"next\":\"", Epoch, ":2\"}\n\n"]),
                 read_event(Sock2)),
    gen_tcp:close(Sock2).

heartbeat(S) ->
    {Sock, _} = connect(S, 12, []),
    <<"retry: ", _/binary>> = read_event(Sock),
    ?assertEqual(<<":\n\n">>, read_event(Sock)),
    gen_tcp:close(Sock).

mixed(S) ->
    {Sock, _} = connect(S, 13, []),
    <<"retry: ", _/binary>> = read_event(Sock),
    C = open_stream(S, 14),
    send(S, {[13, 14], <<"both">>}),
    ?assertMatch({_, 1, [<<"both">>]}, parse(read_event(Sock))),
    ?assertEqual(<<"both">>, expect_chunk(C, ?T)),
    send(S, {broadcast, <<"all">>}),
    ?assertMatch({_, 2, [<<"all">>]}, parse(read_event(Sock))),
    ?assertEqual(<<"all">>, expect_chunk(C, ?T)),
    send(S, {kick, 13}),
    ?assertEqual(<<"event: end\ndata: {\"reason\":\"kicked\"}\n\n">>, read_event(Sock)),
    ?assertEqual({error, closed}, gen_tcp:recv(Sock, 0, ?T)),
    close(C).

sigterm(S) ->
    {Sock, _} = connect(S, 15, []),
    <<"retry: ", _/binary>> = read_event(Sock),
    httpdtest_os:signal(S, "TERM"),
    ?assertEqual(<<"event: end\ndata: {\"reason\":\"drain\"}\n\n">>, read_event(Sock)),
    ?assertEqual({error, closed}, gen_tcp:recv(Sock, 0, ?T)),
    ?assertMatch({ok, 0, _}, httpdtest_os:wait_exit(S, ?T)).

%%% ---------------------------------------------------------------- helpers

%% GET /sse/Path with Headers; returns the socket and the response head.
connect(S, Uid, Headers) when is_integer(Uid) -> connect(S, integer_to_list(Uid), Headers);
connect(S, Path, Headers) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S), [binary, {active, false}]),
    ok = gen_tcp:send(Sock, httpdtest_http:request_bytes("GET", "/sse/" ++ Path,
                                                          "HTTP/1.1", Headers)),
    {Head, Rest} = read_until(Sock, <<"\r\n\r\n">>, <<>>),
    put({buf, Sock}, Rest),
    {Sock, Head}.

%% {Epoch, Seq, DataLines} of "id: E:S\ndata: ...\n...\n\n".
parse(Event) ->
    [<<"id: ", Id/binary>> | Rest] = binary:split(Event, <<"\n">>, [global, trim_all]),
    [Epoch, Seq] = binary:split(Id, <<":">>),
    {Epoch, binary_to_integer(Seq), [D || <<"data: ", D/binary>> <- Rest] ++
         [<<>> || <<"data:">> <- Rest]}.
