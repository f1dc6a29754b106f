%% SPDX-License-Identifier: Apache-2.0
%% The front door: Debian's nginx in front of two C-nodes, run with
%% examples/nginx.conf.example itself, rendered with this test's ports and
%% paths (its placeholders) into a temporary directory: TLS with a
%% self-signed certificate made here, HTTP/2 towards the clients, HTTP/1.1
%% to the C-nodes, uids spread over the two by a consistent hash.
%% Each case starts two servers and nginx (nginx -c FILE -p DIR -g 'daemon
%% off; master_process off;': one process, this test's, stopped after) and
%% reaches them only through nginx: curl over HTTP/2 (-k), the npm "ws"
%% client over wss://, headless Chromium. Which C-node a stream is on is
%% read from each server's /stats (streams_total, streams_open).
%% The client messages' case has a master too (an inbox, a presence
%% process), the C-nodes --trusted-proxy 127.0.0.1 (nginx's address as they
%% see it), and clients on other loopback addresses (curl --interface
%% 127.0.0.N), so that each is a client of its own to nginx.
%% Without nginx every case fails, saying so (scripts/install-deps.sh
%% installs it). $HTTPDTEST_NGINX names another nginx binary.
-module(proxy_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [send/2, stats/1]).
-import(httpdtest_os, [scaled/1, unique/1]).
-import(httpdtest_wait, [wait_until/3]).

-define(T, 10000).

proxy_test_() ->
    [proxy_test("chunked /test/N through nginx, over HTTP/2 and HTTP/1.1: each message as "
                "it is sent, the end passed on", #{}, 60, fun chunked/1),
     proxy_test("SSE over HTTP/2: unbuffered events with ids, the heartbeat's comments "
                "pass", #{heartbeat => 1}, 60, fun sse/1),
     proxy_test("WebSocket through nginx (wss://, upgrade passed): the subprotocol, frames, "
                "pings answered, kick closes with 4001 (do not come back)", #{heartbeat => 1}, 60, fun websocket/1),
     proxy_test("long-poll through nginx: a waiting poll answered by the next message, "
                "since= answered at once", #{}, 60, fun long_poll/1),
     proxy_test("a uid reaches the same C-node every time, over every transport; uids "
                "spread over both", #{}, 180, fun same_node/1),
     proxy_test("SSE resume through nginx after a client drop: Last-Event-ID gets what was "
                "missed, from the same C-node, then live", #{}, 60, fun resume/1),
     proxy_test("a C-node down: its uid goes to the other one, whose answer to the resume "
                "is a gap", #{}, 60, fun node_down/1),
     proxy_test("Chromium: one page, 10 EventSource streams at once over one HTTP/2 "
                "connection, each gets its message", #{}, 120, fun browser/1),
     {timeout, scaled(90),
      {"POST /send/N through nginx reaches the uid's C-node (its ?conn= stream there); "
       "--trusted-proxy: each client its own rate bucket and conn_up Peer by "
       "X-Forwarded-For, an address a client names for itself ignored",
       fun() -> with_inbox_proxy(fun posts/2) end}}].

proxy_test(Label, Opts, Timeout, Fun) ->
    {timeout, scaled(Timeout), {Label, fun() -> with_proxy(Opts, Fun) end}}.

%%% ---------------------------------------------------------------- cases

chunked(Env) ->
    chunked_over(Env, 601, "--http2", <<"HTTP/2 200">>),
    chunked_over(Env, 602, "--http1.1", <<"HTTP/1.1 200">>).

%% Each message must reach the client before the next is sent: a buffering
%% proxy would hold these few bytes back.
chunked_over(Env, Uid, Proto, Status) ->
    {C, S} = open_curl(Env, "/test/" ++ integer_to_list(Uid), [Proto]),
    Welcome = httpdtest_http:welcome(Uid),
    wait_body(C, fun(B) -> B =:= Welcome end, welcome),
    {Head, _} = head_body(output(C)),
    ?assertEqual(Status, binary:part(Head, 0, min(byte_size(Head), byte_size(Status)))),
    Proto =:= "--http1.1" andalso
        ?assertEqual(<<"chunked">>, head_header(Head, <<"transfer-encoding">>)),
    Lines = [<<"line ", (integer_to_binary(I))/binary, "\n">> || I <- lists:seq(1, 3)],
    lists:foldl(fun(L, Acc) ->
                        send(S, {Uid, L}),
                        Want = <<Acc/binary, L/binary>>,
                        wait_body(C, fun(B) -> B =:= Want end, {line, L}),
                        Want
                end, Welcome, Lines),
    %% The server ends the stream: nginx ends the client's, curl exits 0.
    send(S, {kick, Uid}),
    ?assertMatch({ok, 0, _}, httpdtest_os:wait_exit(C, ?T)),
    stop_curl(C).

sse(Env) ->
    Uid = 611,
    {C, S} = open_curl(Env, "/sse/611", []),
    wait_body(C, fun(B) -> binary:match(B, <<"retry: ">>) =/= nomatch end, retry_advice),
    {Head, _} = head_body(output(C)),
    ?assertMatch(<<"HTTP/2 200", _/binary>>, Head),
    ?assertEqual(<<"text/event-stream; charset=utf-8">>, head_header(Head, <<"content-type">>)),
    [begin
         send(S, {Uid, m(I)}),
         wait_events(C, I)
     end || I <- lists:seq(1, 3)],
    [{Id1, _} | _] = Evs = events(C),
    Epoch = epoch(Id1),
    ?assertEqual([{id(Epoch, I), m(I)} || I <- [1, 2, 3]], Evs),
    %% --heartbeat 1: a comment line a second, passed on as it comes.
    wait_body(C, fun(B) -> count_comments(B) >= 2 end, heartbeat_comments),
    stop_curl(C).

websocket(Env) ->
    Uid = 621,
    Before = totals(Env),
    W = ws_client(Env, "/ws/621", "ws+meta.httpdcnode"),
    try
        ?assertMatch(#{<<"protocol">> := <<"ws+meta.httpdcnode">>}, ws_expect(W, open)),
        S = opened_on(Env, Before),
        send(S, {Uid, <<"hello">>}),
        #{<<"binary">> := false, <<"data">> := <<"id: ", Id1:10/binary, "\n\nhello">>} =
            ws_expect(W, message),
        Epoch = epoch(Id1),
        ?assertEqual(id(Epoch, 1), Id1),
        send(S, {Uid, <<0, 255>>}),
        #{<<"binary">> := true, <<"data">> := B64} = ws_expect(W, message),
        ?assertEqual(<<"id: ", (id(Epoch, 2))/binary, "\n\n", 0, 255>>, base64:decode(B64)),
        %% Pings from the server reach the client, its pongs the server.
        ws_expect(W, ping),
        ws_expect(W, ping),
        ws_expect(W, ping),
        ?assertMatch(#{ws_dead := 0, ws_bad_frames := 0, streams_open := 1}, stats(S)),
        send(S, {kick, Uid}),
        ?assertMatch(#{<<"code">> := 4001}, ws_expect(W, close))
    after
        catch port_close(W)
    end.

long_poll(Env) ->
    Uid = 631,
    {C, S} = open_curl(Env, "/poll/631", []),
    %% It waits for the next message (the stream is open on S).
    ?assertEqual(running, httpdtest_os:proc_status(C)),
    send(S, {Uid, <<"p1">>}),
    ?assertMatch({ok, 0, _}, httpdtest_os:wait_exit(C, ?T)),
    {Head, Body} = head_body(output(C)),
    ?assertMatch(<<"HTTP/2 200", _/binary>>, Head),
    #{<<"messages">> := [#{<<"id">> := Id1, <<"data">> := <<"p1">>}], <<"gap">> := false,
      <<"next">> := Id1} = httpdtest_json:json_decode(Body),
    stop_curl(C),
    send(S, {Uid, <<"p2">>}),
    send(S, {Uid, <<"p3">>}),
    ack(S),
    {C2, S2} = open_curl(Env, "/poll/631?since=" ++ binary_to_list(Id1), []),
    ?assertEqual(node_name(S), node_name(S2)),
    ?assertMatch({ok, 0, _}, httpdtest_os:wait_exit(C2, ?T)),
    {_, Body2} = head_body(output(C2)),
    Epoch = epoch(Id1),
    ?assertMatch(#{<<"messages">> := [#{<<"data">> := <<"p2">>}, #{<<"data">> := <<"p3">>}],
                   <<"gap">> := false},
                 httpdtest_json:json_decode(Body2)),
    ?assertEqual(id(Epoch, 3), maps:get(<<"next">>, httpdtest_json:json_decode(Body2))),
    stop_curl(C2).

%% 16 uids, each opened and closed once per round; the rounds use SSE, the
%% chunked stream over HTTP/1.1, long-poll and WebSocket: every round puts
%% each uid on the node of the first.
same_node(Env) ->
    Uids = lists:seq(641, 656),
    Rounds = [fun(U) -> curl_on(Env, "/sse/" ++ U, []) end,
              fun(U) -> curl_on(Env, "/test/" ++ U, ["--http1.1"]) end,
              fun(U) -> curl_on(Env, "/poll/" ++ U, []) end,
              fun(U) -> ws_on(Env, "/ws/" ++ U) end],
    [First | Rest] = [[{U, Round(integer_to_list(U))} || U <- Uids] || Round <- Rounds],
    [?assertEqual(First, R) || R <- Rest],
    ?assertEqual([1, 2], lists:usort([I || {_, I} <- First])).

resume(Env) ->
    Uid = 661,
    {C1, S} = open_curl(Env, "/sse/661", []),
    [send(S, {Uid, m(I)}) || I <- lists:seq(1, 3)],
    [{Id1, _}, _, {Id3, _}] = wait_events(C1, 3),
    Epoch = epoch(Id1),
    %% The client drops; what is sent meanwhile waits in the uid's history
    %% on S.
    stop_curl(C1),
    httpdtest_server:wait_stat(S, streams_open, fun(V) -> V =:= 0 end, ?T),
    [send(S, {Uid, m(I)}) || I <- lists:seq(4, 6)],
    ack(S),
    {C2, S2} = open_curl(Env, "/sse/661", ["-H", "Last-Event-ID: " ++ binary_to_list(Id3)]),
    ?assertEqual(node_name(S), node_name(S2)),
    ?assertEqual([{id(Epoch, I), m(I)} || I <- [4, 5, 6]], wait_events(C2, 3)),
    send(S, {Uid, m(7)}),
    ?assertEqual([{id(Epoch, I), m(I)} || I <- [4, 5, 6, 7]], wait_events(C2, 4)),
    ?assertMatch(#{replays := 1, replayed := 3, replay_gaps := 0}, stats(S)),
    stop_curl(C2).

%% The C-node a uid is on dies; nginx sends the uid's resume to the other,
%% which has none of its history (another epoch): the client is told a gap
%% first, then gets the live messages of the node it is on now.
node_down(Env = #{nodes := Nodes}) ->
    Uid = 671,
    {C1, S} = open_curl(Env, "/sse/671", []),
    send(S, {Uid, m(1)}),
    [{Id1, _}] = wait_events(C1, 1),
    stop_curl(C1),
    ok = httpdtest_os:signal(S, "KILL"),
    {ok, _, _} = httpdtest_os:wait_exit(S, ?T),
    [Other] = [N || N <- Nodes, node_name(N) =/= node_name(S)],
    Before = maps:get(streams_total, stats(Other)),
    C2 = curl(Env, "/sse/671", ["-H", "Last-Event-ID: " ++ binary_to_list(Id1)]),
    httpdtest_server:wait_stat(Other, streams_total, fun(V) -> V =:= Before + 1 end, ?T),
    [Gap] = wait_raw_events(C2, 1),
    ?assertEqual(<<"gap">>, proplists:get_value(<<"event">>, Gap)),
    ?assertMatch(#{<<"last">> := Id1, <<"first">> := null},
                 httpdtest_json:json_decode(proplists:get_value(<<"data">>, Gap))),
    send(Other, {Uid, m(2)}),
    [_, Live] = wait_raw_events(C2, 2),
    ?assertEqual(m(2), proplists:get_value(<<"data">>, Live)),
    ?assertNotEqual(epoch(Id1), epoch(proplists:get_value(<<"id">>, Live))),
    stop_curl(C2).

%% Chromium allows 6 HTTP/1.1 connections per host: over HTTP/1.1 the 7th
%% to 10th EventSource would wait. Each message is sent to both C-nodes;
%% only the one holding the uid's stream delivers it.
browser(Env = #{nodes := Nodes}) ->
    Uids = lists:seq(681, 690),
    P = open_page(url(Env, "/"), Uids),
    try
        #{<<"protocol">> := <<"h2">>} = wait_page(P, fun(Evs) -> find(<<"ready">>, Evs) end,
                                                  page_ready, 60000),
        wait_page(P, fun(Evs) -> uids_of(<<"open">>, Evs) =:= Uids end, all_open, 20000),
        wait_until(fun() -> lists:sum([maps:get(streams_open, stats(S)) || S <- Nodes]) =:= 10
                   end, ?T, ten_streams_on_the_nodes),
        [send(S, {U, <<"to ", (integer_to_binary(U))/binary>>}) || S <- Nodes, U <- Uids],
        Evs = wait_page(P, fun(E) -> uids_of(<<"message">>, E) =:= Uids andalso {true, E} end,
                        all_messages, 20000),
        Msgs = [{U, D} || #{<<"ev">> := <<"message">>, <<"uid">> := U, <<"data">> := D} <- Evs],
        ?assertEqual([{U, <<"to ", (integer_to_binary(U))/binary>>} || U <- Uids], lists:sort(Msgs)),
        Sse = [R || R = #{<<"ev">> := <<"response">>, <<"url">> := Url} <- Evs,
                    binary:match(Url, <<"/sse/">>) =/= nomatch],
        ?assertEqual(10, length(Sse)),
        ?assertEqual([<<"h2">>], lists:usort([Pr || #{<<"protocol">> := Pr} <- Sse])),
        ?assertMatch([_], lists:usort([Cn || #{<<"connection">> := Cn} <- Sse])),
        ?assertEqual([], [E || E = #{<<"ev">> := Ev} <- Evs,
                               Ev =:= <<"pageerror">> orelse Ev =:= <<"fatal">>
                                   orelse Ev =:= <<"error">>])
    after
        httpdtest_page:close(P)
    end.

%% Uid 691's stream and posts, from clients at 127.0.0.2, .3 and .4.
posts(Env = #{nodes := Nodes}, Sink) ->
    Uid = 691,
    {C, S} = open_curl(Env, "/sse/691?conn=1", ["--interface", "127.0.0.2"]),
    Node = node_name(S),
    %% conn_up names the client nginx forwarded for (no port: it has none).
    {httpdcnode, Node, conn_up, Uid, Id, sse, Peer} = conn_up(Uid),
    ?assertEqual({{127, 0, 0, 2}, 0}, Peer),
    wait_body(C, fun(B) -> binary:match(B, <<"event: conn">>) =/= nomatch end, conn_event),
    [Conn] = [proplists:get_value(<<"data">>, E) || E <- raw_events(C),
                                                   proplists:get_value(<<"event">>, E) =:= <<"conn">>],
    #{<<"conn">> := IdText} = httpdtest_json:json_decode(Conn),
    ?assertEqual(Id, binary_to_integer(IdText)),
    %% The POST reaches the C-node of the stream it names, and its inbox.
    Path = "/send/691",
    ?assertEqual([202], posts_from(Env, "127.0.0.2", Path ++ "?conn=" ++ integer_to_list(Id),
                                   [], 1)),
    ?assertEqual({in, Uid, {Node, Id}, <<"m">>}, in_msg()),
    stop_curl(C),
    %% --client-rate 1: a burst of 8 per client (address). 127.0.0.2 runs
    %% out; 127.0.0.3, behind the same nginx, has its own (with one bucket
    %% for nginx's address it would have had none left).
    Two = posts_from(Env, "127.0.0.2", Path, [], 12),
    ?assertMatch([429 | _], lists:dropwhile(fun(X) -> X =:= 202 end, Two)),
    ?assertEqual(lists:duplicate(8, 202), posts_from(Env, "127.0.0.3", Path, [], 8)),
    %% A client that names another address for itself is still itself:
    %% nginx appends the address it came from, which is read first.
    Spoofed = posts_from(Env, "127.0.0.3", Path, ["-H", "X-Forwarded-For: 127.0.0.9"], 4),
    ?assertMatch([429 | _], lists:dropwhile(fun(X) -> X =:= 202 end, Spoofed)),
    ?assert(length([X || X <- Spoofed, X =:= 202]) < 4),
    %% Straight to the C-node, from an address it does not trust, the
    %% header is not read: 127.0.0.4's own bucket, not 127.0.0.3's empty one.
    Direct = direct_post(S, {127, 0, 0, 4}, Uid, "X-Forwarded-For: 127.0.0.3\r\n"),
    ?assertMatch({202, _}, Direct),
    %% From the trusted address, a header that names no address: counted,
    %% the proxy's own address used.
    ?assertMatch({202, _}, direct_post(S, {127, 0, 0, 1}, Uid, "X-Forwarded-For: unknown\r\n")),
    %% From it, X-Real-IP when there is no X-Forwarded-For; and a chain of
    %% proxies read past the trusted ones: both 127.0.0.5's bucket, the
    %% second finding it empty (127.0.0.1's would still hold 7).
    Real = [St || _ <- lists:seq(1, 10),
                  {St, _} <- [direct_post(S, {127, 0, 0, 1}, Uid, "X-Real-IP: 127.0.0.5\r\n")]],
    ?assert(lists:member(429, Real)),
    Chain = [St || _ <- lists:seq(1, 8),
                   {St, _} <- [direct_post(S, {127, 0, 0, 1}, Uid,
                                           "X-Forwarded-For: 127.0.0.5, 127.0.0.1\r\n")]],
    ?assert(length([X || X <- Chain, X =:= 202]) =< 3),
    ?assertMatch(#{proxy_bad_forwarded := 1, post_in := In} when In >= 1 + 8, stats(S)),
    [?assertMatch(#{proxy_bad_forwarded := 0}, stats(N)) || N <- Nodes, node_name(N) =/= Node],
    _ = Sink,
    ok.

%% N POSTs of "m" (text/plain) to Path through nginx, over one connection,
%% from the address From: their statuses.
posts_from(Env, From, Path, Extra, N) ->
    Curl = os:find_executable("curl"),
    Args = ["-sS", "-k", "--http1.1", "--interface", From, "--max-time", "30",
            "-H", "Content-Type: text/plain", "--data-binary", "m",
            "-w", "%{http_code}\n" | Extra] ++ lists:append(lists:duplicate(N, ["-o", "/dev/null", url(Env, Path)])),
    {0, Out} = run(Curl, Args),
    [binary_to_integer(L) || L <- binary:split(Out, <<"\n">>, [global, trim_all])].

%% One POST of "m" to the C-node S from the local address From, with the
%% extra header lines Headers: {Status, Body}.
direct_post(S, From, Uid, Headers) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, httpdtest_server:port_of(S),
                                 [binary, {active, false}, {ip, From}]),
    Req = ["POST /send/", integer_to_list(Uid), " HTTP/1.1\r\nHost: x\r\n",
           "Content-Type: text/plain\r\nContent-Length: 1\r\nConnection: close\r\n",
           Headers, "\r\nm"],
    ok = gen_tcp:send(Sock, Req),
    Reply = recv_all(Sock, <<>>),
    gen_tcp:close(Sock),
    <<"HTTP/1.1 ", Code:3/binary, _/binary>> = Reply,
    {binary_to_integer(Code), Reply}.

recv_all(Sock, Acc) ->
    case gen_tcp:recv(Sock, 0, ?T) of
        {ok, B} -> recv_all(Sock, <<Acc/binary, B/binary>>);
        {error, closed} -> Acc
    end.

conn_up(Uid) ->
    receive {forwarded, presence, {httpdcnode, _, conn_up, Uid, _, _, _} = M} -> M
    after ?T -> erlang:error({no_conn_up, Uid})
    end.

in_msg() ->
    receive {in, _, _, _} = M -> M after ?T -> erlang:error(nothing_from_inbox) end.

%%% ---------------------------------------------------------------- nginx and two C-nodes

%% Fun(Env) with two servers and nginx in front; all ended after, also
%% when Fun fails (then the ends of nginx's and the servers' logs are
%% printed).
with_proxy(Opts, Fun) ->
    Nginx = nginx_exe(),
    {ok, _} = application:ensure_all_started(ssl),
    SOpts = #{extra_args => ["--heartbeat", integer_to_list(maps:get(heartbeat, Opts, 25))]},
    with(fun temp_dir/0, fun(D) -> file:del_dir_r(D) end, fun(Dir) ->
    with(fun() -> httpdtest_server:start_server(SOpts) end,
         fun httpdtest_server:stop_server/1, fun(S1) ->
    with(fun() -> httpdtest_server:start_server(SOpts) end,
         fun httpdtest_server:stop_server/1, fun(S2) ->
    with(fun() -> start_nginx(Nginx, Dir, [S1, S2], 3) end, fun stop_nginx/1, fun(Env) ->
         logged(Env, Fun)
    end) end) end) end).

%% Fun(Env, Sink) with a master (its 'presence' forwarding to Sink, an
%% inbox sending each client message there), two servers with
%% --inbox, --presence-conns, --trusted-proxy 127.0.0.1 and --client-rate 1,
%% and nginx in front.
with_inbox_proxy(Fun) ->
    Nginx = nginx_exe(),
    {ok, _} = application:ensure_all_started(ssl),
    {Sink, M, MNode} = httpdtest_inbox:presence_master("proxy_sink"),
    httpdtest_master:sink_subscribe(Sink),
    {ok, _} = httpdtest_inbox:start_inbox(MNode, inbox_test_handler, {Sink, node()}),
    SOpts = #{master => M, presence => presence,
              extra_args => ["--inbox", "inbox", "--presence-conns", "--trusted-proxy",
                             "127.0.0.1", "--client-rate", "1"]},
    Start = fun() ->
                    S = httpdtest_server:start_server(SOpts),
                    httpdtest_server:wait_stat(S, erl_masters, fun(V) -> V =:= 1 end, ?T),
                    S
            end,
    try
        with(fun temp_dir/0, fun(D) -> file:del_dir_r(D) end, fun(Dir) ->
        with(Start, fun httpdtest_server:stop_server/1, fun(S1) ->
        with(Start, fun httpdtest_server:stop_server/1, fun(S2) ->
        with(fun() -> start_nginx(Nginx, Dir, [S1, S2], 3) end, fun stop_nginx/1, fun(Env) ->
             logged(Env, fun(E) -> Fun(E, Sink) end)
        end) end) end) end)
    after
        httpdtest_master:stop_master(M),
        httpdtest_master:stop_sink(Sink)
    end.

with(Acquire, Release, Use) ->
    R = Acquire(),
    try Use(R) after Release(R) end.

%% Debian's nginx ($HTTPDTEST_NGINX: that one), with the TLS and HTTP/2
%% modules the example needs.
nginx_exe() ->
    Candidates = case os:getenv("HTTPDTEST_NGINX") of
                     false -> [os:find_executable("nginx"), "/usr/sbin/nginx"];
                     Path -> [Path]
                 end,
    Exe = case [P || P <- Candidates, P =/= false, filelib:is_regular(P)] of
              [E | _] -> E;
              [] -> erlang:error({nginx_not_installed,
                                  "the proxy tests need nginx: apt-get install nginx "
                                  "(scripts/install-deps.sh installs it)"})
          end,
    {0, V} = run(Exe, ["-V"]),
    [erlang:error({nginx_without, M, V}) || M <- [<<"--with-http_ssl_module">>,
                                                   <<"--with-http_v2_module">>],
                                            binary:match(V, M) =:= nomatch],
    Exe.

temp_dir() ->
    Dir = filename:join(os:getenv("TMPDIR", "/tmp"), unique("httpdproxy")),
    ok = file:make_dir(Dir),
    Dir.

%% A self-signed certificate for 127.0.0.1 (P-256: made at once).
make_cert(Dir) ->
    Cert = filename:join(Dir, "cert.pem"),
    Key = filename:join(Dir, "key.pem"),
    Openssl = os:find_executable("openssl"),
    ?assertNotEqual(false, Openssl),
    {0, _} = run(Openssl, ["req", "-x509", "-newkey", "ec", "-pkeyopt",
                           "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", Key,
                           "-out", Cert, "-days", "2", "-subj", "/CN=127.0.0.1",
                           "-addext", "subjectAltName=IP:127.0.0.1"]),
    {Cert, Key}.

%% The example with this test's values for its placeholders; none left.
render(Dir, Port, Cert, Key, [S1, S2]) ->
    {ok, T} = file:read_file(filename:join([httpdtest_os:repo_root(), "examples",
                                            "nginx.conf.example"])),
    Conf = lists:foldl(fun({K, V}, Acc) -> binary:replace(Acc, K, V, [global]) end, T,
                       [{<<"@STATE_DIR@">>, list_to_binary(Dir)},
                        {<<"@LISTEN@">>, list_to_binary(addr(Port))},
                        {<<"@CERT@">>, list_to_binary(Cert)},
                        {<<"@KEY@">>, list_to_binary(Key)},
                        {<<"@NODE1@">>, list_to_binary(addr(S1))},
                        {<<"@NODE2@">>, list_to_binary(addr(S2))}]),
    ?assertEqual(nomatch, re:run(Conf, "@[A-Z0-9_]+@", [{capture, first, binary}])),
    File = filename:join(Dir, "nginx.conf"),
    ok = file:write_file(File, Conf),
    File.

addr(P) when is_integer(P) -> "127.0.0.1:" ++ integer_to_list(P);
addr(S) -> addr(httpdtest_server:port_of(S)).

%% nginx in the foreground, one process (no workers left behind if it is
%% killed), its pid this test's; ready once a TLS client gets /httpdcnode.js.
%% Its port was free a moment ago: a bind that fails is tried again.
start_nginx(Exe, Dir, Nodes, Attempts) ->
    {Cert, Key} = make_cert(Dir),
    Port = httpdtest_os:free_port(),
    File = render(Dir, Port, Cert, Key, Nodes),
    Args = ["-c", File, "-p", Dir ++ "/", "-g", "daemon off; master_process off;"],
    case run(Exe, ["-t" | Args]) of
        {0, _} -> ok;
        {_, Why} -> erlang:error({nginx_config_refused, Why})
    end,
    Log = httpdtest_os:log_path(unique("nginx")),
    Proc = httpdtest_os:spawn_os(Exe, Args, Log, Dir),
    Env = #{nginx => Proc, port => Port, dir => Dir, nodes => Nodes, log => Log},
    try
        wait_until(fun() ->
                           case httpdtest_os:proc_status(Proc) of
                               {exited, St} -> erlang:error({nginx_exited, St});
                               running -> tls_get_ok(Port)
                           end
                   end, 15000, {nginx_up, Port}),
        Env
    catch error:{nginx_exited, _} = E when Attempts > 1 ->
            Taken = binary:match(nginx_logs(Env), <<"Address already in use">>) =/= nomatch,
            stop_nginx(Env),
            Taken orelse erlang:error({E, nginx_logs(Env)}),
            start_nginx(Exe, Dir, Nodes, Attempts - 1);
          C:E:St ->
            io:format(user, "~n--- nginx: ~n~s~n---~n", [nginx_logs(Env)]),
            stop_nginx(Env),
            erlang:raise(C, E, St)
    end.

stop_nginx(#{nginx := P}) -> httpdtest_os:stop_proc(P).

nginx_logs(#{log := Log, dir := Dir}) ->
    iolist_to_binary([httpdtest_os:log_tail(Log, 10), "\n",
                      httpdtest_os:log_tail(filename:join(Dir, "error.log"), 20)]).

%% GET /httpdcnode.js over TLS (Erlang's ssl, HTTP/1.1): a 200.
tls_get_ok(Port) ->
    case ssl:connect({127, 0, 0, 1}, Port, [binary, {active, false}, {verify, verify_none},
                                            {alpn_advertised_protocols, [<<"http/1.1">>]}], 2000) of
        {ok, S} ->
            ok = ssl:send(S, "GET /httpdcnode.js HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                             "Connection: close\r\n\r\n"),
            R = ssl:recv(S, 0, 2000),
            ssl:close(S),
            case R of
                {ok, <<"HTTP/1.1 200", _/binary>>} -> true;
                Other -> {false, Other}
            end;
        E -> {false, E}
    end.

logged(Env = #{nodes := Nodes}, Fun) ->
    try Fun(Env)
    catch C:E:St ->
            io:format(user, "~n--- nginx: ~n~s~n", [nginx_logs(Env)]),
            [io:format(user, "--- ~s:~n~s~n", [L, httpdtest_os:log_tail(L, 15)])
             || #{log := L} <- Nodes],
            erlang:raise(C, E, St)
    end.

url(#{port := P}, Path) -> "https://" ++ addr(P) ++ Path.

node_name(S) -> httpdtest_server:node_of(S).

%% Which of the two a stream went to: 1 or 2.
node_index(#{nodes := [S1, _]}, S) ->
    case node_name(S) =:= node_name(S1) of true -> 1; false -> 2 end.

totals(#{nodes := Nodes}) -> [maps:get(streams_total, stats(S)) || S <- Nodes].

%% The C-node on which the one stream opened since Before (totals/1) is.
opened_on(Env = #{nodes := Nodes}, Before) ->
    wait_until(fun() ->
                       After = totals(Env),
                       Rose = [S || {S, A, B} <- lists:zip3(Nodes, After, Before), A > B],
                       case lists:sum(After) - lists:sum(Before) of
                           1 -> {true, hd(Rose)};
                           _ -> {false, {Before, After}}
                       end
               end, ?T, stream_opened).

no_streams(#{nodes := Nodes}) ->
    wait_until(fun() ->
                       Open = [maps:get(streams_open, stats(S)) || S <- Nodes],
                       lists:sum(Open) =:= 0 orelse {false, Open}
               end, ?T, no_streams_open).

%% A stats request answered by the C-node after every message sent before.
ack(S) ->
    Ref = make_ref(),
    send(S, {self(), Ref, stats}),
    receive {Ref, _} -> ok after ?T -> erlang:error(no_stats_reply) end.

%%% ---------------------------------------------------------------- curl

%% curl -i on Path through nginx (HTTP/2 unless Extra says otherwise); what
%% it prints (head, then body as it comes: -N) goes to its log.
curl(Env, Path, Extra) ->
    Tag = unique("proxycurl"),
    Log = httpdtest_os:log_path(Tag),
    Curl = os:find_executable("curl"),
    ?assertNotEqual(false, Curl),
    httpdtest_os:spawn_os(Curl, ["-sS", "-N", "-k", "-i", "--http2", "-A", Tag,
                                 "--max-time", "60" | Extra] ++ [url(Env, Path)],
                          Log, Tag).

%% curl on Path, and the C-node its stream is on.
open_curl(Env, Path, Extra) ->
    Before = totals(Env),
    C = curl(Env, Path, Extra),
    {C, opened_on(Env, Before)}.

%% The node (1 or 2) a stream on Path went to; closed again after.
curl_on(Env, Path, Extra) ->
    {C, S} = open_curl(Env, Path, Extra),
    stop_curl(C),
    no_streams(Env),
    node_index(Env, S).

stop_curl(C) -> httpdtest_os:stop_proc(C).

output(#{log := Log}) ->
    {ok, B} = file:read_file(Log),
    B.

head_body(Out) ->
    case binary:split(Out, <<"\r\n\r\n">>) of
        [H, B] -> {H, B};
        [H] -> {H, <<>>}
    end.

head_header(Head, Name) ->
    Lines = tl(binary:split(Head, <<"\r\n">>, [global])),
    case [string:trim(V) || L <- Lines, [N, V] <- [binary:split(L, <<":">>)],
                            string:lowercase(N) =:= Name] of
        [V | _] -> V;
        [] -> undefined
    end.

%% Waits until Pred(the body so far) holds.
wait_body(C, Pred, What) ->
    wait_until(fun() ->
                       {_, B} = head_body(output(C)),
                       Pred(B) orelse {false, B}
               end, ?T, What).

%% The SSE events of the body so far, each a list of {Field, Value}
%% (data lines joined); comments left out.
raw_events(C) ->
    {_, B} = head_body(output(C)),
    Blocks = binary:split(B, <<"\n\n">>, [global]),
    %% the last block is not whole yet (or empty)
    Whole = lists:droplast(Blocks),
    [Ev || Blk <- Whole,
           Ev <- [[list_to_tuple(binary:split(L, <<": ">>))
                   || L <- binary:split(Blk, <<"\n">>, [global]),
                      L =/= <<>>, binary:first(L) =/= $:]],
           Ev =/= [], not lists:keymember(<<"retry">>, 1, Ev)].

wait_raw_events(C, N) ->
    wait_until(fun() ->
                       Evs = raw_events(C),
                       length(Evs) >= N andalso {true, Evs}
               end, ?T, {sse_events, N}).

%% Plain message events as {Id, Data}.
events(C) ->
    [{proplists:get_value(<<"id">>, E), proplists:get_value(<<"data">>, E)}
     || E <- raw_events(C)].

wait_events(C, N) ->
    wait_raw_events(C, N),
    events(C).

count_comments(B) ->
    length([L || L <- binary:split(B, <<"\n">>, [global]), L =:= <<":">>]).

m(I) -> <<"m", (integer_to_binary(I))/binary>>.

id(Epoch, I) -> <<Epoch/binary, ":", (integer_to_binary(I))/binary>>.

epoch(Id) -> hd(binary:split(Id, <<":">>)).

%% {ExitStatus, Output} of a command that ends by itself, bounded.
run(Exe, Args) ->
    Port = open_port({spawn_executable, Exe},
                     [{args, Args}, exit_status, stderr_to_stdout, binary, use_stdio]),
    httpdtest_os:port_output(Port, 30000).

%%% ---------------------------------------------------------------- WebSocket (npm ws)

%% tests/js/ws_client.mjs on wss://.../Path, the self-signed certificate
%% taken (WS_CLIENT_INSECURE).
ws_client(Env, Path, Protocol) ->
    Root = httpdtest_os:repo_root(),
    Node = os:find_executable("node"),
    ?assertNotEqual(false, Node),
    Url = "wss://" ++ addr(maps:get(port, Env)) ++ Path,
    open_port({spawn_executable, Node},
              [{args, [filename:join([Root, "tests", "js", "ws_client.mjs"]), Url]
                ++ [Protocol || Protocol =/= none]},
               {cd, filename:join([Root, "tests", "js"])}, {env, [{"WS_CLIENT_INSECURE", "1"}]},
               {line, 1 bsl 20}, binary, use_stdio, exit_status]).

ws_on(Env, Path) ->
    Before = totals(Env),
    W = ws_client(Env, Path, none),
    try
        ws_expect(W, open),
        node_index(Env, opened_on(Env, Before))
    after
        catch port_close(W),
        no_streams(Env)
    end.

%% The client's next line, decoded; fails on anything but What. Pings are
%% passed over unless asked for.
ws_expect(W, What) ->
    receive
        {W, {data, {eol, Line}}} ->
            M = httpdtest_json:json_decode(Line),
            Want = atom_to_binary(What),
            case maps:get(<<"ev">>, M) of
                Want -> M;
                <<"ping">> -> ws_expect(W, What);
                _ -> erlang:error({expected, What, got, M})
            end;
        {W, {exit_status, St}} -> erlang:error({ws_client_exited, St})
    after scaled(?T) -> erlang:error({ws_client_silent, waiting_for, What})
    end.

%%% ---------------------------------------------------------------- Chromium

%% tests/js/proxy_page.mjs at Url with EventSources on Uids (httpdtest_page).
open_page(Url, Uids) ->
    httpdtest_page:open("proxy_page.mjs", [Url | [integer_to_list(U) || U <- Uids]]).

%% Waits until Pred(the page's events so far) holds (true or {true, V});
%% a fatal event fails at once.
wait_page(P, Pred, What, Timeout) ->
    wait_until(fun() ->
                       Evs = httpdtest_page:events(P),
                       case [E || E = #{<<"ev">> := <<"fatal">>} <- Evs] of
                           [] -> case Pred(Evs) of
                                     false -> {false, Evs};
                                     R -> R
                                 end;
                           Fatal -> erlang:error({page_failed, Fatal})
                       end
               end, Timeout, What).

find(Ev, Evs) ->
    case [E || E = #{<<"ev">> := X} <- Evs, X =:= Ev] of
        [E | _] -> {true, E};
        [] -> false
    end.

uids_of(Ev, Evs) -> lists:usort([U || #{<<"ev">> := X, <<"uid">> := U} <- Evs, X =:= Ev]).
