%% SPDX-License-Identifier: Apache-2.0
%% GET /poll/N: long-poll with ids, resume from since=, gaps and the
%% timeout; and the cross-origin rules (CORS) of the web transports.
-module(core_poll_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [send/2, port_of/1, wait_stat/4]).
-import(httpdtest_http, [http_request/2, request_bytes/4, header/2]).
-import(httpdtest_json, [json_decode/1]).
-import(httpdtest_raw, [read_until/3, poll_raw/2, spawn_poll/2, sync/1]).

-define(T, 5000).

poll_test_() ->
    [httpdtest_server:server_test("a poll waits for the next message, then polls resume "
                                  "from its id, exactly once and in order", #{}, 30,
                                  fun wait_and_resume/1),
     httpdtest_server:server_test("history too short or another epoch: gap true",
                                  #{extra_args => ["--history", "2"]}, 30, fun gap/1),
     httpdtest_server:server_test("nothing new before --poll-timeout: an empty answer",
                                  #{extra_args => ["--poll-timeout", "1"]}, 30,
                                  fun timeout/1),
     httpdtest_server:server_test("kick and SIGTERM end a waiting poll with \"ended\":\"kicked\" and \"drain\"",
                                  #{}, 30, fun ended/1),
     httpdtest_server:server_test("binary payloads come as data_base64; text is escaped",
                                  #{}, 30, fun payloads/1),
     httpdtest_server:server_test("no cross-origin reads without --allow-origin, but plain "
                                  "EventSource", #{}, 30, fun cors_default/1),
     httpdtest_server:server_test("--allow-origin: that origin, with credentials, and "
                                  "preflights", #{extra_args => ["--allow-origin",
                                                                 "http://app.example:8080"]},
                                  30, fun cors_listed/1)].

%%% ---------------------------------------------------------------- cases

wait_and_resume(S) ->
    Poller = spawn_poll(S, "/poll/5"),
    wait_stat(S, streams_open, fun(V) -> V =:= 1 end, ?T),
    send(S, {5, <<"m1">>}),
    send(S, {5, <<"m2">>}),
    #{<<"messages">> := [#{<<"id">> := Id1, <<"data">> := <<"m1">>}], <<"gap">> := false} =
        answer(Poller),
    %% m2 waited in the history: the next poll gets it at once.
    #{<<"messages">> := [#{<<"id">> := Id2, <<"data">> := <<"m2">>}], <<"gap">> := false} =
        poll(S, "/poll/5?since=" ++ binary_to_list(Id1)),
    [Epoch, <<"1">>] = binary:split(Id1, <<":">>),
    ?assertEqual(<<Epoch/binary, ":2">>, Id2),
    %% Several at once, in order; since= URL-encoded too.
    [send(S, {5, <<"m", (integer_to_binary(I))/binary>>}) || I <- lists:seq(3, 5)],
    sync(S),
    #{<<"messages">> := Ms} = poll(S, "/poll/5?since=" ++ binary_to_list(Epoch) ++ "%3A2"),
    ?assertEqual([<<"m3">>, <<"m4">>, <<"m5">>], [D || #{<<"data">> := D} <- Ms]),
    wait_stat(S, streams_open, fun(V) -> V =:= 0 end, ?T).

gap(S) ->
    [send(S, {6, <<"m", (integer_to_binary(I))/binary>>}) || I <- lists:seq(1, 5)],
    sync(S),
    %% An id of another epoch: a gap, and all that is kept.
    #{<<"messages">> := [_, #{<<"id">> := Id5}], <<"gap">> := true} =
        poll(S, "/poll/6?since=00000000:0"),
    [Epoch, <<"5">>] = binary:split(Id5, <<":">>),
    #{<<"messages">> := Ms, <<"gap">> := true, <<"first">> := First} =
        poll(S, "/poll/6?since=" ++ binary_to_list(Epoch) ++ ":1"),
    ?assertEqual(<<Epoch/binary, ":4">>, First),
    ?assertEqual([<<"m4">>, <<"m5">>], [D || #{<<"data">> := D} <- Ms]).

timeout(S) ->
    T0 = erlang:monotonic_time(millisecond),
    ?assertMatch(#{<<"messages">> := [], <<"gap">> := false, <<"next">> := <<_:8/binary, ":0">>},
                 poll(S, "/poll/7")),
    ?assert(erlang:monotonic_time(millisecond) - T0 >= 900).

ended(S) ->
    Kicked = spawn_poll(S, "/poll/12"),
    wait_stat(S, streams_open, fun(V) -> V =:= 1 end, ?T),
    send(S, {kick, 12}),
    ?assertEqual(#{<<"messages">> => [], <<"gap">> => false, <<"ended">> => <<"kicked">>},
                 answer(Kicked)),
    Waiting = spawn_poll(S, "/poll/13"),
    wait_stat(S, streams_open, fun(V) -> V =:= 1 end, ?T),
    httpdtest_os:signal(S, "TERM"),
    ?assertEqual(#{<<"messages">> => [], <<"gap">> => false, <<"ended">> => <<"drain">>},
                 answer(Waiting)),
    ?assertMatch({ok, 0, _}, httpdtest_os:wait_exit(S, ?T)).

payloads(S) ->
    Poller = spawn_poll(S, "/poll/8"),
    wait_stat(S, streams_open, fun(V) -> V =:= 1 end, ?T),
    send(S, {8, <<255, 0, 1>>}),
    #{<<"messages">> := [#{<<"data_base64">> := B64}]} = answer(Poller),
    ?assertEqual(<<255, 0, 1>>, base64:decode(B64)),
    Text = <<"quote \" backslash \\ newline \n tab \t é"/utf8>>,
    send(S, {8, Text}),
    sync(S),
    #{<<"messages">> := [_, #{<<"data">> := Got}]} = poll(S, "/poll/8?since=00000000:0"),
    ?assertEqual(Text, Got).

cors_default(S) ->
    Origin = "Origin: http://elsewhere.example",
    R = http_request(port_of(S), request_bytes("GET", "/poll/9?since=00000000:0", "HTTP/1.1",
                                               [Origin, "Connection: close"])),
    ?assertEqual(undefined, header(maps:get(headers, R), <<"access-control-allow-origin">>)),
    Head = raw_head(S, "/sse/9", [Origin]),
    ?assertNotEqual(nomatch, binary:match(Head, <<"Access-Control-Allow-Origin: *\r\n">>)),
    ?assertEqual(nomatch, binary:match(Head, <<"Credentials">>)),
    P = http_request(port_of(S), request_bytes("OPTIONS", "/sse/9", "HTTP/1.1",
                                               [Origin, "Connection: close"])),
    ?assertEqual(403, maps:get(status, P)).

cors_listed(S) ->
    Ok = "Origin: http://app.example:8080",
    R = http_request(port_of(S), request_bytes("GET", "/poll/10?since=00000000:0", "HTTP/1.1",
                                               [Ok, "Connection: close"])),
    H = maps:get(headers, R),
    ?assertEqual(<<"http://app.example:8080">>, header(H, <<"access-control-allow-origin">>)),
    ?assertEqual(<<"true">>, header(H, <<"access-control-allow-credentials">>)),
    Head = raw_head(S, "/sse/10", [Ok]),
    ?assertNotEqual(nomatch, binary:match(Head, <<"Access-Control-Allow-Origin: "
                                                  "http://app.example:8080\r\n">>)),
    ?assertEqual(nomatch, raw_head_match(S, "/sse/10", ["Origin: http://other.example"],
                                         <<"Access-Control-Allow-Origin">>)),
    P = http_request(port_of(S), request_bytes("OPTIONS", "/sse/10", "HTTP/1.1",
                                               [Ok, "Access-Control-Request-Headers: last-event-id",
                                                "Connection: close"])),
    ?assertEqual(204, maps:get(status, P)),
    PH = maps:get(headers, P),
    ?assertEqual(<<"http://app.example:8080">>, header(PH, <<"access-control-allow-origin">>)),
    ?assertNotEqual(nomatch, binary:match(header(PH, <<"access-control-allow-headers">>),
                                          <<"Last-Event-ID">>)),
    Bad = http_request(port_of(S), request_bytes("OPTIONS", "/poll/10", "HTTP/1.1",
                                                 ["Origin: http://other.example",
                                                  "Connection: close"])),
    ?assertEqual(403, maps:get(status, Bad)).

%%% ---------------------------------------------------------------- helpers

%% A poll answered at once (through evhttp): its JSON.
poll(S, Path) -> element(2, poll_raw(S, Path)).

answer(Poller) ->
    receive {poll_answer, Poller, Bytes} ->
            [Head, Body] = binary:split(Bytes, <<"\r\n\r\n">>),
            ?assertMatch(<<"HTTP/1.1 200 OK\r\n", _/binary>>, Head),
            json_decode(Body)
    after ?T -> erlang:error(no_poll_answer)
    end.

raw_head(S, Path, Headers) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S), [binary, {active, false}]),
    ok = gen_tcp:send(Sock, request_bytes("GET", Path, "HTTP/1.1", Headers)),
    {Head, _} = read_until(Sock, <<"\r\n\r\n">>, <<>>),
    gen_tcp:close(Sock),
    Head.

raw_head_match(S, Path, Headers, What) -> binary:match(raw_head(S, Path, Headers), What).
