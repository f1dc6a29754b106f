%% SPDX-License-Identifier: Apache-2.0
%% The demo page (GET /) and its client (GET /httpdcnode.js) in a real
%% browser: headless Chromium driven by tests/js/browser_page.mjs, which
%% reports every row the page shows as a JSON line. Messages come from
%% this node; the server ends the page's stream (a drain: {drain, 0} then
%% {drain, cancel}) and the page must come back by itself with every
%% message sent meanwhile, once and in order, or show a gap when history
%% could not cover them; a kicked stream it must not come back to. With
%% --ws-deflate, Chromium agrees permessage-deflate by itself: it reads the
%% server's compressed messages and compresses its own.
-module(browser_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [send/2, port_of/1]).
-import(httpdtest_os, [scaled/1]).
-import(httpdtest_page, [events/1, command/2]).

%% Waits on the page; Chromium starts in a few seconds, EventSource comes
%% back 3 s (the server's retry) after its stream ended.
-define(T, 20000).

browser_test_() ->
    [httpdtest_server:server_test("GET / and /httpdcnode.js: the built-in files, their "
                                  "headers, 304 on a matching ETag", #{}, 30,
                                  fun web_files/1),
     [httpdtest_server:server_test("page over " ++ T ++ ": messages with ids, the page "
                                   "goes on by itself after a drain, every message once and "
                                   "in order", #{}, 120, fun(S) -> resume(S, T) end)
      || T <- ["sse", "ws", "poll"]],
     [httpdtest_server:server_test("page over " ++ T ++ ": a gap shown when history was "
                                   "exceeded", #{extra_args => ["--history", "2"]}, 120,
                                   fun(S) -> gap(S, T) end)
      || T <- ["sse", "ws"]],
     httpdtest_server:server_test("client over sse, ws and poll: kicked, it ends for good "
                                  "(status ended, onend), no reconnect", #{}, 120,
                                  fun kicked/1),
     {setup, fun token_secret/0, fun file:delete/1,
      fun(File) ->
              httpdtest_server:server_test(
                "client over sse, ws and poll with 3-s tokens: at exp the stream ends "
                "(expired), the client comes back with the fresh token its token callback "
                "gives; without a callback it ends for good",
                #{extra_args => ["--auth-secret-file", File]}, 120,
                fun(S) -> token_expiry(S, File) end)
      end},
     httpdtest_server:server_test("page with ?uid=N alone: the first transport that works",
                                  #{}, 120, fun first_that_works/1),
     httpdtest_server:server_test("client over sse, ws and poll: a binary message, whether "
                                  "its bytes are not UTF-8 or Erlang said {binary, Data} of "
                                  "UTF-8, arrives as its bytes", #{}, 120, fun binary/1),
     httpdtest_server:server_test("client over ws, sse and poll: the server killed, retries "
                                  "after full-jitter waits, back once it is", #{}, 120,
                                  fun server_back/1),
     httpdtest_inbox:app_case("client over ws with --ws-deflate: Chromium agrees "
                              "permessage-deflate, reads compressed text and binary "
                              "messages, and its own messages, compressed, reach the "
                              "inbox (an echo)", ws_echo, ["--ws-deflate"], 120,
                              fun deflate/1)].

%% Messages long enough to be compressed (64 bytes and up).
deflate(S) ->
    with_page(S, "", fun(P) ->
        connect(P, <<"z">>, <<"ws">>, 66, "{}"),
        wait_status(P, <<"z">>, fun(St) -> count_state(<<"open">>, St) >= 1 end, open),
        Before = httpdtest_server:stats(S),
        Text = binary:copy(<<"the same words, ", 16#c3, 16#a9, "t", 16#c3, 16#a9, " ">>, 200),
        Bin = binary:copy(<<255, 0, 17>>, 300),
        send(S, {66, Text}),
        send(S, {66, {binary, Bin}}),
        Hex = string:lowercase(binary:encode_hex(Bin)),
        ?assertMatch([#{<<"data">> := Text, <<"hex">> := null}, #{<<"hex">> := Hex}],
                     wait_msgs(P, <<"z">>, 2)),
        Line = iolist_to_binary(lists:join(" ", lists:duplicate(20, "from the page"))),
        command(P, [<<"send z ">>, Line]),
        httpdtest_wait:wait_until(
          fun() -> [R || #{<<"data">> := R} <- tagged(P, <<"reply">>, <<"z">>)] =:= [Line] end,
          ?T, echoed),
        ?assertMatch([#{<<"ok">> := true}], tagged(P, <<"sent">>, <<"z">>)),
        After = httpdtest_server:stats(S),
        D = fun(K) -> maps:get(K, After) - maps:get(K, Before) end,
        ?assertEqual({2, 1, 0}, {D(ws_deflated), D(ws_inflated), D(ws_bad_frames)}),
        no_script_errors(P)
    end).

%%% ---------------------------------------------------------------- files

web_files(S) ->
    Root = httpdtest_os:repo_root(),
    {ok, Page} = file:read_file(filename:join([Root, "web", "index.html"])),
    %% the page names this C-node (its --name) where it says @NODE@
    Node = atom_to_binary(httpdtest_server:node_of(S)),
    Html = binary:replace(Page, <<"@NODE@">>, Node, [global]),
    ?assertNotEqual(Page, Html),
    ?assertNotEqual(nomatch, binary:match(Html, <<"{any, '", Node/binary, "'}">>)),
    {ok, Js} = file:read_file(filename:join([Root, "web", "httpdcnode.js"])),
    H1 = request(S, "GET", "/?uid=3", []),
    ?assertMatch(#{status := 200, body := Html}, H1),
    ?assertEqual(<<"text/html; charset=utf-8">>, header(H1, <<"content-type">>)),
    ?assertEqual(<<"no-cache">>, header(H1, <<"cache-control">>)),
    ?assertEqual(integer_to_binary(byte_size(Html)), header(H1, <<"content-length">>)),
    %% Self-contained: nothing from another host, the client from this one.
    ?assertEqual(nomatch, binary:match(Html, <<"://">>)),
    ?assertNotEqual(nomatch, binary:match(Html, <<"<script src=\"/httpdcnode.js\">">>)),
    H2 = request(S, "GET", "/httpdcnode.js", []),
    ?assertMatch(#{status := 200, body := Js}, H2),
    ?assertEqual(<<"text/javascript; charset=utf-8">>, header(H2, <<"content-type">>)),
    ?assertEqual(<<"no-cache">>, header(H2, <<"cache-control">>)),
    Etag = header(H2, <<"etag">>),
    ?assertMatch(<<"\"", _:16/binary, "\"">>, Etag),
    ?assertNotEqual(header(H1, <<"etag">>), Etag),
    ?assertMatch(#{status := 304, body := <<>>},
                 request(S, "GET", "/httpdcnode.js", ["If-None-Match: " ++ binary_to_list(Etag)])),
    ?assertMatch(#{status := 200, body := Js},
                 request(S, "GET", "/httpdcnode.js", ["If-None-Match: \"0000000000000000\""])),
    %% HEAD: the length, and not one body byte before the close.
    C = httpdtest_http:open(port_of(S), httpdtest_http:request_bytes(
                                               "HEAD", "/httpdcnode.js", "HTTP/1.1",
                                               ["Connection: close"]), #{head => true}),
    H3 = httpdtest_http:expect_head(C, 5000),
    ?assertMatch(#{status := 200}, H3),
    ?assertEqual(integer_to_binary(byte_size(Js)), header(H3, <<"content-length">>)),
    ?assertEqual(closed, httpdtest_http:next_event(C, 5000)),
    httpdtest_http:close(C),
    ?assertMatch(#{status := 404}, request(S, "GET", "/index.html", [])),
    ?assertMatch(#{status := 405}, request(S, "POST", "/", [])).

request(S, Method, Path, Extra) ->
    httpdtest_http:http_request(
      port_of(S), httpdtest_http:request_bytes(Method, Path, "HTTP/1.1",
                                               ["Connection: close" | Extra])).

header(#{headers := H}, Name) -> httpdtest_http:header(H, Name).

%%% ---------------------------------------------------------------- the page

%% A drain ends the page's stream, telling it to come back: a long-poll
%% answers "ended":"drain", SSE sends an end event, a WebSocket closes with
%% 1012; the page reconnects after its backoff, resuming.
resume(S, T) ->
    with_page(S, "?uid=60&transport=" ++ T, fun(P) ->
        wait_log(P, fun(L) -> count(<<"open">>, L) >= 1 end, "the page's stream open"),
        send_range(S, 60, 1, 3),
        wait_messages(P, 3),
        %% The server ends the stream; what is sent before the page is back
        %% waits in the uid's history.
        bounce(S),
        send_range(S, 60, 4, 6),
        T =:= "poll" orelse
            wait_log(P, fun(L) -> count(<<"open">>, L) >= 2 end, "the page's stream open again"),
        wait_messages(P, 6),
        send(S, {60, <<"m7\nwith two lines">>}),
        wait_messages(P, 7),
        #{<<"messages">> := Shown, <<"log">> := Log} = dump(P),
        [#{<<"id">> := Id1} | _] = Shown,
        Epoch = epoch(Id1),
        Want = [#{<<"id">> => <<Epoch/binary, ":", (integer_to_binary(I))/binary>>,
                  <<"data">> => D}
                || {I, D} <- [{I, m(I)} || I <- lists:seq(1, 6)] ++ [{7, <<"m7\nwith two lines">>}]],
        ?assertEqual(Want, Shown),
        Kinds = [K || #{<<"kind">> := K} <- Log],
        ?assertEqual(0, count(<<"duplicate">>, Log)),
        ?assertEqual(0, count(<<"gap">>, Log)),
        case T of
            "poll" -> ok;
            _ ->
                ?assert(lists:member(<<"reconnecting">>, Kinds)),
                Resumed = iolist_to_binary(["open (", T, "): resumed after ", Epoch, ":3"]),
                ?assert(lists:member(Resumed, [X || #{<<"text">> := X} <- Log]))
        end,
        no_script_errors(P)
    end).

gap(S, T) ->
    with_page(S, "?uid=61&transport=" ++ T, fun(P) ->
        wait_log(P, fun(L) -> count(<<"open">>, L) >= 1 end, "the page's stream open"),
        send(S, {61, m(1)}),
        wait_messages(P, 1),
        bounce(S),
        send_range(S, 61, 2, 6),
        wait_log(P, fun(L) -> count(<<"gap">>, L) >= 1 end, "a gap shown"),
        wait_messages(P, 3),
        #{<<"messages">> := Shown, <<"log">> := Log} = dump(P),
        [#{<<"id">> := Id1} | _] = Shown,
        Epoch = epoch(Id1),
        Id = fun(I) -> <<Epoch/binary, ":", (integer_to_binary(I))/binary>> end,
        ?assertEqual([#{<<"id">> => Id(I), <<"data">> => m(I)} || I <- [1, 5, 6]], Shown),
        [GapText] = [X || #{<<"kind">> := <<"gap">>, <<"text">> := X} <- Log],
        ?assertNotEqual(nomatch, binary:match(GapText, <<"after ", (Id(1))/binary>>)),
        ?assertNotEqual(nomatch, binary:match(GapText, <<"at ", (Id(5))/binary>>)),
        no_script_errors(P)
    end).

%% No transport named: the page takes the first of WebSocket, SSE and
%% long-poll that this server answers, and shows what comes.
first_that_works(S) ->
    with_page(S, "?uid=62", fun(P) ->
        wait_log(P, fun(L) -> count(<<"open">>, L) >= 1 end, "the page connected"),
        send(S, {62, <<"first">>}),
        wait_messages(P, 1),
        #{<<"messages">> := [#{<<"id">> := Id, <<"data">> := <<"first">>}]} = dump(P),
        ?assertMatch([_, <<"1">>], binary:split(Id, <<":">>)),
        no_script_errors(P)
    end).

%% The page's client, one connection per transport: m.bytes is a binary
%% message exactly, m.data its text as EventSource decodes it; a text
%% message has no bytes. Binary: bytes that are not UTF-8, or any bytes
%% Erlang sent as {binary, Data} (a WebSocket binary frame, SSE's base64
%% event, long-poll's data_base64).
binary(S) ->
    with_page(S, "", fun(P) ->
        Ts = [{<<"sse">>, 63}, {<<"ws">>, 64}, {<<"poll">>, 65}],
        [connect(P, T, T, U, "{}") || {T, U} <- Ts],
        [wait_status(P, T, fun(St) -> count_state(<<"open">>, St) >= 1 end, open) || {T, _} <- Ts],
        [begin
             send(S, {U, <<255, 254, 0, 1>>}),
             send(S, {U, <<"caf", 16#c3, 16#a9>>}),
             send(S, {U, {binary, <<"caf", 16#c3, 16#a9>>}}),
             send(S, {U, {text, <<"text">>}})
         end || {_, U} <- Ts],
        [?assertMatch({T, [#{<<"hex">> := <<"fffe0001">>,
                             <<"data">> := <<16#fffd/utf8, 16#fffd/utf8, 0, 1>>},
                           #{<<"hex">> := null, <<"data">> := <<"caf", 16#c3, 16#a9>>},
                           #{<<"hex">> := <<"636166c3a9">>, <<"data">> := <<"caf", 16#c3, 16#a9>>},
                           #{<<"hex">> := null, <<"data">> := <<"text">>}]},
                      {T, wait_msgs(P, T, 4)})
         || {T, _} <- Ts],
        no_script_errors(P)
    end).

%% Backoff: base 50 ms, cap 400 ms. The server is killed; each connection
%% retries after random waits in [0, min(cap, base * 2^n)], n counting the
%% failures in a row, and is back once a server listens on the port again;
%% a message delivered resets n.
server_back(S) ->
    Ts = [{<<"ws">>, 66}, {<<"sse">>, 67}, {<<"poll">>, 68}],
    with_page(S, "", fun(P) ->
        [connect(P, T, T, U, "{\"backoffBase\":50,\"backoffCap\":400}") || {T, U} <- Ts],
        [wait_status(P, T, fun(St) -> count_state(<<"open">>, St) >= 1 end, open) || {T, _} <- Ts],
        ok = httpdtest_os:signal(S, "KILL"),
        {ok, _, _} = httpdtest_os:wait_exit(S, 5000),
        %% Six failures each: waits of at most 50, 100, 200, 400, 400, 400 ms.
        [wait_status(P, T, fun(St) -> count_state(<<"waiting">>, St) >= 6 end, six_waits)
         || {T, _} <- Ts],
        S2 = start_on(port_of(S)),
        try
            [wait_status(P, T, fun(St) -> count_state(<<"open">>, St) >= 2 end, open_again)
             || {T, _} <- Ts],
            [send(S2, {U, <<"back">>}) || {_, U} <- Ts],
            [?assertMatch({T, [#{<<"data">> := <<"back">>}]}, {T, wait_msgs(P, T, 1)})
             || {T, _} <- Ts],
            Waits = [{T, waits(P, T)} || {T, _} <- Ts],
            [?assertEqual({T, lists:seq(0, length(W) - 1)}, {T, [N || {N, _} <- W]})
             || {T, W} <- Waits],
            All = lists:append([W || {_, W} <- Waits]),
            [?assert(D >= 0 andalso D =< min(400, 50 bsl N)) || {N, D} <- All],
            ?assert(length(lists:usort([D || {_, D} <- All])) > 1),
            %% Full jitter, not [bound/2, bound]: of 18 or more waits, all in
            %% the upper half has odds of 2^-18.
            ?assert(lists:any(fun({N, D}) -> 2 * D < min(400, 50 bsl N) end, All)),
            %% A stream that delivered something starts afresh at n = 0.
            bounce(S2),
            %% (the first wait after it: a retry that fails in turn may
            %% already have followed)
            [?assertMatch({T, {0, _}},
                          {T, lists:nth(length(W) + 1, wait_status_waits(P, T, length(W) + 1))})
             || {T, W} <- Waits, T =/= <<"poll">>]
        after
            httpdtest_server:stop_server(S2)
        end,
        no_script_errors(P)
    end).

%% A kick says "do not come back": each transport's connection ends with
%% status "ended" (reason kicked) and schedules no retry.
kicked(S) ->
    with_page(S, "", fun(P) ->
        Ts = [{<<"sse">>, 70}, {<<"ws">>, 71}, {<<"poll">>, 72}],
        [connect(P, T, T, U, "{}") || {T, U} <- Ts],
        [wait_status(P, T, fun(St) -> count_state(<<"open">>, St) >= 1 end, open) || {T, _} <- Ts],
        [send(S, {kick, U}) || {_, U} <- Ts],
        [begin
             St = wait_status(P, T, fun(St) -> count_state(<<"ended">>, St) >= 1 end, ended),
             ?assertMatch({T, #{<<"state">> := <<"ended">>, <<"detail">> := <<"kicked">>}},
                          {T, lists:last(St)}),
             ?assertEqual({T, 0}, {T, count_state(<<"waiting">>, St)})
         end || {T, _} <- Ts],
        no_script_errors(P)
    end).

%% Each connection's token callback gives a token valid 2-3 s, then one
%% valid a minute: the stream opened with the first is ended at its exp
%% and the client reconnects with the second, resuming. A connection with
%% a fixed query and no callback stops at the expired ending.
token_expiry(S, File) ->
    {ok, Secret0} = file:read_file(File),
    Secret = string:trim(Secret0, trailing, "\n"),
    Tok = fun(U, E) ->
                  Mac = crypto:mac(hmac, sha256, Secret,
                                   [integer_to_list(U), ":", integer_to_list(E)]),
                  Sig = [io_lib:format("~2.16.0b", [X]) || <<X>> <= Mac],
                  iolist_to_binary(["exp=", integer_to_list(E), "&sig=", Sig])
          end,
    Ts = [{<<"sse">>, 73}, {<<"ws">>, 74}, {<<"poll">>, 75}],
    with_page(S, "", fun(P) ->
        Exp = erlang:system_time(second) + 3,
        [connect(P, T, T, U, json_tokens([Tok(U, Exp), Tok(U, Exp + 60)])) || {T, U} <- Ts],
        connect(P, <<"fixed">>, <<"sse">>, 76,
                binary_to_list(iolist_to_binary(["{\"query\":\"", Tok(76, Exp), "\"}"]))),
        [wait_status(P, T, fun(St) -> count_state(<<"open">>, St) >= 1 end, open)
         || {T, _} <- [{<<"fixed">>, 76} | Ts]],
        [send(S, {U, m(1)}) || {_, U} <- Ts],
        [wait_msgs(P, T, 1) || {T, _} <- Ts],
        %% Past exp: ended, and back with the fresh token.
        [wait_status(P, T, fun(St) -> count_state(<<"open">>, St) >= 2 end, open_again)
         || {T, _} <- Ts],
        ?assert(erlang:system_time(second) >= Exp),
        [send(S, {U, m(2)}) || {_, U} <- Ts],
        [?assertMatch({T, [_, #{<<"data">> := <<"m2">>}]}, {T, wait_msgs(P, T, 2)})
         || {T, _} <- Ts],
        St = wait_status(P, <<"fixed">>, fun(St) -> count_state(<<"ended">>, St) >= 1 end, ended),
        ?assertMatch(#{<<"state">> := <<"ended">>, <<"detail">> := <<"expired">>}, lists:last(St)),
        ?assertEqual(0, count_state(<<"waiting">>, St)),
        no_script_errors(P)
    end).

json_tokens(Qs) ->
    binary_to_list(iolist_to_binary(["{\"tokens\":[", lists:join(",", [["\"", Q, "\""] || Q <- Qs]),
                                     "]}"])).

%% A secret file for the token case (mode 600, as the server wants).
token_secret() ->
    File = filename:join([httpdtest_os:repo_root(), "build", "tests", "auth",
                          httpdtest_os:unique("browser_secret")]),
    ok = filelib:ensure_dir(File),
    ok = file:write_file(File, [binary:encode_hex(crypto:strong_rand_bytes(16)), "\n"]),
    ok = file:change_mode(File, 8#600),
    File.

%% The server ends every stream with the drain ending and at once takes
%% new ones again: the clients come back.
bounce(S) ->
    send(S, {drain, 0}),
    send(S, {drain, cancel}).

%% {Attempt, Delay} of each "waiting" status of Tag so far.
waits(P, Tag) ->
    [{N, D} || #{<<"state">> := <<"waiting">>, <<"attempt">> := N, <<"delay">> := D}
                   <- tagged(P, <<"status">>, Tag)].

wait_status_waits(P, Tag, N) ->
    wait_status(P, Tag, fun(St) -> count_state(<<"waiting">>, St) >= N end, {waits, N}),
    waits(P, Tag).

%% A server on Port (that of one killed), started as start_server would,
%% without an admin listener; ready once it answers and its C-node does.
start_on(Port) ->
    Name = httpdtest_os:unique("c1back"),
    Node = list_to_atom(Name ++ "@localhost"),
    Args = ["--listen", "127.0.0.1:" ++ integer_to_list(Port), "--admin-listen", "",
            "--name", atom_to_list(Node), "--cookie", httpdtest_os:cookie(),
            "--master", httpdtest_os:unique("httpdmaster_absent") ++ "@localhost"],
    Log = httpdtest_os:log_path(Name),
    Proc = httpdtest_os:spawn_os(httpdtest_server:server_exe(), Args, Log, Name),
    S = #{proc => Proc, node => Node, port => Port, admin_port => none, log => Log},
    Head = "HEAD /test/1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    try
        httpdtest_wait:wait_until(
          fun() ->
                  httpdtest_os:proc_status(S) =:= running orelse
                      erlang:error({server_exited, httpdtest_os:log_tail(Log)}),
                  try maps:get(status, httpdtest_http:http_request(Port, Head)) =:= 200
                          andalso net_kernel:connect_node(Node)
                  catch _:_ -> false
                  end
          end, 15000, {server_back_on, Port}),
        S
    catch C:E:St ->
            httpdtest_server:stop_server(S),
            erlang:raise(C, E, St)
    end.

m(I) -> <<"m", (integer_to_binary(I))/binary>>.

send_range(S, Uid, From, To) -> [send(S, {Uid, m(I)}) || I <- lists:seq(From, To)], ok.

epoch(Id) -> hd(binary:split(Id, <<":">>)).

count(Kind, Log) -> length([x || #{<<"kind">> := K} <- Log, K =:= Kind]).

wait_messages(P, N) ->
    httpdtest_wait:wait_until(
      fun() ->
              M = [E || E = #{<<"ev">> := <<"message">>} <- events(P)],
              length(M) >= N orelse {false, M}
      end, ?T, {messages_shown, N}).

wait_log(P, Pred, What) ->
    httpdtest_wait:wait_until(
      fun() ->
              L = [E || E = #{<<"ev">> := <<"log">>} <- events(P)],
              Pred(L) orelse {false, L}
      end, ?T, What).

%% "connect TAG TRANSPORTS UID OPTIONS": a connection of the page's client.
connect(P, Tag, Transports, Uid, Json) ->
    command(P, ["connect ", Tag, " ", Transports, " ", integer_to_list(Uid), " ", Json]).

tagged(P, Ev, Tag) -> [E || E = #{<<"ev">> := E1, <<"tag">> := T} <- events(P), E1 =:= Ev, T =:= Tag].

%% The first N messages of the connection Tag.
wait_msgs(P, Tag, N) ->
    httpdtest_wait:wait_until(
      fun() ->
              M = tagged(P, <<"msg">>, Tag),
              case length(M) >= N of
                  true -> {true, lists:sublist(M, N)};
                  false -> {false, M}
              end
      end, ?T, {messages, Tag, N}).

%% Waits until Pred(the statuses of Tag so far) holds; returns them.
wait_status(P, Tag, Pred, What) ->
    httpdtest_wait:wait_until(
      fun() ->
              St = tagged(P, <<"status">>, Tag),
              case Pred(St) of
                  true -> {true, St};
                  false -> {false, St}
              end
      end, ?T, {Tag, What}).

count_state(State, Sts) -> length([x || #{<<"state">> := S} <- Sts, S =:= State]).

no_script_errors(P) ->
    ?assertEqual([], [E || E = #{<<"ev">> := Ev} <- events(P),
                           Ev =:= <<"pageerror">> orelse Ev =:= <<"fatal">>]).

%% The page's rows as they are now, in the page's order.
dump(P) ->
    Before = length(dumps(P)),
    command(P, "dump"),
    httpdtest_wait:wait_until(
      fun() ->
              D = dumps(P),
              length(D) > Before andalso {true, lists:last(D)}
      end, ?T, page_dump).

dumps(P) -> [E || E = #{<<"ev">> := <<"dump">>} <- events(P)].

%%% ---------------------------------------------------------------- the browser

%% Fun(Page) with the demo page at Query open in Chromium; the browser and
%% its driver end after, also when Fun fails.
with_page(S, Query, Fun) ->
    P = open_page("http://127.0.0.1:" ++ integer_to_list(port_of(S)) ++ "/" ++ Query),
    try
        httpdtest_wait:wait_until(
          fun() ->
                  Evs = events(P),
                  case [E || E = #{<<"ev">> := <<"fatal">>} <- Evs] of
                      [] -> lists:any(fun(#{<<"ev">> := E}) -> E =:= <<"ready">> end, Evs)
                                orelse {false, Evs};
                      Fatal -> erlang:error({page_failed, Fatal})
                  end
          end, 60000, page_ready),
        Fun(P)
    after
        httpdtest_page:close(P)
    end.

%% tests/js/browser_page.mjs at Url (httpdtest_page).
open_page(Url) -> httpdtest_page:open("browser_page.mjs", [Url]).
