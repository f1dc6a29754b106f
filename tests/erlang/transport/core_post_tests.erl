%% SPDX-License-Identifier: Apache-2.0
%% POST /send/N: a client on SSE, long-poll or chunked talks back over
%% plain HTTP. What it posts reaches the --inbox process (httpdcnode_inbox
%% calling inbox_test_handler, which passes each message to the test) in
%% order, named by the ?conn= it gave (the id its SSE or chunked stream got
%% with ?conn=1); every refusal has its code and its counter. Real server,
%% real master node, HTTP on raw sockets.
-module(core_post_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [stats/1, wait_stat/4, port_of/1, node_of/1]).
-import(httpdtest_wait, [wait_until/3]).
-import(httpdtest_inbox, [split_recv/3, take/2, collect/1, nothing_more/0]).

%% For the tests of replies through the application (httpdcnode_reply_tests).
-export([connect/1, post/4, open_sse/2, open_chunked/2, read_until/2]).

-define(T, 10000).
-define(ORIGIN, "http://a.example").

post_test_() ->
    [inbox_test("accepted in order, with and without conn=; {conn, Conn, Data} reaches that "
                "SSE (and chunked) stream; types, sizes, CORS and hostile bodies",
                ["--client-rate", "100000", "--max-client-message", "100",
                 "--allow-origin", ?ORIGIN, "--header-timeout", "2"], #{}, fun accepted/2),
     inbox_test("--client-rate: past the burst 429, a named conn has its own bucket",
                ["--client-rate", "10"], #{}, fun rate/2),
     inbox_test("Erlang not keeping up: 503 with Retry-After, then accepted again, nothing lost",
                ["--client-rate", "100000", "--max-client-message", "32768"], #{},
                fun busy/2),
     inbox_test("with --auth-secret-file: no token 403, a good one 202, another uid's 403",
                [], #{auth => true}, fun auth/2),
     inbox_test("Chromium: conn.send on an SSE connection posts with its conn id, the reply "
                "comes back by onreply; past --max-client-message it rejects 'too_big'",
                ["--max-client-message", "100"], #{}, fun browser/2),
     httpdtest_server:server_test("without --inbox: 404, counted", #{}, 30,
                                  fun no_inbox/1),
     httpdtest_server:server_test("--inbox but no master linked: 503, counted",
                                  #{extra_args => ["--inbox", "inbox"]}, 30,
                                  fun no_master/1)].

%% A master with an inbox registered as 'inbox' that sends to this test's
%% process, and a server started with --inbox inbox and Args (core_inbox_tests).
inbox_test(Label, Args, Opts, Fun) ->
    {Label,
     {setup,
      fun() ->
              M = httpdtest_master:start_master(),
              Node = httpdtest_master:master_node(M),
              Sink = list_to_atom(httpdtest_os:unique("post_sink")),
              httpdtest_master:start_sink(Sink),
              {ok, Inbox} = httpdtest_inbox:start_inbox(Node, inbox_test_handler,
                                                        {Sink, node()}),
              {Secret, File, AuthArgs} = auth_args(Opts),
              S = httpdtest_server:start_server(
                    #{master => M, extra_args => ["--inbox", "inbox" | Args ++ AuthArgs]}),
              httpdtest_master:wait_master_sees(M, node_of(S), ?T),
              %% the master sees the link before the C-node counts it as a master's
              httpdtest_server:wait_stat(S, erl_masters, fun(V) -> V =:= 1 end, ?T),
              {M, S, Inbox, Sink, Secret, File}
      end,
      fun({M, S, _, Sink, _, File}) ->
              httpdtest_inbox:stop_all(M, S, Sink),
              File =/= none andalso file:delete(File)
      end,
      fun({M, S, Inbox, Sink, Secret, _}) ->
              httpdtest_inbox:sink_test(
                S, Sink, 120, fun() -> Fun(S, #{master => M, inbox => Inbox, secret => Secret}) end)
      end}}.

auth_args(#{auth := true}) ->
    Secret = binary:encode_hex(crypto:strong_rand_bytes(24)),
    File = filename:join([httpdtest_os:repo_root(), "build", "tests", "auth",
                          httpdtest_os:unique("post_secret")]),
    ok = filelib:ensure_dir(File),
    ok = file:write_file(File, <<Secret/binary, "\n">>),
    ok = file:change_mode(File, 8#600),
    {Secret, File, ["--auth-secret-file", File]};
auth_args(_) ->
    {none, none, []}.

%%% ---------------------------------------------------------------- cases

accepted(S, _) ->
    CNode = node_of(S),
    %% Without conn=: Conn 0; one keep-alive connection, in order.
    P = connect(S),
    [?assertMatch({202, _, _}, post(P, "/send/7", text, <<"m", (integer_to_binary(I))/binary>>))
     || I <- lists:seq(1, 50)],
    ?assertMatch({202, _, _}, post(P, "/send/7", binary, <<255, 0, 1>>)),
    ?assertMatch({202, _, _}, post(P, "/send/7", "text/plain; charset=utf-8", <<"é"/utf8>>)),
    Got = collect(52),
    ?assertEqual([{7, {CNode, 0}, <<"m", (integer_to_binary(I))/binary>>} || I <- lists:seq(1, 50)]
                 ++ [{7, {CNode, 0}, {binary, <<255, 0, 1>>}}, {7, {CNode, 0}, <<"é"/utf8>>}], Got),
    %% An SSE stream that asks for its id gets it first; a POST naming it
    %% arrives with that Conn, and Erlang's reply reaches that stream only.
    {Sse, Id} = open_sse(S, 7),
    Other = open_sse_plain(S, 7),
    Path = "/send/7?conn=" ++ integer_to_list(Id),
    ?assertMatch({202, _, _}, post(P, Path, text, <<"from sse">>)),
    [{7, Conn, <<"from sse">>}] = collect(1),
    ?assertEqual({CNode, Id}, Conn),
    ?assertEqual({ok, 1}, httpdcnode:reply_sync(Conn, <<"just you\ntwo lines">>)),
    ?assertEqual(<<"event: reply\ndata: just you\ndata: two lines\n\n">>,
                 read_until(Sse, <<"\n\n">>)),
    ok = httpdcnode:reply(Conn, <<255, 0>>),
    ?assertEqual(<<"event: reply_base64\ndata: /wA=\n\n">>, read_until(Sse, <<"\n\n">>)),
    ?assertEqual({error, timeout}, gen_tcp:recv(Other, 0, 300)),
    %% A chunked stream's id is the chunk after its welcome.
    {Chunked, CId} = open_chunked(S, 7),
    ?assertNotEqual(Id, CId),
    ?assertMatch({202, _, _}, post(P, "/send/7?conn=" ++ integer_to_list(CId), text, <<"c">>)),
    [{7, {CNode, CId}, <<"c">>}] = collect(1),
    ?assertEqual({ok, 1}, httpdcnode:reply_sync({CNode, CId}, <<"to chunked">>)),
    ?assertEqual(<<"a\r\nto chunked\r\n">>, read_until(Chunked, <<"to chunked\r\n">>)),
    %% A conn of another uid, an unknown one and a closed one: all the same
    %% answer, so that a client cannot tell another uid's live conn.
    {404, _, Refused} = post(P, "/send/8?conn=" ++ integer_to_list(Id), text, <<"x">>),
    ?assertEqual({404, Refused}, status_body(post(P, "/send/7?conn=99999999", text, <<"x">>))),
    ?assertEqual({404, Refused}, status_body(post(P, "/send/7?conn=abc", text, <<"x">>))),
    gen_tcp:close(Chunked),
    wait_stat(S, streams_open, fun(V) -> V =:= 2 end, ?T),
    ?assertEqual({404, Refused},
                 status_body(post(P, "/send/7?conn=" ++ integer_to_list(CId), text, <<"x">>))),
    %% Types: 415 for another or none, 400 for text that is not UTF-8.
    ?assertMatch({415, _, _}, post(P, "/send/7", "application/json", <<"{}">>)),
    ?assertMatch({415, _, _}, post(P, "/send/7", none, <<"x">>)),
    ?assertMatch({400, _, _}, post(P, "/send/7", text, <<255, 254>>)),
    %% Sizes: --max-client-message 100 at the limit and one past it.
    At = binary:copy(<<"x">>, 100),
    ?assertMatch({202, _, _}, post(P, "/send/7", binary, At)),
    [{7, _, {binary, At}}] = collect(1),
    ?assertMatch({413, _, _}, post(P, "/send/7", binary, binary:copy(<<"x">>, 101))),
    %% Other methods 405.
    ?assertMatch({405, _, _}, request(P, ["GET /send/7 HTTP/1.1\r\nHost: x\r\n\r\n"])),
    gen_tcp:close(P),
    %% CORS: the preflight of an allowed origin, a disallowed one's 403.
    Pre = connect(S),
    {204, H, _} = request(Pre, ["OPTIONS /send/7 HTTP/1.1\r\nHost: x\r\nOrigin: ", ?ORIGIN,
                                "\r\nAccess-Control-Request-Method: POST\r\n\r\n"]),
    ?assertEqual(?ORIGIN, hdr(H, "access-control-allow-origin")),
    ?assertEqual("POST", hdr(H, "access-control-allow-methods")),
    ?assertEqual("Content-Type", hdr(H, "access-control-allow-headers")),
    ?assertNotEqual(undefined, hdr(H, "access-control-max-age")),
    ?assertMatch({403, _, _}, request(Pre, ["OPTIONS /send/7 HTTP/1.1\r\nHost: x\r\n"
                                            "Origin: http://evil.example\r\n\r\n"])),
    ?assertMatch({403, _, _}, post(Pre, "/send/7", text, <<"x">>,
                                   ["Origin: http://evil.example"])),
    {202, H2, _} = post(Pre, "/send/7", text, <<"cors">>, ["Origin: " ?ORIGIN]),
    ?assertEqual(?ORIGIN, hdr(H2, "access-control-allow-origin")),
    [{7, _, <<"cors">>}] = collect(1),
    gen_tcp:close(Pre),
    %% A Content-Length of 1 GB: 413 at once, before any of the body.
    Big = connect(S),
    ok = gen_tcp:send(Big, ["POST /send/7 HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
                            "Content-Length: 1073741824\r\n\r\n"]),
    ?assertMatch({413, _, _}, response(Big)),
    gen_tcp:close(Big),
    %% A body that trickles: the request's --header-timeout (2 s) ends it.
    Slow = connect(S),
    ok = gen_tcp:send(Slow, ["POST /send/7 HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
                             "Content-Length: 60\r\n\r\n"]),
    T0 = erlang:monotonic_time(millisecond),
    Trickler = spawn_link(fun() -> trickle(Slow, 60) end),
    ?assertEqual({error, closed}, gen_tcp:recv(Slow, 0, ?T)),
    ?assert(erlang:monotonic_time(millisecond) - T0 < 6000),
    unlink(Trickler),
    exit(Trickler, kill),
    wait_stat(S, http_header_timeout, fun(V) -> V >= 1 end, ?T),
    nothing_more(),
    ?assertMatch(#{post_in := 56, client_in := 56, post_bad_conn := 4, post_bad_type := 3,
                   post_too_big := 1, http_bad_origin := 2, http_bad_method := 1,
                   post_rate := 0, post_busy := 0, conn_sent := 3}, stats(S)),
    gen_tcp:close(Sse),
    gen_tcp:close(Other).

%% One byte every 300 ms, at most N.
trickle(_, 0) -> ok;
trickle(Sock, N) ->
    case gen_tcp:send(Sock, <<"x">>) of
        ok -> timer:sleep(300), trickle(Sock, N - 1);
        _ -> ok
    end.

rate(S, _) ->
    %% --client-rate 10: a burst of 10 / 4 + 8 = 10, then 10 a second.
    P = connect(S),
    Codes = [element(1, post(P, "/send/4", text, integer_to_binary(I))) || I <- lists:seq(1, 30)],
    Ok = length([C || C <- Codes, C =:= 202]),
    ?assert(Ok >= 10 andalso Ok < 30),
    ?assertEqual(lists:duplicate(Ok, 202), lists:sublist(Codes, Ok)),
    {429, H, _} = post(P, "/send/4", text, <<"more">>),
    ?assertNotEqual(undefined, hdr(H, "retry-after")),
    ?assertEqual([integer_to_binary(I) || I <- lists:seq(1, Ok)], [D || {_, _, D} <- collect(Ok)]),
    %% A stream's conn has a bucket of its own: the peer's is spent, it is not.
    {Sse, Id} = open_sse(S, 4),
    ?assertMatch({202, _, _}, post(P, "/send/4?conn=" ++ integer_to_list(Id), text, <<"own">>)),
    [{4, _, <<"own">>}] = collect(1),
    #{post_rate := Refused} = stats(S),
    ?assertEqual(30 - Ok + 1, Refused),
    gen_tcp:close(P),
    gen_tcp:close(Sse).

busy(S, #{master := M, inbox := Inbox}) ->
    Node = httpdtest_master:master_node(M),
    Suspender = httpdtest_inbox:suspend(Node, Inbox),
    %% 32 KB messages (past evhttp's default 8 KB bound): the master takes
    %% at most 256 unacknowledged (fewer while its socket is full), then
    %% 1 MB waits in the server, then 503.
    P = connect(S),
    Msg = fun(K) -> <<K:32, (binary:copy(<<"z">>, 32764))/binary>> end,
    {Accepted, H} = post_until_busy(P, Msg, 1, 1000),
    ?assert(Accepted >= 32),
    ?assertNotEqual(undefined, hdr(H, "retry-after")),
    ?assertMatch(#{post_busy := 1}, stats(S)),
    Suspender ! resume,
    Got = collect(Accepted),
    ?assertEqual([{binary, Msg(K)} || K <- lists:seq(1, Accepted)], [D || {_, _, D} <- Got]),
    %% Caught up: accepted again.
    wait_until(fun() -> element(1, post(P, "/send/5", binary, Msg(0))) =:= 202 end, ?T,
               "accepted again once Erlang caught up"),
    gen_tcp:close(P).

%% Posts Msg(K) for K = 1.. until a 503: {messages accepted, the 503's headers}.
post_until_busy(_, _, K, Max) when K > Max -> erlang:error({never_busy, Max});
post_until_busy(P, Msg, K, Max) ->
    case post(P, "/send/5", binary, Msg(K)) of
        {202, _, _} -> post_until_busy(P, Msg, K + 1, Max);
        {503, H, _} -> {K - 1, H}
    end.

auth(S, #{secret := Secret}) ->
    P = connect(S),
    ?assertMatch({403, _, _}, post(P, "/send/6", text, <<"no token">>)),
    Exp = erlang:system_time(second) + 600,
    ?assertMatch({202, _, _}, post(P, "/send/6?" ++ token(Secret, 6, Exp), text, <<"ok">>)),
    [{6, _, <<"ok">>}] = collect(1),
    ?assertMatch({403, _, _}, post(P, "/send/7?" ++ token(Secret, 6, Exp), text, <<"x">>)),
    nothing_more(),
    ?assertMatch(#{auth_missing := 1, auth_bad := 1, post_in := 1}, stats(S)),
    gen_tcp:close(P).

browser(S, _) ->
    CNode = node_of(S),
    P = httpdtest_page:open("browser_page.mjs",
                            ["http://127.0.0.1:" ++ integer_to_list(port_of(S)) ++ "/"]),
    try
        page_wait(P, fun(E) -> maps:get(<<"ev">>, E) =:= <<"ready">> end, 60000, page_ready),
        httpdtest_page:command(P, "connect a sse 31"),
        page_wait(P, fun(E) -> E =:= maps:merge(E, #{<<"ev">> => <<"status">>, <<"tag">> => <<"a">>,
                                                      <<"state">> => <<"open">>}) end, ?T, sse_open),
        %% The stream's conn event follows its open: until it came, Conn is 0.
        Conn = wait_until(fun() ->
                                  httpdtest_page:command(P, "send a hello"),
                                  case collect(1) of
                                      [{31, {CNode, Id}, <<"hello">>}] when Id =/= 0 -> {true, {CNode, Id}};
                                      Other -> {false, Other}
                                  end
                          end, ?T, posted_with_conn),
        ?assertEqual({ok, 1}, httpdcnode:reply_sync(Conn, <<"back to you">>)),
        page_wait(P, fun(E) -> E =:= #{<<"ev">> => <<"reply">>, <<"tag">> => <<"a">>,
                                       <<"data">> => <<"back to you">>} end, ?T, reply),
        httpdtest_page:command(P, "send a " ++ lists:duplicate(101, $x)),
        page_wait(P, fun(E) -> E =:= #{<<"ev">> => <<"sent">>, <<"tag">> => <<"a">>, <<"ok">> => false,
                                       <<"reason">> => <<"too_big">>, <<"status">> => 413} end,
                  ?T, too_big),
        ?assertMatch(#{post_too_big := 1}, stats(S))
    after
        httpdtest_page:close(P)
    end.

%% Waits for an event of the page that Pred takes.
page_wait(P, Pred, Timeout, What) ->
    wait_until(fun() ->
                       Evs = httpdtest_page:events(P),
                       case [E || E = #{<<"ev">> := <<"fatal">>} <- Evs] of
                           [] -> lists:any(Pred, Evs) orelse {false, Evs};
                           Fatal -> erlang:error({page_failed, Fatal})
                       end
               end, Timeout, What).

no_inbox(S) ->
    P = connect(S),
    {404, _, Body} = post(P, "/send/5", text, <<"x">>),
    ?assertNotEqual(nomatch, binary:match(Body, <<"--inbox">>)),
    ?assertMatch(#{post_no_inbox := 1, client_in := 0}, stats(S)),
    gen_tcp:close(P).

no_master(S) ->
    P = connect(S),
    {503, H, _} = post(P, "/send/5", text, <<"x">>),
    ?assertNotEqual(undefined, hdr(H, "retry-after")),
    ?assertMatch(#{post_busy := 1, client_in := 0}, stats(S)),
    gen_tcp:close(P).

%%% ---------------------------------------------------------------- helpers

token(Secret, Uid, Exp) ->
    Sig = binary_to_list(string:lowercase(binary:encode_hex(
                crypto:mac(hmac, sha256, Secret,
                           [integer_to_list(Uid), ":", integer_to_list(Exp)])))),
    "exp=" ++ integer_to_list(Exp) ++ "&sig=" ++ Sig.

connect(S) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S), [binary, {active, false}]),
    put({buf, Sock}, <<>>),
    Sock.

post(Sock, Path, Type, Body) -> post(Sock, Path, Type, Body, []).

post(Sock, Path, Type, Body, Headers) ->
    TypeLine = case Type of
                   text -> ["Content-Type: text/plain\r\n"];
                   binary -> ["Content-Type: application/octet-stream\r\n"];
                   none -> [];
                   T -> ["Content-Type: ", T, "\r\n"]
               end,
    request(Sock, ["POST ", Path, " HTTP/1.1\r\nHost: x\r\n", TypeLine,
                   [[H, "\r\n"] || H <- Headers],
                   "Content-Length: ", integer_to_list(byte_size(Body)), "\r\n\r\n", Body]).

request(Sock, Bytes) ->
    ok = gen_tcp:send(Sock, Bytes),
    response(Sock).

%% {Status, [{lowercase name, value}], Body} of a Content-Length response.
response(Sock) ->
    Head = read_until(Sock, <<"\r\n\r\n">>),
    [Status | Lines] = binary:split(Head, <<"\r\n">>, [global, trim_all]),
    [_, Code | _] = binary:split(Status, <<" ">>, [global]),
    H = [begin
             [N, V] = binary:split(L, <<":">>),
             {string:lowercase(binary_to_list(N)), string:trim(binary_to_list(V))}
         end || L <- Lines],
    Len = list_to_integer(proplists:get_value("content-length", H, "0")),
    {binary_to_integer(Code), H, take(Sock, Len)}.

hdr(H, Name) -> proplists:get_value(Name, H, undefined).

status_body({Code, _, Body}) -> {Code, Body}.

%% GET /sse/Uid?conn=1: the socket, past the head and the conn event, and the id.
open_sse(S, Uid) ->
    Sock = open_get(S, "/sse/" ++ integer_to_list(Uid) ++ "?conn=1"),
    <<"retry: ", _/binary>> = read_until(Sock, <<"\n\n">>),
    Ev = read_until(Sock, <<"\n\n">>),
    {match, [Id]} = re:run(Ev, <<"^event: conn\ndata: \\{\"conn\":\"([0-9]+)\"\\}\n\n$">>,
                           [{capture, all_but_first, binary}]),
    {Sock, binary_to_integer(Id)}.

%% The same stream without ?conn=1: no conn event.
open_sse_plain(S, Uid) ->
    Sock = open_get(S, "/sse/" ++ integer_to_list(Uid)),
    <<"retry: ", _/binary>> = read_until(Sock, <<"\n\n">>),
    ?assertEqual({error, timeout}, gen_tcp:recv(Sock, 0, 200)),
    Sock.

%% GET /test/Uid?conn=1: the chunk after the welcome holds the id.
open_chunked(S, Uid) ->
    Sock = open_get(S, "/test/" ++ integer_to_list(Uid) ++ "?conn=1"),
    _Welcome = read_until(Sock, <<"\n\r\n">>),
    _Size = read_until(Sock, <<"\r\n">>),
    Json = read_until(Sock, <<"\r\n">>),
    {match, [Id]} = re:run(Json, <<"^\\{\"conn\":\"([0-9]+)\"\\}\r\n$">>,
                           [{capture, all_but_first, binary}]),
    {Sock, binary_to_integer(Id)}.

open_get(S, Path) ->
    Sock = connect(S),
    ok = gen_tcp:send(Sock, ["GET ", Path, " HTTP/1.1\r\nHost: x\r\n\r\n"]),
    Head = read_until(Sock, <<"\r\n\r\n">>),
    ?assertMatch(<<"HTTP/1.1 200 ", _/binary>>, Head),
    Sock.

%% Everything up to and including Sep (the head: up to it, without it).
read_until(Sock, <<"\r\n\r\n">> = Sep) ->
    {Before, After} = split_recv(Sock, Sep, get({buf, Sock})),
    put({buf, Sock}, After),
    Before;
read_until(Sock, Sep) ->
    {Before, After} = split_recv(Sock, Sep, get({buf, Sock})),
    put({buf, Sock}, After),
    <<Before/binary, Sep/binary>>.

