%% SPDX-License-Identifier: Apache-2.0
%% Black-box tests of the server: a real ./httpdcnode per test, a real
%% Erlang master node, raw HTTP clients, messages sent from this node.
%% The HTTP error cases, the rejected terms, the master's comings and
%% goings and the push storm have modules of their own (core_*_tests).
-module(core_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [server_test/4, server_test/5, send/2, stats/1, wait_stat/4,
                           port_of/1]).
-import(httpdtest_http, [open_stream/2, open_stream/3, open/2, open/3, expect_head/2,
                         expect_chunk/2, expect_chunks/3, expect_last_chunk/2, expect_closed/2,
                         expect_end/2, expect_bytes/3, next_event/2, close/1, welcome/1,
                         header/2, get_request/1, request_bytes/3]).
-import(httpdtest_wait, [summarize/1]).

-define(T, 5000).   % ms for one expected event

core_test_() ->
    {setup, fun httpdtest_master:start_master/0, fun httpdtest_master:stop_master/1,
     fun(M) ->
             [server_test("welcome chunk and headers", M, #{}, 20, fun welcome/2),
              server_test("1000 messages to one uid arrive in order, byte for byte", M, #{}, 30,
                          fun order/2),
              server_test("string and iolist payloads", M, #{}, 20, fun payload_forms/2),
              server_test("iolist with a binary tail", M, #{}, 20, fun improper_iolist/2),
              server_test("every connection of a uid gets every message", M, #{}, 20,
                          fun several_conns/2),
              server_test("over max-conns-per-uid the oldest stream is ended", M,
                          #{max_conns_per_uid => 2}, 20, fun max_conns/2),
              server_test("multicast reaches exactly the listed uids", M, #{}, 20,
                          fun multicast/2),
              server_test("broadcast reaches every stream", M, #{}, 20, fun broadcast/2),
              server_test("kick ends the uid's streams", M, #{}, 20, fun kick/2),
              server_test("message to a uid without stream counts as dropped_no_conn", M, #{},
                          20, fun dropped_no_conn/2),
              server_test("replying forms {Pid, Ref, ...}", M, #{}, 20, fun reply_forms/2),
              server_test("/stats is one JSON object with every counter", M, #{}, 20,
                          fun stats_keys/2),
              server_test("--probe-latency: GET /probe ages stamped messages at each hop", M,
                          #{extra_args => ["--probe-latency"]}, 20, fun probe/2),
              server_test("without --probe-latency GET /probe is a 404 that says so", M, #{},
                          20, fun probe_off/2),
              server_test("HTTP/1.0 gets a plain unchunked stream", M, #{}, 20,
                          fun http10/2),
              server_test("a client closing is noticed, no CLOSE-WAIT left", M, #{}, 30,
                          fun client_close/2),
              server_test("a client that does not read is ended past --max-backlog", M,
                          #{max_backlog => 131072}, 60, fun slow_consumer/2),
              server_test("SIGTERM ends every stream and exits 0", M, #{}, 30, fun sigterm/2)]
     end}.

%% Bad command lines: exit status 2 and one line on stderr; --help, --version: 0.
cli_test_() ->
    Port = integer_to_list(httpdtest_os:free_port()),
    Base = ["--listen", "127.0.0.1:" ++ Port, "--admin-listen", "",
            "--name", httpdtest_os:unique("c1cli") ++ "@localhost",
            "--master", httpdtest_os:unique("httpdmaster_absent") ++ "@localhost",
            "--cookie", "x"],
    Bad = [["--max-users", "abc"], ["--max-conns-per-uid", "x"], ["--max-message", "12k"],
           ["--listen", "127.0.0.1:notaport"], ["--writers", "0"], ["--writers", "65"],
           ["--writers", "two"], ["--header-timeout", "0"], ["--keepalive", "-1"],
           ["--keepalive", "40000"], ["--max-backlog-total", "100"],
           ["--admin-listen", "127.0.0.1"], ["--admin-listen", "nohost:8001"],
           ["--admin-listen", "127.0.0.1:0"]],
    [{"bad option " ++ lists:flatten(lists:join(" ", B)),
      {timeout, 15, fun() ->
                            {St, Out} = httpdtest_server:run_cli(Base ++ B, 5000),
                            Lines = [L || L <- binary:split(Out, <<"\n">>, [global, trim]),
                                          L =/= <<>>],
                            ?assertEqual({exit_status, 2}, {exit_status, St}),
                            ?assertMatch({one_line, [_]}, {one_line, Lines})
                    end}} || B <- Bad]
        ++ [{"unknown option exits 2",
             {timeout, 15, fun() ->
                                   {St, _} = httpdtest_server:run_cli(Base ++ ["--no-such-option"], 5000),
                                   ?assertEqual({exit_status, 2}, {exit_status, St})
                           end}}]
        ++ [{"option " ++ O ++ " exits 0",
             {timeout, 15, fun() ->
                                   {St, Out} = httpdtest_server:run_cli(Base ++ [O], 5000),
                                   ?assertEqual({exit_status, 0, O}, {exit_status, St, O}),
                                   ?assert(byte_size(Out) > 0)
                           end}} || O <- ["--help", "--version"]].

%%% ---------------------------------------------------------------- cases

welcome(S, _M) ->
    C = open(port_of(S), get_request("/test/5")),
    #{status := Status, version := V, headers := H} = expect_head(C, ?T),
    ?assertEqual(200, Status),
    ?assertEqual(<<"HTTP/1.1">>, V),
    ?assertEqual(<<"chunked">>, string:lowercase(header(H, <<"transfer-encoding">>))),
    ?assertEqual(<<"text/html; charset=utf-8">>, header(H, <<"content-type">>)),
    ?assertEqual(undefined, header(H, <<"content-length">>)),
    ?assertEqual(<<"Welcome, Url: '/test/5' Id: 5\n">>, expect_chunk(C, ?T)),
    close(C),
    %% the largest uid by default, and the text follows the uid
    Big = 17 * 65536,
    C2 = open_stream(S, Big),
    send(S, {Big, <<"top">>}),
    ?assertEqual(<<"top">>, expect_chunk(C2, ?T)),
    close(C2).

order(S, _M) ->
    Uid = 7,
    C = open_stream(S, Uid),
    AllBytes = list_to_binary(lists:seq(0, 255)),
    Big = binary:copy(<<"0123456789abcdef">>, 60 * 1024 div 16),
    Msgs = [case I of
                100 -> AllBytes;
                500 -> Big;
                _ -> iolist_to_binary([integer_to_list(I), $:, binary:copy(<<(I rem 256)>>, I rem 300 + 1)])
            end || I <- lists:seq(1, 1000)],
    [send(S, {Uid, M}) || M <- Msgs],
    expect_chunks(C, Msgs, ?T),
    close(C).

payload_forms(S, _M) ->
    Uid = 6,
    C = open_stream(S, Uid),
    Forms = [{"hello, string", <<"hello, string">>},
             {[1, 2, 3, 0, 255, 10], <<1, 2, 3, 0, 255, 10>>},
             {lists:duplicate(1000, $z), binary:copy(<<"z">>, 1000)},
             {[<<"ab">>, "cd", [$e, [<<"f">>, []]], <<>>], <<"abcdef">>},
             {[<<"a">>, 98, 99], <<"abc">>},
             {[[[[<<"deep">>]]]], <<"deep">>},
             {[<<>>, [], "x"], <<"x">>},
             {<<"plain binary">>, <<"plain binary">>}],
    lists:foreach(fun({Data, Want}) ->
                          send(S, {Uid, Data}),
                          ?assertEqual({Data, Want}, {Data, expect_chunk(C, ?T)})
                  end, Forms),
    close(C).

improper_iolist(S, _M) ->
    C = open_stream(S, 6),
    send(S, {6, [<<"x">> | <<"y">>]}),
    send(S, {6, [<<"a">>, "b" | <<"c">>]}),
    ?assertEqual(<<"xy">>, expect_chunk(C, ?T)),
    ?assertEqual(<<"abc">>, expect_chunk(C, ?T)),
    close(C).

several_conns(S, _M) ->
    Cs = [open_stream(S, 9) || _ <- lists:seq(1, 3)],
    Other = open_stream(S, 10),
    Msgs = [<<"m", (integer_to_binary(I))/binary>> || I <- lists:seq(1, 5)],
    [send(S, {9, M}) || M <- Msgs],
    send(S, {10, <<"for ten">>}),
    [expect_chunks(C, Msgs, ?T) || C <- Cs],
    %% the uid-10 stream got none of uid 9's messages
    ?assertEqual(<<"for ten">>, expect_chunk(Other, ?T)),
    [close(C) || C <- [Other | Cs]].

max_conns(S, _M) ->
    A = open_stream(S, 4),
    B = open_stream(S, 4),
    wait_stat(S, streams_open, fun(V) -> V =:= 2 end, ?T),
    C = open_stream(S, 4),
    expect_end(A, ?T),
    send(S, {4, <<"after eviction">>}),
    ?assertEqual(<<"after eviction">>, expect_chunk(B, ?T)),
    ?assertEqual(<<"after eviction">>, expect_chunk(C, ?T)),
    St = wait_stat(S, streams_open, fun(V) -> V =:= 2 end, ?T),
    ?assertEqual(1, maps:get(evicted, St)),
    close(B), close(C).

multicast(S, _M) ->
    Cs = [{U, open_stream(S, U)} || U <- lists:seq(1, 5)],
    send(S, {[1, 3, 5], <<"to odd">>}),
    [send(S, {U, <<"marker">>}) || U <- lists:seq(1, 5)],
    lists:foreach(fun({U, C}) when U rem 2 =:= 1 ->
                          expect_chunks(C, [<<"to odd">>, <<"marker">>], ?T);
                     ({_U, C}) ->
                          expect_chunks(C, [<<"marker">>], ?T)
                  end, Cs),
    [close(C) || {_, C} <- Cs].

broadcast(S, _M) ->
    Cs = [open_stream(S, U) || U <- [1, 2, 3, 4, 4, 1000]],
    send(S, {broadcast, <<"to all">>}),
    send(S, {broadcast, [<<"io">>, "list"]}),
    [expect_chunks(C, [<<"to all">>, <<"iolist">>], ?T) || C <- Cs],
    [close(C) || C <- Cs].

kick(S, _M) ->
    K1 = open_stream(S, 11),
    K2 = open_stream(S, 11),
    Other = open_stream(S, 12),
    St0 = wait_stat(S, streams_open, fun(V) -> V =:= 3 end, ?T),
    send(S, {kick, 11}),
    expect_last_chunk(K1, ?T),
    expect_last_chunk(K2, ?T),
    St1 = wait_stat(S, streams_open, fun(V) -> V =:= 1 end, ?T),
    ?assertEqual(2, maps:get(kicked, St1) - maps:get(kicked, St0)),
    send(S, {12, <<"still here">>}),
    ?assertEqual(<<"still here">>, expect_chunk(Other, ?T)),
    %% the kicked uid has no stream now, and may come back
    D0 = maps:get(dropped_no_conn, St1),
    send(S, {11, <<"nobody">>}),
    wait_stat(S, dropped_no_conn, fun(V) -> V =:= D0 + 1 end, ?T),
    K3 = open_stream(S, 11),
    send(S, {11, <<"back">>}),
    ?assertEqual(<<"back">>, expect_chunk(K3, ?T)),
    [close(C) || C <- [K1, K2, K3, Other]].

dropped_no_conn(S, _M) ->
    C = open_stream(S, 1),
    St0 = stats(S),
    send(S, {4242, <<"x">>}),
    send(S, {[4243, 4244], <<"x">>}),
    St1 = wait_stat(S, dropped_no_conn,
                    fun(V) -> V >= maps:get(dropped_no_conn, St0) + 3 end, ?T),
    ?assertEqual(3, maps:get(dropped_no_conn, St1) - maps:get(dropped_no_conn, St0)),
    send(S, {1, <<"alive">>}),
    ?assertEqual(<<"alive">>, expect_chunk(C, ?T)),
    close(C).

reply_forms(S, _M) ->
    A = open_stream(S, 5),
    B = open_stream(S, 5),
    C = open_stream(S, 6),
    R1 = make_ref(),
    send(S, {self(), R1, 5, <<"r1">>}),
    ?assertEqual({reply, 2}, await_reply(R1)),
    ?assertEqual(<<"r1">>, expect_chunk(A, ?T)),
    ?assertEqual(<<"r1">>, expect_chunk(B, ?T)),
    R2 = make_ref(),
    send(S, {self(), R2, [5, 6, 77], <<"r2">>}),
    ?assertEqual({reply, 3}, await_reply(R2)),
    [?assertEqual(<<"r2">>, expect_chunk(X, ?T)) || X <- [A, B, C]],
    R3 = make_ref(),
    send(S, {self(), R3, 77, <<"r3">>}),
    ?assertEqual({reply, 0}, await_reply(R3)),
    R4 = make_ref(),
    send(S, {self(), R4, stats}),
    {reply, Map} = await_reply(R4),
    ?assert(is_map(Map)),
    Keys = maps:from_list([{to_bin(K), V} || {K, V} <- maps:to_list(Map)]),
    ?assertEqual({streams_open, 3}, {streams_open, maps:get(<<"streams_open">>, Keys, missing)}),
    case maps:is_key(<<"memory">>, Keys) of
        true -> ok;
        false -> erlang:error({stats_reply_has_no_memory_key, lists:sort(maps:keys(Keys))})
    end,
    [close(X) || X <- [A, B, C]].

await_reply(Ref) ->
    receive {Ref, V} -> {reply, V}
    after ?T -> {no_reply_within_ms, ?T}
    end.

to_bin(A) when is_atom(A) -> atom_to_binary(A, utf8);
to_bin(B) when is_binary(B) -> B;
to_bin(L) when is_list(L) -> list_to_binary(L).

stats_keys(S, _M) ->
    R = httpdtest_server:admin_get(S, "/stats"),
    ?assertMatch(#{status := 200}, R),
    Map = httpdtest_json:json_decode(maps:get(body, R)),
    ?assert(is_map(Map)),
    Keys = [streams_open, streams_total, uids_online, client_closed, evicted, slow_closed,
            kicked, msgs_in, msgs_applied, deliveries, bytes_out, dropped_no_conn, bad_terms,
            bad_uid, too_big, empty, http_not_found, http_too_big, http_bad_method,
            http_no_fds, erl_nodes, erl_connects, backpressure],
    Bad = [{K, maps:get(atom_to_binary(K, utf8), Map, missing)}
           || K <- Keys, not is_integer(maps:get(atom_to_binary(K, utf8), Map, missing))],
    ?assertEqual([], Bad),
    %% counters move: one stream, one message
    C = open_stream(S, 3),
    send(S, {3, <<"12345">>}),
    ?assertEqual(<<"12345">>, expect_chunk(C, ?T)),
    St = wait_stat(S, bytes_out, fun(V) -> V >= 5 end, ?T),
    ?assertMatch(#{streams_open := 1, uids_online := 1}, St),
    ?assert(maps:get(streams_total, St) >= 1),
    ?assert(maps:get(msgs_in, St) >= 1),
    ?assert(maps:get(msgs_applied, St) >= 1),
    ?assert(maps:get(deliveries, St) >= 1),
    ?assert(maps:get(erl_nodes, St) >= 1),
    close(C).

%% Stamped 5 s in the past, so each hop's age is at least that and the
%% percentiles say which messages were counted.
probe(S, _M) ->
    C3 = open_stream(S, 3),
    C4 = open_stream(S, 4),
    Old = integer_to_binary(os:system_time(nanosecond) - 5000000000),
    Stamped = <<"t=", Old/binary, ";x">>,
    send(S, {3, Stamped}),
    send(S, {[3, 4], Stamped}),
    send(S, {3, <<"no stamp">>}),
    send(S, {3, <<"t=12x;">>}),
    ok = expect_chunks(C3, [Stamped, Stamped, <<"no stamp">>, <<"t=12x;">>], ?T),
    ?assertEqual(Stamped, expect_chunk(C4, ?T)),
    P = probe_get(S, "/probe?reset=1"),
    ?assertMatch(#{<<"received">> := #{<<"n">> := 2}, <<"applied">> := #{<<"n">> := 2},
                   <<"written">> := #{<<"n">> := 3}}, P),
    [begin
         #{<<"p50_us">> := P50, <<"max_us">> := Max} = maps:get(Hop, P),
         ?assert(P50 >= 4900000 andalso P50 =< 6000000),   % 5 s, 1.6 % buckets
         ?assert(Max >= P50 andalso Max < 60000000)
     end || Hop <- [<<"received">>, <<"applied">>, <<"written">>]],
    %% reset: the next reading starts from nothing
    ?assertMatch(#{<<"received">> := #{<<"n">> := 0}, <<"written">> := #{<<"n">> := 0}},
                 probe_get(S, "/probe")),
    close(C3),
    close(C4).

probe_off(S, _M) ->
    N0 = maps:get(http_not_found, stats(S)),
    R = httpdtest_server:admin_get(S, "/probe"),
    ?assertMatch(#{status := 404}, R),
    ?assertNotEqual(nomatch, binary:match(maps:get(body, R), <<"--probe-latency">>)),
    ?assertEqual(N0 + 1, maps:get(http_not_found, stats(S))).

probe_get(S, Path) ->
    R = httpdtest_server:admin_get(S, Path),
    ?assertMatch(#{status := 200}, R),
    httpdtest_json:json_decode(maps:get(body, R)).

http10(S, _M) ->
    C = open(port_of(S), request_bytes("GET", "/test/8", "HTTP/1.0")),
    #{status := Status, headers := H} = expect_head(C, ?T),
    ?assertEqual(200, Status),
    TE = header(H, <<"transfer-encoding">>),
    ?assertNotEqual(<<"chunked">>, TE =/= undefined andalso string:lowercase(TE)),
    AllBytes = list_to_binary(lists:seq(0, 255)),
    Msgs = [<<"one">>, AllBytes, <<"three\r\n0\r\n\r\n">>],
    %% wait for the welcome so the stream is registered before sending
    expect_bytes(C, welcome(8), ?T),
    [send(S, {8, M}) || M <- Msgs],
    expect_bytes(C, iolist_to_binary(Msgs), ?T),
    send(S, {kick, 8}),
    expect_closed(C, ?T),
    close(C).

client_close(S, _M) ->
    Port = port_of(S),
    Cs = [open_stream(S, U) || U <- lists:seq(30, 39)],
    St0 = wait_stat(S, streams_open, fun(V) -> V =:= 10 end, ?T),
    [close(C) || C <- Cs],
    St1 = wait_stat(S, streams_open, fun(V) -> V =:= 0 end, ?T),
    ?assertEqual(10, maps:get(client_closed, St1) - maps:get(client_closed, St0)),
    ?assertEqual(0, maps:get(uids_online, St1)),
    httpdtest_wait:wait_until(fun() ->
                                      N = httpdtest_os:close_wait_count(Port),
                                      {N =:= 0, {close_wait_sockets, N}}
                              end, ?T, no_close_wait),
    %% the server goes on
    C = open_stream(S, 30),
    send(S, {30, <<"again">>}),
    ?assertEqual(<<"again">>, expect_chunk(C, ?T)),
    close(C).

sigterm(S, _M) ->
    Cs = [open_stream(S, U) || U <- lists:seq(1, 10) ++ lists:seq(1, 10)],
    Old = open(port_of(S), request_bytes("GET", "/test/50", "HTTP/1.0")),
    #{status := 200} = expect_head(Old, ?T),
    expect_bytes(Old, welcome(50), ?T),
    wait_stat(S, streams_open, fun(V) -> V =:= 21 end, ?T),
    ok = httpdtest_os:signal(S, "TERM"),
    [expect_end(C, ?T) || C <- Cs],
    expect_closed(Old, ?T),
    case httpdtest_os:wait_exit(S, 5000) of
        {ok, Status, Ms} ->
            io:format(user, " [exited ~p after ~b ms] ", [Status, Ms]),
            ?assertEqual({exit_status, 0}, {exit_status, Status});
        timeout -> erlang:error({still_running_5s_after_sigterm, httpdtest_os:proc_status(S)})
    end,
    [close(C) || C <- [Old | Cs]].

%% A client that sends its request and never reads: once the kernel
%% buffers are full, what the server holds for it passes --max-backlog and
%% the stream is ended, while another stream goes on.
slow_consumer(S, _M) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S),
                                 [binary, {active, false}, {recbuf, 4096}]),
    ok = gen_tcp:send(Sock, get_request("/test/21")),
    Fast = open_stream(S, 22),
    wait_stat(S, streams_open, fun(V) -> V =:= 2 end, ?T),
    Big = binary:copy(<<"s">>, 16384),
    %% at most 16 MB in all, far above the kernel's buffers plus 128 KB
    Pushed = push_until_slow_closed(S, Big, 0, 1000),
    io:format(user, " [ended after ~b KB] ", [Pushed * 16]),
    St = wait_stat(S, streams_open, fun(V) -> V =:= 1 end, ?T),
    ?assertEqual(1, maps:get(slow_closed, St)),
    send(S, {22, <<"fast one">>}),
    ?assertEqual(<<"fast one">>, expect_chunk(Fast, ?T)),
    gen_tcp:close(Sock),
    close(Fast).

push_until_slow_closed(_S, _Big, N, Max) when N >= Max ->
    erlang:error({stream_not_ended_after_bytes, N * 16384});
push_until_slow_closed(S, Big, N, Max) ->
    [send(S, {21, Big}) || _ <- lists:seq(1, 50)],
    case maps:get(slow_closed, stats(S)) of
        0 -> push_until_slow_closed(S, Big, N + 50, Max);
        _ -> N + 50
    end.
