%% SPDX-License-Identifier: Apache-2.0
%% The HTTP requests the server refuses, each a test, on one server
%% started with --max-users 1000.
-module(core_http_errors_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_http, [open/2, open/3, open_stream/2, close/1, expect_head/2, expect_chunk/2,
                         next_event/2, request_bytes/3, request_bytes/4, http_request/2]).
-import(httpdtest_server, [send/2, stats/1, port_of/1]).
-import(httpdtest_wait, [summarize/1]).

-define(T, 5000).
-define(MAX, 1000).
-define(NOT_FOUND, <<"User id not found, try /test/123 instead">>).

http_errors_test_() ->
    {setup,
     fun() -> httpdtest_server:start_server(#{max_users => ?MAX}) end,
     fun httpdtest_server:stop_server/1,
     fun(S) ->
             [case_test("GET " ++ P ++ " -> 404 user id not found", S,
                        fun() -> not_found(S, P) end)
              || P <- ["/test/12abc", "/test/-3", "/test/0", "/test/", "/test",
                       "/test/99999999999999999999", "/test/+5"]]
                 ++ [case_test("GET /test/1001 -> 503 Max uid allowed is 1000", S,
                               fun() -> too_big(S) end),
                     case_test("GET /test/1000 -> 200 (the largest uid)", S,
                               fun() -> largest(S) end),
                     case_test("GET /other -> 404", S, fun() -> other_path(S, "/other") end),
                     case_test("GET /index.html -> 404 (GET / is the demo page)", S,
                               fun() -> other_path(S, "/index.html") end)]
                 ++ [case_test(M ++ " /test/5 -> 405", S, fun() -> bad_method(S, M) end)
                     || M <- ["POST", "PUT", "DELETE"]]
                 ++ [case_test("HEAD /test/5 -> 200 without body", S, fun() -> head(S) end),
                     case_test("curl sees the same answers and the decoded stream", S,
                               fun() -> curl(S) end),
                     case_test("the refusals are counted in /stats", S,
                               fun() -> counted(S) end)]
     end}.

case_test(Label, S, Fun) ->
    {Label, {timeout, 20, fun() -> httpdtest_server:logged(S, fun(_) -> Fun() end) end}}.

get_close(Path) -> request_bytes("GET", Path, "HTTP/1.1", ["Connection: close"]).

not_found(S, Path) ->
    R = http_request(port_of(S), get_close(Path)),
    ?assertMatch({Path, 404}, {Path, maps:get(status, R)}),
    ?assertEqual({Path, ?NOT_FOUND}, {Path, maps:get(body, R)}).

too_big(S) ->
    R = http_request(port_of(S), get_close("/test/1001")),
    ?assertEqual(503, maps:get(status, R)),
    ?assertEqual(<<"Max uid allowed is 1000">>, maps:get(body, R)).

largest(S) ->
    C = open_stream(S, ?MAX),
    send(S, {?MAX, <<"hi">>}),
    ?assertEqual(<<"hi">>, expect_chunk(C, ?T)),
    close(C).

other_path(S, Path) ->
    R = http_request(port_of(S), get_close(Path)),
    ?assertEqual({Path, 404}, {Path, maps:get(status, R)}).

bad_method(S, M) ->
    R = http_request(port_of(S), request_bytes(M, "/test/5", "HTTP/1.1",
                                               ["Connection: close", "Content-Length: 0"])),
    ?assertEqual({M, 405}, {M, maps:get(status, R)}).

%% HEAD: the head of a 200, and not one body byte, even when a message
%% for the uid goes out meanwhile (a GET stream of the same uid shows when).
head(S) ->
    H = open(port_of(S), request_bytes("HEAD", "/test/5", "HTTP/1.1", ["Connection: close"]),
             #{head => true}),
    ?assertMatch(#{status := 200}, expect_head(H, ?T)),
    G = open_stream(S, 5),
    send(S, {5, <<"probe">>}),
    ?assertEqual(<<"probe">>, expect_chunk(G, ?T)),
    case next_event(H, 1000) of
        closed -> ok;
        timeout -> ok;
        Other -> ?assertEqual(no_body_bytes, summarize(Other))
    end,
    close(H),
    close(G).

counted(S) ->
    St0 = stats(S),
    _ = http_request(port_of(S), get_close("/test/0")),
    _ = http_request(port_of(S), get_close("/nothing")),
    _ = http_request(port_of(S), get_close("/test/5000")),
    _ = http_request(port_of(S), request_bytes("DELETE", "/test/5", "HTTP/1.1",
                                               ["Connection: close"])),
    St1 = stats(S),
    D = fun(K) -> {K, maps:get(K, St1) - maps:get(K, St0)} end,
    ?assertEqual({http_not_found, 2}, D(http_not_found)),
    ?assertEqual({http_too_big, 1}, D(http_too_big)),
    ?assertEqual({http_bad_method, 1}, D(http_bad_method)),
    ?assertEqual({streams_open, 0}, {streams_open, maps:get(streams_open, St1)}).

%% Another client as a cross-check: curl decodes the chunked stream.
curl(S) ->
    Base = "http://127.0.0.1:" ++ integer_to_list(port_of(S)),
    Code = fun(Path) ->
                   os:cmd("curl -s -o /dev/null -w '%{http_code}' --max-time 5 '"
                          ++ Base ++ Path ++ "'")
           end,
    ?assertEqual("404", Code("/test/0")),
    ?assertEqual("503", Code("/test/1001")),
    ?assertEqual("405", os:cmd("curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST '"
                               ++ Base ++ "/test/5'")),
    ?assertEqual("User id not found, try /test/123 instead",
                 os:cmd("curl -s --max-time 5 '" ++ Base ++ "/test/abc'")),
    %% the stream stays open: curl gives up after a second, having printed
    %% the welcome, decoded
    ?assertEqual("Welcome, Url: '/test/9' Id: 9\n",
                 os:cmd("curl -sN --max-time 1 '" ++ Base ++ "/test/9'")).
