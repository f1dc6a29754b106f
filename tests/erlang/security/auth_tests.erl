%% SPDX-License-Identifier: Apache-2.0
%% Subscriber tokens against the real binary: one server started with
%% --auth-secret-file for the token cases, one without for the eviction
%% attack in open mode, and bad command lines.
%% Signatures of the older form are made here with crypto:mac directly, and
%% once each by httpdcnode:token/2, httpdcnode:token_url/3 and `openssl dgst
%% -hmac`; JWTs by the application (httpdcnode_token:jwt/2,3 and sign_jwt/2),
%% those no application makes (alg none, HS512) here.
-module(auth_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_http, [open/2, open/3, close/1, expect_head/2, expect_chunk/2, expect_end/2,
                         next_event/2, request_bytes/4, http_request/2, welcome/1, header/2]).
-import(httpdtest_server, [send/2, stats/1, port_of/1, wait_stat/4]).
-import(httpdtest_wait, [wait_until/3, summarize/1]).

-define(T, 5000).
-define(MAX_CONNS, 2).
-define(EXPIRED, <<"Token expired: get a fresh one">>).
-define(FORGED, <<"Token signature does not match">>).
-define(OTHER_UID, <<"Token is for another uid">>).
-define(PAIR, <<"Malformed token: exp and sig go together, once each">>).
-define(BAD_EXP, <<"Malformed token: exp must be Unix seconds in plain decimal">>).
-define(BAD_SIG, <<"Malformed token: sig must be 64 hex digits (HMAC-SHA256)">>).
-define(BAD_BEARER, <<"Malformed token: expected Authorization: Bearer JWT (or UID.EXP.HMAC)">>).
-define(MISSING, <<"No token: add token=JWT (or exp=EXP&sig=HMAC) to the query, "
                   "or send Authorization: Bearer JWT">>).
-define(NOT_YET, <<"Token not valid yet (its nbf is later): check the clocks">>).
-define(ALG, <<"Token algorithm must be HS256">>).
-define(JWT_SHAPE, <<"Malformed token: a JWT is three base64url parts joined by dots">>).
-define(JWT_HEADER, <<"Malformed token: the JWT header is not a JSON object">>).
-define(JWT_LONG, <<"Malformed token: a JWT has at most 4096 characters">>).
-define(JWT_SUB, <<"Malformed token: sub must be the uid as a decimal string">>).

%%% ---------------------------------------------------------------- fixtures

tokens_test_() ->
    {setup, fun start_auth_server/0, fun stop_auth_server/1,
     fun(Ctx) ->
             [case_test(Label, Ctx, Fun) || {Label, Fun} <- cases()]
     end}.

cases() ->
    [{"a valid token in the query opens the stream", fun valid_query/1},
     {"a valid token in Authorization: Bearer opens the stream", fun valid_header/1},
     {"upper-case hex is accepted", fun upper_case/1},
     {"an expired token: 403, auth_expired", fun expired/1},
     {"a forged token: 403, auth_bad", fun forged/1},
     {"a token for uid 5 opens neither 50 nor 55 nor 6", fun wrong_uid/1},
     {"no token: 403, auth_missing", fun missing/1},
     {"a malformed token: 403, auth_bad", fun malformed/1},
     {"the Authorization header wins over the query", fun header_wins/1},
     {"HEAD needs a token too", fun head/1},
     {"streams opened with a 2-s token (SSE, WebSocket, a waiting poll, /test/N) end with "
      "the expired ending within a second of exp; one with a later token stays; a "
      "reconnect needs a fresh token", fun expires/1},
     {"httpdcnode:token/2 and token_url/3 make tokens the server takes", fun erlang_token/1},
     {"the openssl dgst one-liner of the README makes a valid token", fun openssl_token/1},
     {"the counters, in /stats and in the Erlang stats map", fun counters/1},
     {"GET /sse/N needs a token too; with one it streams, with since= as well",
      fun sse_token/1},
     {"GET /poll/N needs a token too", fun poll_token/1},
     {"GET /ws/N needs a token too", fun ws_token/1},
     {"eviction attack with tokens: the attacker gets 403, the victim keeps receiving",
      fun attack_with_tokens/1},
     {"JWTs of httpdcnode_token:jwt/2 open /test, /sse, /poll and /ws, as token= and as "
      "Authorization: Bearer", fun jwt_every_transport/1},
     {"JWT refusals on every transport: expired, nbf later, forged, another uid's, alg none, "
      "HS512, too long: 403 with the reason, counted", fun jwt_refused/1},
     {"a JWT and a token of the older form on one request: the header's wins",
      fun jwt_header_wins/1}].

case_test(Label, Ctx = #{s := S}, Fun) ->
    {Label, {timeout, 30, fun() -> httpdtest_server:logged(S, fun(_) -> Fun(Ctx) end) end}}.

start_auth_server() ->
    Secret = list_to_binary(hex(crypto:strong_rand_bytes(24))),
    File = secret_file(<<Secret/binary, "\n">>, 8#600),
    S = httpdtest_server:start_server(#{max_conns_per_uid => ?MAX_CONNS, max_users => 1000,
                                        extra_args => ["--auth-secret-file", File]}),
    #{s => S, secret => Secret, file => File}.

stop_auth_server(#{s := S, file := File}) ->
    httpdtest_server:stop_server(S),
    file:delete(File).

secret_file(Bytes, Mode) ->
    File = filename:join([httpdtest_os:repo_root(), "build", "tests", "auth",
                          httpdtest_os:unique("secret")]),
    ok = filelib:ensure_dir(File),
    ok = file:write_file(File, Bytes),
    ok = file:change_mode(File, Mode),
    File.

%%% ---------------------------------------------------------------- helpers

now_s() -> erlang:system_time(second).

hex(Bin) -> [hex_digit(N) || <<N:4>> <= Bin].
hex_digit(N) when N < 10 -> $0 + N;
hex_digit(N) -> $a + N - 10.

%% Lowercase hex of HMAC-SHA256(Secret, "Uid:Exp"), made here.
sig(Secret, Uid, Exp) ->
    hex(crypto:mac(hmac, sha256, Secret, [integer_to_list(Uid), ":", integer_to_list(Exp)])).

query(Secret, Uid, Exp) ->
    "exp=" ++ integer_to_list(Exp) ++ "&sig=" ++ sig(Secret, Uid, Exp).

bearer(Secret, Uid, Exp) ->
    "Authorization: Bearer " ++ integer_to_list(Uid) ++ "." ++ integer_to_list(Exp) ++ "."
        ++ sig(Secret, Uid, Exp).

path(Uid) -> "/test/" ++ integer_to_list(Uid).
path(Uid, "") -> path(Uid);
path(Uid, Query) -> path(Uid) ++ "?" ++ Query.

%% GET (or Method) Path with Headers: the stream, checked up to its welcome.
open_ok(S, Uid, Path, Headers) ->
    C = open(port_of(S), request_bytes("GET", Path, "HTTP/1.1", Headers)),
    case expect_head(C, ?T) of
        #{status := 200} -> ok;
        Other -> erlang:error({not_200, Path, Headers, summarize(Other), body(C)})
    end,
    ?assertEqual(welcome(Uid), expect_chunk(C, ?T)),
    C.

body(C) ->
    case next_event(C, 1000) of
        {body, B} -> B;
        Other -> Other
    end.

%% The stream opens and a message sent to Uid reaches it.
opens(S, Uid, Path, Headers) ->
    C = open_ok(S, Uid, Path, Headers),
    Msg = iolist_to_binary(["for ", integer_to_list(Uid)]),
    send(S, {Uid, Msg}),
    ?assertEqual(Msg, expect_chunk(C, ?T)),
    close(C).

%% A 403 whose body is Reason, and nothing opened.
refused(S, Method, Path, Headers, Reason) ->
    R = http_request(port_of(S), request_bytes(Method, Path, "HTTP/1.1",
                                               ["Connection: close" | Headers])),
    ?assertEqual({Path, Headers, 403}, {Path, Headers, maps:get(status, R)}),
    ?assertEqual({Path, Headers, <<"text/plain; charset=utf-8">>},
                 {Path, Headers, header(maps:get(headers, R), <<"content-type">>)}),
    case Method of
        "HEAD" -> ok;
        _ -> ?assertEqual({Path, Headers, Reason}, {Path, Headers, maps:get(body, R)})
    end.

refused(S, Path, Headers, Reason) -> refused(S, "GET", Path, Headers, Reason).

%% Runs Fun and returns how much each auth counter moved.
deltas(S, Fun) ->
    St0 = stats(S),
    Fun(),
    St1 = stats(S),
    maps:from_list([{K, maps:get(K, St1) - maps:get(K, St0)}
                    || K <- [auth_missing, auth_expired, auth_bad, streams_total]]).

%%% ---------------------------------------------------------------- cases

valid_query(#{s := S, secret := K}) ->
    Exp = now_s() + 60,
    D = deltas(S, fun() -> opens(S, 7, path(7, query(K, 7, Exp)), []) end),
    ?assertEqual(#{auth_missing => 0, auth_expired => 0, auth_bad => 0, streams_total => 1}, D),
    %% other parameters are allowed and ignored, before and after
    opens(S, 7, path(7, "nocache=123&" ++ query(K, 7, Exp) ++ "&lang=fr"), []).

valid_header(#{s := S, secret := K}) ->
    D = deltas(S, fun() -> opens(S, 8, path(8), [bearer(K, 8, now_s() + 60)]) end),
    ?assertEqual(#{auth_missing => 0, auth_expired => 0, auth_bad => 0, streams_total => 1}, D).

upper_case(#{s := S, secret := K}) ->
    Exp = now_s() + 60,
    Up = string:uppercase(sig(K, 9, Exp)),
    opens(S, 9, path(9, "exp=" ++ integer_to_list(Exp) ++ "&sig=" ++ Up), []),
    opens(S, 9, path(9), ["Authorization: Bearer 9." ++ integer_to_list(Exp) ++ "." ++ Up]).

expired(#{s := S, secret := K}) ->
    Old = now_s() - 5,
    D = deltas(S, fun() ->
                          refused(S, path(5, query(K, 5, Old)), [], ?EXPIRED),
                          refused(S, path(5), [bearer(K, 5, Old)], ?EXPIRED),
                          refused(S, path(5, query(K, 5, 1)), [], ?EXPIRED)
                  end),
    ?assertEqual(#{auth_missing => 0, auth_expired => 3, auth_bad => 0, streams_total => 0}, D).

forged(#{s := S, secret := K}) ->
    Exp = now_s() + 60,
    Other = <<K/binary, "x">>,
    Flipped = flip_last(sig(K, 5, Exp)),
    D = deltas(S, fun() ->
                          refused(S, path(5, query(Other, 5, Exp)), [], ?FORGED),
                          refused(S, path(5), [bearer(Other, 5, Exp)], ?FORGED),
                          refused(S, path(5, "exp=" ++ integer_to_list(Exp) ++ "&sig=" ++
                                              Flipped), [], ?FORGED),
                          %% a later exp under a genuine signature
                          refused(S, path(5, "exp=" ++ integer_to_list(Exp + 1) ++ "&sig=" ++
                                              sig(K, 5, Exp)), [], ?FORGED),
                          %% forged and in the past: bad, not expired
                          refused(S, path(5, query(Other, 5, now_s() - 5)), [], ?FORGED)
                  end),
    ?assertEqual(#{auth_missing => 0, auth_expired => 0, auth_bad => 5, streams_total => 0}, D).

flip_last(Hex) ->
    {Init, [L]} = lists:split(length(Hex) - 1, Hex),
    Init ++ [case L of $0 -> $1; _ -> $0 end].

wrong_uid(#{s := S, secret := K}) ->
    Exp = now_s() + 60,
    Q = query(K, 5, Exp),
    H = bearer(K, 5, Exp),
    D = deltas(S, fun() ->
                          [refused(S, path(U, Q), [], ?FORGED) || U <- [50, 55, 6]],
                          [refused(S, path(U), [H], ?OTHER_UID) || U <- [50, 55, 6]]
                  end),
    ?assertEqual(#{auth_missing => 0, auth_expired => 0, auth_bad => 6, streams_total => 0}, D),
    %% and it still opens 5
    opens(S, 5, path(5, Q), []),
    opens(S, 5, path(5), [H]).

sse_token(#{s := S, secret := K}) ->
    refused(S, "/sse/9", [], ?MISSING),
    refused(S, "/sse/9?" ++ query(K, 90, now_s() + 60), [], ?FORGED),
    Q = query(K, 9, now_s() + 60),
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S), [binary, {active, false}]),
    ok = gen_tcp:send(Sock, request_bytes("GET", "/sse/9?" ++ Q ++ "&since=00000000%3A0",
                                          "HTTP/1.1", [])),
    {ok, Head} = gen_tcp:recv(Sock, 0, ?T),
    ?assertMatch(<<"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream", _/binary>>, Head),
    gen_tcp:close(Sock).

ws_token(#{s := S, secret := K}) ->
    Upgrade = ["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13",
               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="],
    refused(S, "/ws/14", Upgrade, ?MISSING),
    refused(S, "/ws/14?" ++ query(K, 15, now_s() + 60), Upgrade, ?FORGED),
    refused(S, "/ws/14?" ++ query(K, 14, now_s() - 1), Upgrade, ?EXPIRED),
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S), [binary, {active, false}]),
    ok = gen_tcp:send(Sock, request_bytes("GET", "/ws/14?" ++ query(K, 14, now_s() + 60),
                                          "HTTP/1.1", Upgrade)),
    {ok, Head} = gen_tcp:recv(Sock, 0, ?T),
    ?assertMatch(<<"HTTP/1.1 101 ", _/binary>>, Head),
    gen_tcp:close(Sock).

poll_token(#{s := S, secret := K}) ->
    refused(S, "/poll/11?since=00000000:0", [], ?MISSING),
    refused(S, "/poll/11?since=00000000:0&" ++ query(K, 12, now_s() + 60), [], ?FORGED),
    R = http_request(port_of(S), request_bytes("GET", "/poll/11?since=00000000:0&"
                                               ++ query(K, 11, now_s() + 60), "HTTP/1.1",
                                               ["Connection: close"])),
    ?assertEqual(200, maps:get(status, R)).

missing(#{s := S}) ->
    D = deltas(S, fun() ->
                          refused(S, path(5), [], ?MISSING),
                          refused(S, path(5, "nocache=1&expiry=2"), [], ?MISSING),
                          refused(S, path(5), ["Authorization: Basic dXNlcjpwYXNz"], ?MISSING)
                  end),
    ?assertEqual(#{auth_missing => 3, auth_expired => 0, auth_bad => 0, streams_total => 0}, D).

malformed(#{s := S, secret := K}) ->
    Exp = now_s() + 60,
    E = integer_to_list(Exp),
    G = sig(K, 5, Exp),
    Queries = [{"exp=" ++ E, ?PAIR},
               {"sig=" ++ G, ?PAIR},
               {"exp=" ++ E ++ "&sig=" ++ G ++ "&exp=" ++ E, ?PAIR},
               {"exp=" ++ E ++ "&sig=" ++ G ++ "&sig=" ++ G, ?PAIR},
               {"exp=abc&sig=" ++ G, ?BAD_EXP},
               {"exp=-" ++ E ++ "&sig=" ++ G, ?BAD_EXP},
               {"exp=0" ++ E ++ "&sig=" ++ G, ?BAD_EXP},
               {"exp=&sig=" ++ G, ?BAD_EXP},
               {"exp=" ++ E ++ "&sig=" ++ lists:sublist(G, 63), ?BAD_SIG},
               {"exp=" ++ E ++ "&sig=" ++ G ++ "0", ?BAD_SIG},
               {"exp=" ++ E ++ "&sig=z" ++ lists:sublist(G, 63), ?BAD_SIG}],
    Headers = [{"Authorization: Bearer", ?BAD_BEARER},
               {"Authorization: Bearer 5." ++ E, ?BAD_BEARER},
               {"Authorization: Bearer 5." ++ E ++ "." ++ G ++ ".x", ?BAD_BEARER},
               {"Authorization: Bearer x." ++ E ++ "." ++ G, ?JWT_HEADER},
               {"Authorization: Bearer 5.x" ++ E ++ "." ++ G, ?BAD_EXP},
               {"Authorization: Bearer 5." ++ E ++ "." ++ G ++ "00", ?BAD_SIG}],
    D = deltas(S, fun() ->
                          [refused(S, path(5, Q), [], R) || {Q, R} <- Queries],
                          [refused(S, path(5), [H], R) || {H, R} <- Headers]
                  end),
    N = length(Queries) + length(Headers),
    ?assertEqual(#{auth_missing => 0, auth_expired => 0, auth_bad => N, streams_total => 0}, D).

header_wins(#{s := S, secret := K}) ->
    Exp = now_s() + 60,
    Other = <<K/binary, "x">>,
    %% valid header, forged query: opens
    opens(S, 11, path(11, query(Other, 11, Exp)), [bearer(K, 11, Exp)]),
    %% forged header, valid query: refused
    refused(S, path(11, query(K, 11, Exp)), [bearer(Other, 11, Exp)], ?FORGED),
    %% expired header, valid query: refused as expired
    refused(S, path(11, query(K, 11, Exp)), [bearer(K, 11, now_s() - 1)], ?EXPIRED),
    %% a header of another scheme is not a token: the query is used
    opens(S, 11, path(11, query(K, 11, Exp)), ["Authorization: Basic dXNlcjpwYXNz"]).

head(#{s := S, secret := K}) ->
    D = deltas(S, fun() ->
                          refused(S, "HEAD", path(5), [], ?MISSING),
                          refused(S, "HEAD", path(5, query(K, 5, now_s() - 1)), [], ?EXPIRED)
                  end),
    ?assertMatch(#{auth_missing := 1, auth_expired := 1}, D),
    C = open(port_of(S), request_bytes("HEAD", path(5, query(K, 5, now_s() + 60)), "HTTP/1.1",
                                       ["Connection: close"]), #{head => true}),
    ?assertMatch(#{status := 200}, expect_head(C, ?T)),
    close(C).

%% A stream lives as long as its token (a JWT's too): at exp it is ended
%% with the expired ending (WebSocket 4003, SSE's end event, the poll's
%% "ended"), within a second; a stream with a later token goes on; the same
%% token is refused from then on.
expires(#{s := S, secret := K}) ->
    Exp = now_s() + 2,
    Q = fun(Uid, E) -> "?" ++ query(K, Uid, E) end,
    Jwt = "?token=" ++ binary_to_list(httpdcnode_token:sign_jwt(K, #{sub => <<"35">>,
                                                                     exp => Exp})),
    Short = [core_drain_tests:client(S, Kind, Uid, Q(Uid, Exp))
             || {Kind, Uid} <- [{sse, 30}, {ws, 31}, {poll, 32}]]
        ++ [core_drain_tests:client(S, ws, 35, Jwt)],
    Long = core_drain_tests:client(S, sse, 33, Q(33, Exp + 60)),
    [core_drain_tests:wait_ready(C) || C <- [Long | Short]],
    Chunked = open_ok(S, 34, path(34, query(K, 34, Exp)), []),
    Before = maps:get(token_expired, stats(S)),
    Ends = core_drain_tests:collect(Short, erlang:monotonic_time(millisecond) + 3 * ?T),
    expect_end(Chunked, ?T),
    ExpMono = Exp * 1000 - erlang:time_offset(millisecond),
    [begin
         ?assertEqual({Kind, expired}, {Kind, core_drain_tests:ending(Kind, Bytes)}),
         Late = T - ExpMono,
         io:format(user, " [~s ended ~b ms after exp] ", [Kind, Late]),
         ?assert(Late >= -100 andalso Late =< 1200)
     end || {Kind, Bytes, T} <- maps:values(Ends)],
    wait_stat(S, token_expired, fun(V) -> V =:= Before + 5 end, ?T),
    %% The later token's stream is still served, and still open.
    D0 = maps:get(deliveries, stats(S)),
    send(S, {33, <<"still here">>}),
    wait_stat(S, deliveries, fun(V) -> V =:= D0 + 1 end, ?T),
    ?assertEqual(still_open, receive {closed, Long, _, _} -> closed after 0 -> still_open end),
    refused(S, path(12, query(K, 12, Exp)), [], ?EXPIRED),
    opens(S, 12, path(12, query(K, 12, now_s() + 60)), []),
    unlink(Long),
    exit(Long, kill).

%% With --no-token-expiry a stream outlives its token, as before.
no_expiry_test_() ->
    {setup,
     fun() ->
             Secret = list_to_binary(hex(crypto:strong_rand_bytes(24))),
             File = secret_file(<<Secret/binary, "\n">>, 8#600),
             S = httpdtest_server:start_server(
                   #{extra_args => ["--auth-secret-file", File, "--no-token-expiry"]}),
             #{s => S, secret => Secret, file => File}
     end,
     fun stop_auth_server/1,
     fun(Ctx) ->
             [case_test("--no-token-expiry: an SSE stream and a WebSocket outlive their 2-s "
                        "tokens", Ctx, fun outlives/1)]
     end}.

outlives(#{s := S, secret := K}) ->
    Exp = now_s() + 2,
    Q = fun(Uid) -> "?" ++ query(K, Uid, Exp) end,
    Cs = [core_drain_tests:client(S, Kind, Uid, Q(Uid)) || {Kind, Uid} <- [{sse, 40}, {ws, 41}]],
    [core_drain_tests:wait_ready(C) || C <- Cs],
    wait_until(fun() -> now_s() > Exp + 1 end, 5000, token_expiry),
    send(S, {[40, 41], <<"after exp">>}),
    wait_stat(S, deliveries, fun(V) -> V >= 2 end, ?T),
    ?assertMatch(#{streams_open := 2, token_expired := 0}, stats(S)),
    [begin unlink(C), exit(C, kill) end || C <- Cs].

erlang_token(#{s := S, file := File}) ->
    _ = application:load(httpdcnode),
    ok = application:set_env(httpdcnode, auth_secret_file, File),
    try
        Q = httpdcnode:token(13, 60),
        ?assertMatch({match, _}, re:run(Q, "^exp=[1-9][0-9]*&sig=[0-9a-f]{64}$")),
        opens(S, 13, path(13, binary_to_list(Q)), []),
        Base = "http://127.0.0.1:" ++ integer_to_list(port_of(S)),
        Url = httpdcnode:token_url(Base, 14, 60),
        Prefix = list_to_binary(Base ++ "/test/14?"),
        ?assertMatch(<<Prefix:(byte_size(Prefix))/binary, "exp=", _/binary>>, Url),
        PathQ = binary_to_list(binary:part(Url, length(Base), byte_size(Url) - length(Base))),
        opens(S, 14, PathQ, []),
        %% the Erlang token of uid 14 does not open 140
        refused(S, path(140, lists:last(string:split(PathQ, "?"))), [], ?FORGED)
    after
        application:unset_env(httpdcnode, auth_secret_file)
    end.

openssl_token(#{s := S, file := File}) ->
    Exp = integer_to_list(now_s() + 60),
    Cmd = "printf '%s' '15:" ++ Exp ++ "' | openssl dgst -sha256 -hmac \"$(cat '" ++ File
        ++ "')\" | sed 's/^.*= //'",
    Sig = string:trim(os:cmd(Cmd)),
    ?assertMatch({match, _}, re:run(Sig, "^[0-9a-f]{64}$")),
    opens(S, 15, path(15, "exp=" ++ Exp ++ "&sig=" ++ Sig), []).

counters(#{s := S, secret := K}) ->
    Exp = now_s() + 60,
    D = deltas(S, fun() ->
                          refused(S, path(5), [], ?MISSING),
                          refused(S, path(5, query(K, 5, now_s() - 1)), [], ?EXPIRED),
                          refused(S, path(5, query(K, 6, Exp)), [], ?FORGED),
                          refused(S, path(5, "exp=1x&sig=0"), [], ?BAD_EXP)
                  end),
    ?assertEqual(#{auth_missing => 1, auth_expired => 1, auth_bad => 2, streams_total => 0}, D),
    %% the same counters in the Erlang stats map
    Web = stats(S),
    Ref = make_ref(),
    send(S, {self(), Ref, stats}),
    Map = receive {Ref, M} -> M after ?T -> erlang:error(no_stats_reply) end,
    [?assertEqual({Key, maps:get(Key, Web)}, {Key, erl_stat(Map, Key)})
     || Key <- [auth_missing, auth_expired, auth_bad]].

erl_stat(Map, Key) ->
    case maps:find(Key, Map) of
        {ok, V} -> V;
        error -> maps:get(atom_to_binary(Key, utf8), Map, missing)
    end.

attack_with_tokens(#{s := S, secret := K}) ->
    Victim = open_ok(S, 77, path(77, query(K, 77, now_s() + 60)), []),
    Forged = query(<<K/binary, "x">>, 77, now_s() + 60),
    D = deltas(S, fun() ->
                          [refused(S, path(77), [], ?MISSING) || _ <- lists:seq(1, ?MAX_CONNS)],
                          [refused(S, path(77, Forged), [], ?FORGED)
                           || _ <- lists:seq(1, ?MAX_CONNS)]
                  end),
    ?assertMatch(#{auth_missing := ?MAX_CONNS, auth_bad := ?MAX_CONNS, streams_total := 0}, D),
    send(S, {77, <<"still here">>}),
    ?assertEqual(<<"still here">>, expect_chunk(Victim, ?T)),
    ?assertEqual(0, maps:get(evicted, stats(S))),
    close(Victim).

%%% ---------------------------------------------------------------- open mode

%% The same attack without tokens: anyone may open uid 77, and
%% --max-conns-per-uid streams of the attacker end the victim's.
attack_without_tokens_test_() ->
    httpdtest_server:server_test(
      "open mode: opening max-conns-per-uid streams for uid 77 ends the victim's",
      #{max_conns_per_uid => ?MAX_CONNS}, 30,
      fun(S) ->
              Victim = open_ok(S, 77, path(77), []),
              Attack = [open_ok(S, 77, path(77), []) || _ <- lists:seq(1, ?MAX_CONNS)],
              expect_end(Victim, ?T),
              St = wait_stat(S, evicted, fun(V) -> V =:= 1 end, ?T),
              ?assertEqual(0, maps:get(auth_missing, St)),
              [close(C) || C <- Attack],
              %% and on loopback it says nothing of open mode
              {ok, Log} = file:read_file(maps:get(log, S)),
              ?assertEqual(nomatch, binary:match(Log, <<"open mode">>))
      end).

%%% ---------------------------------------------------------------- command line

cli_base() ->
    ["--listen", "127.0.0.1:" ++ integer_to_list(httpdtest_os:free_port()),
     "--name", httpdtest_os:unique("c1auth") ++ "@localhost",
     "--master", httpdtest_os:unique("httpdmaster_absent") ++ "@localhost",
     "--cookie", "x"].

%% Exit 2 and one line on stderr that contains Says.
refused_file(Bytes, Mode, Says) ->
    File = secret_file(Bytes, Mode),
    try
        {St, Out} = httpdtest_server:run_cli(cli_base() ++ ["--auth-secret-file", File], 5000),
        Lines = [L || L <- binary:split(Out, <<"\n">>, [global, trim]), L =/= <<>>],
        ?assertEqual({exit_status, 2}, {exit_status, St}),
        ?assertMatch({one_line, [_]}, {one_line, Lines}),
        ?assertNotEqual(nomatch, binary:match(hd(Lines), Says)),
        %% the secret itself is never printed
        ?assertEqual(nomatch, binary:match(Out, <<"sekrit">>))
    after
        file:delete(File)
    end.

cli_test_() ->
    [{"a secret file mode " ++ integer_to_list(M, 8) ++ " is refused: exit 2, one line",
      {timeout, 15, fun() -> refused_file(<<"sekrit\n">>, M, <<"chmod 600">>) end}}
     || M <- [8#644, 8#640, 8#604, 8#660]]
        ++ [{"an empty secret is refused: exit 2, one line",
             {timeout, 15, fun() -> refused_file(<<"\n">>, 8#600, <<"empty">>) end}},
            {"a missing secret file is refused: exit 2, one line",
             {timeout, 15,
              fun() ->
                      {St, Out} = httpdtest_server:run_cli(
                                    cli_base() ++ ["--auth-secret-file", "/nonexistent/s"], 5000),
                      ?assertEqual(2, St),
                      ?assertNotEqual(nomatch, binary:match(Out, <<"No such file">>))
              end}},
            {"without a secret on a non-loopback address it says open mode",
             {timeout, 15, fun open_mode_notice/0}}].

%% The notice comes at start, before the listening socket: with the port
%% taken on 127.0.0.1 the server gives up right after it (exit 1), so the
%% test never opens a port beyond loopback.
open_mode_notice() ->
    {ok, L} = gen_tcp:listen(0, [{ip, {127, 0, 0, 1}}]),
    {ok, Port} = inet:port(L),
    try
        Args = lists:sublist(cli_base(), 3, 6) ++ ["--listen", "0.0.0.0:" ++ integer_to_list(Port)],
        {St, Out} = httpdtest_server:run_cli(Args, 5000),
        ?assertEqual({exit_status, 1}, {exit_status, St}),
        Want = iolist_to_binary(["open mode: anyone who can reach 0.0.0.0:",
                                 integer_to_list(Port), " can read any uid; "
                                 "use --auth-secret-file"]),
        ?assertNotEqual({nomatch, Out}, {binary:match(Out, Want), Out})
    after
        gen_tcp:close(L)
    end.

%%% ---------------------------------------------------------------- JWT

%% A JWT minted by the application with the server's secret file.
app_jwt(File, Uid, Ttl) -> app_jwt(File, Uid, Ttl, #{}).

app_jwt(File, Uid, Ttl, Claims) ->
    _ = application:load(httpdcnode),
    ok = application:set_env(httpdcnode, auth_secret_file, File),
    try binary_to_list(httpdcnode_token:jwt(Uid, Ttl, Claims))
    after application:unset_env(httpdcnode, auth_secret_file)
    end.

b64url(Bin) -> [case C of $+ -> $-; $/ -> $_; _ -> C end || <<C>> <= base64:encode(Bin), C =/= $=].

%% A token whose header is Header (JSON text), signed with Secret (none:
%% no signature).
hand_jwt(Header, Claims, Secret) ->
    Input = b64url(Header) ++ "." ++ b64url(Claims),
    Sig = case Secret of
              none -> "";
              _ -> b64url(crypto:mac(hmac, sha256, Secret, Input))
          end,
    Input ++ "." ++ Sig.

ws_upgrade() ->
    ["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13",
     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="].

%% Path and extra headers of Kind's request for Uid, the JWT in the query
%% (query) or in the header (bearer).
jwt_request(Kind, Uid, Jwt, Where) ->
    Base = case Kind of
               test -> "/test/";
               sse -> "/sse/";
               poll -> "/poll/";
               ws -> "/ws/"
           end ++ integer_to_list(Uid),
    Since = case Kind of poll -> ["since=00000000:0"]; _ -> [] end,
    {Query, Auth} = case Where of
                        query -> {Since ++ ["token=" ++ Jwt], []};
                        bearer -> {Since, ["Authorization: Bearer " ++ Jwt]}
                    end,
    Path = case Query of [] -> Base; _ -> Base ++ "?" ++ lists:join("&", Query) end,
    {lists:flatten(Path), Auth ++ case Kind of ws -> ws_upgrade(); _ -> [] end}.

%% The stream opens: its head (and for /test/N a message reaches it).
admitted(S, Kind, Uid, Jwt, Where) ->
    {Path, Headers} = jwt_request(Kind, Uid, Jwt, Where),
    case Kind of
        test -> opens(S, Uid, Path, Headers);
        _ ->
            {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S), [binary, {active, false}]),
            ok = gen_tcp:send(Sock, request_bytes("GET", Path, "HTTP/1.1", Headers)),
            {ok, Head} = gen_tcp:recv(Sock, 0, ?T),
            Want = case Kind of
                       ws -> <<"HTTP/1.1 101 ">>;
                       _ -> <<"HTTP/1.1 200 OK\r\n">>
                   end,
            ?assertEqual({Kind, Where, Want},
                         {Kind, Where, binary:part(Head, 0, min(byte_size(Head), byte_size(Want)))}),
            gen_tcp:close(Sock)
    end.

jwt_every_transport(#{s := S, file := File}) ->
    D = deltas(S, fun() ->
                          [admitted(S, Kind, Uid, app_jwt(File, Uid, 60), Where)
                           || {Kind, Uid} <- [{test, 60}, {sse, 61}, {poll, 62}, {ws, 63}],
                              Where <- [query, bearer]]
                  end),
    ?assertEqual(#{auth_missing => 0, auth_expired => 0, auth_bad => 0, streams_total => 8}, D),
    %% a JWT of the application has sub, iat, exp and the claims given
    [_, Claims, _] = string:split(app_jwt(File, 64, 60, #{nbf => now_s() - 1}), ".", all),
    Map = httpdtest_json:json_decode(base64:decode(pad(Claims))),
    ?assertMatch(#{<<"sub">> := <<"64">>, <<"exp">> := _, <<"iat">> := _, <<"nbf">> := _}, Map),
    admitted(S, sse, 64, app_jwt(File, 64, 60, #{nbf => now_s() - 1}), query).

pad(B64url) ->
    S = [case C of $- -> $+; $_ -> $/; _ -> C end || C <- B64url],
    S ++ lists:duplicate((4 - length(S) rem 4) rem 4, $=).

jwt_refused(#{s := S, secret := K, file := File}) ->
    Now = now_s(),
    Claims5 = <<"{\"sub\":\"5\",\"exp\":", (integer_to_binary(Now + 60))/binary, "}">>,
    Expired = [{httpdcnode_token:sign_jwt(K, #{sub => <<"5">>, exp => Now - 1}), ?EXPIRED},
               {app_jwt(File, 5, 60, #{nbf => Now + 3600}), ?NOT_YET}],
    Bad = [{httpdcnode_token:sign_jwt(<<K/binary, "x">>, #{sub => <<"5">>, exp => Now + 60}),
            ?FORGED},
           {app_jwt(File, 6, 60), ?OTHER_UID},
           {httpdcnode_token:sign_jwt(K, #{sub => 5, exp => Now + 60}), ?JWT_SUB},
           {hand_jwt(<<"{\"alg\":\"none\"}">>, Claims5, none), ?ALG},
           {hand_jwt(<<"{\"alg\":\"none\"}">>, Claims5, K), ?ALG},
           {hand_jwt(<<"{\"alg\":\"HS512\",\"typ\":\"JWT\"}">>, Claims5, K), ?ALG},
           {app_jwt(File, 5, 60) ++ ".x", ?JWT_SHAPE},
           {app_jwt(File, 5, 60, #{pad => list_to_binary(lists:duplicate(3100, $a))}), ?JWT_LONG}],
    Kinds = [test, sse, poll, ws],
    D = deltas(S, fun() ->
                          [refused(S, Path, Headers, Reason)
                           || {Jwt, Reason} <- Expired ++ Bad, Kind <- Kinds,
                              Where <- [query, bearer],
                              {Path, Headers} <- [jwt_request(Kind, 5, to_list(Jwt), Where)]]
                  end),
    N = length(Kinds) * 2,
    ?assertEqual(#{auth_missing => 0, auth_expired => N * length(Expired),
                   auth_bad => N * length(Bad), streams_total => 0}, D).

to_list(B) when is_binary(B) -> binary_to_list(B);
to_list(L) -> L.

jwt_header_wins(#{s := S, secret := K, file := File}) ->
    Exp = now_s() + 60,
    Forged = binary_to_list(httpdcnode_token:sign_jwt(<<K/binary, "x">>,
                                                      #{sub => <<"16">>, exp => Exp})),
    %% a valid JWT in the header, a forged one in the query: opens
    opens(S, 16, path(16, "token=" ++ Forged), ["Authorization: Bearer " ++ app_jwt(File, 16, 60)]),
    %% the older form in the header, a JWT in the query: the older form decides
    opens(S, 16, path(16, "token=" ++ Forged), [bearer(K, 16, Exp)]),
    refused(S, path(16, "token=" ++ app_jwt(File, 16, 60)), [bearer(K, 16, now_s() - 1)],
            ?EXPIRED),
    %% both forms in the query: malformed
    refused(S, path(16, "token=" ++ app_jwt(File, 16, 60) ++ "&" ++ query(K, 16, Exp)), [],
            <<"Malformed token: token=JWT once, without exp and sig">>).
