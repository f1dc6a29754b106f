%% SPDX-License-Identifier: Apache-2.0
%% The admin listener (--admin-listen): /stats, /metrics and /probe there,
%% not on the public port; both on one listener when the addresses are the
%% same; an explicit address in use is exit 2, the default one in use is
%% only logged. /metrics is checked line by line and against /stats.
-module(admin_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [server_test/4, send/2, stats/1, metrics/1, admin_get/2, port_of/1,
                           admin_port_of/1, run_cli/2]).
-import(httpdtest_http, [open_stream/2, expect_chunk/2, expect_chunks/3, close/1,
                         http_request/2, header/2]).
-import(httpdtest_wait, [wait_until/3]).
-import(httpdtest_os, [free_port/0, unique/1]).

-define(T, 5000).

admin_test_() ->
    [server_test("/stats, /metrics and /probe answer on the admin port, 404 on the public one",
                 #{extra_args => ["--probe-latency"]}, 30, fun split/1),
     server_test("/metrics: every family, and the values of /stats", #{}, 30, fun exposition/1),
     server_test("--admin-listen equal to --listen: one listener serves everything",
                 #{admin => same, extra_args => ["--probe-latency"]}, 30, fun same/1),
     server_test("--admin-listen \"\": no admin listener, /stats is a 404", #{admin => none}, 30,
                 fun no_admin/1),
     {"an explicit --admin-listen in use: one line on stderr, exit 2",
      {timeout, 20, fun explicit_in_use/0}},
     {"the default admin address in use: logged, the server runs without it",
      {setup, fun hold_default/0, fun release_default/1,
       fun(_) -> {timeout, 30, fun default_in_use/0} end}}].

get(Port, Path) ->
    http_request(Port, "GET " ++ Path ++ " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").

status(Port, Path) -> {Path, maps:get(status, get(Port, Path))}.

split(S) ->
    Admin = admin_port_of(S),
    ?assertNotEqual(port_of(S), Admin),
    ?assertEqual({"/stats", 200}, status(Admin, "/stats")),
    ?assertEqual({"/metrics", 200}, status(Admin, "/metrics")),
    ?assertEqual({"/probe", 200}, status(Admin, "/probe")),
    [?assertEqual({P, 404}, status(port_of(S), P)) || P <- ["/stats", "/probe", "/metrics"]],
    %% the admin port serves no streams
    ?assertEqual({"/test/1", 404}, status(Admin, "/test/1")),
    %% and streams still work on the public one
    C = open_stream(S, 9),
    send(S, {9, <<"still here">>}),
    ?assertEqual(<<"still here">>, expect_chunk(C, ?T)),
    close(C).

%% The exposition as Prometheus reads it: a HELP and a TYPE before each
%% family's samples, the content type of version 0.0.4, and the values of
%% /stats after a little traffic. The histogram counts every delivery.
exposition(S) ->
    C1 = open_stream(S, 1),
    C2 = open_stream(S, 2),
    [send(S, {1, <<"m", (integer_to_binary(I))/binary>>}) || I <- lists:seq(1, 5)],
    send(S, {[1, 2], <<"both">>}),
    send(S, {77, <<"nobody">>}),
    send(S, {bogus}),
    expect_chunks(C1, [<<"m1">>, <<"m2">>, <<"m3">>, <<"m4">>, <<"m5">>, <<"both">>], ?T),
    ?assertEqual(<<"both">>, expect_chunk(C2, ?T)),
    _ = httpdtest_server:wait_stat(S, bad_terms, fun(V) -> V >= 1 end, ?T),
    St = httpdtest_server:wait_stat(S, dropped_no_conn, fun(V) -> V >= 1 end, ?T),
    R = admin_get(S, "/metrics"),
    ?assertEqual(<<"text/plain; version=0.0.4; charset=utf-8">>,
                 header(maps:get(headers, R), <<"content-type">>)),
    check_lines(binary:split(maps:get(body, R), <<"\n">>, [global, trim])),
    M = metrics(S),
    Want = #{<<"httpdcnode_streams_open">> => 2,
             <<"httpdcnode_uids_online">> => 2,
             <<"httpdcnode_messages_received_total">> => maps:get(msgs_in, St),
             <<"httpdcnode_deliveries_total">> => 7,
             <<"httpdcnode_bytes_out_total">> => maps:get(bytes_out, St),
             <<"httpdcnode_messages_dropped_total{reason=\"no_conn\"}">> => 1,
             <<"httpdcnode_messages_dropped_total{reason=\"bad_term\"}">> => 1,
             <<"httpdcnode_messages_dropped_total{reason=\"bad_uid\"}">> => 0,
             <<"httpdcnode_http_rejected_total{reason=\"not_found\"}">> => 0,
             <<"httpdcnode_streams_closed_total{reason=\"client\"}">> => 0,
             <<"httpdcnode_erlang_nodes">> => maps:get(erl_nodes, St),
             <<"httpdcnode_delivery_seconds_count">> => 7,
             <<"httpdcnode_delivery_seconds_bucket{le=\"+Inf\"}">> => 7},
    ?assertEqual(Want, maps:with(maps:keys(Want), M)),
    ?assert(maps:get(<<"httpdcnode_resident_memory_bytes">>, M) > 1000000),
    Sum = maps:get(<<"httpdcnode_delivery_seconds_sum">>, M),
    ?assert(Sum > 0 andalso Sum < 7 * 5),
    %% the buckets are cumulative
    Les = [<<"0.00005">>, <<"0.0001">>, <<"0.00025">>, <<"0.0005">>, <<"0.001">>, <<"0.0025">>,
           <<"0.005">>, <<"0.01">>, <<"0.025">>, <<"0.05">>, <<"0.1">>, <<"0.25">>, <<"0.5">>,
           <<"1">>, <<"2.5">>, <<"+Inf">>],
    Counts = [maps:get(<<"httpdcnode_delivery_seconds_bucket{le=\"", L/binary, "\"}">>, M)
              || L <- Les],
    ?assertEqual(Counts, lists:sort(Counts)),
    close(C1),
    close(C2),
    wait_until(fun() ->
                       V = maps:get(<<"httpdcnode_streams_closed_total{reason=\"client\"}">>,
                                    metrics(S)),
                       {V =:= 2, V}
               end, ?T, client_closes_in_metrics).

%% Every line is a comment (# HELP name text, # TYPE name type) or a sample
%% "name[{labels}] value" of the family announced last.
check_lines(Lines) ->
    lists:foldl(fun check_line/2, none, Lines).

check_line(<<"# HELP ", Rest/binary>>, _Family) ->
    [Name, Help] = binary:split(Rest, <<" ">>),
    ?assertMatch(<<"httpdcnode_", _/binary>>, Name),
    ?assert(byte_size(Help) > 0),
    {help, Name};
check_line(<<"# TYPE ", Rest/binary>>, {help, Name}) ->
    [Name, Type] = binary:split(Rest, <<" ">>),
    ?assert(lists:member(Type, [<<"gauge">>, <<"counter">>, <<"histogram">>])),
    {family, Name, Type};
check_line(Line, Family = {family, Name, Type}) ->
    {match, [Sample, _Value]} =
        re:run(Line, "^([a-z_]+)(?:\\{[a-z_]+=\"[^\"]*\"\\})? ([0-9]+(?:\\.[0-9]+)?)$",
               [{capture, all_but_first, binary}]),
    Allowed = case Type of
                  <<"histogram">> -> [<<Name/binary, S/binary>>
                                      || S <- [<<"_bucket">>, <<"_sum">>, <<"_count">>]];
                  _ -> [Name]
              end,
    ?assert(lists:member(Sample, Allowed)),
    Family;
check_line(Line, State) ->
    erlang:error({unexpected_line, Line, State}).

same(S) ->
    ?assertEqual(port_of(S), admin_port_of(S)),
    [?assertEqual({P, 200}, status(port_of(S), P)) || P <- ["/stats", "/metrics", "/probe"]],
    C = open_stream(S, 4),
    send(S, {4, <<"one listener">>}),
    ?assertEqual(<<"one listener">>, expect_chunk(C, ?T)),
    ?assertMatch(#{streams_open := 1}, stats(S)),
    close(C).

no_admin(S) ->
    [?assertEqual({P, 404}, status(port_of(S), P)) || P <- ["/stats", "/metrics", "/probe"]],
    ?assertError({no_admin_listener, _}, stats(S)),
    C = open_stream(S, 5),
    send(S, {5, <<"fine">>}),
    ?assertEqual(<<"fine">>, expect_chunk(C, ?T)),
    close(C).

explicit_in_use() ->
    {ok, L} = gen_tcp:listen(0, [{ip, {127, 0, 0, 1}}]),
    {ok, Taken} = inet:port(L),
    try
        Args = ["--listen", "127.0.0.1:" ++ integer_to_list(free_port()),
                "--admin-listen", "127.0.0.1:" ++ integer_to_list(Taken),
                "--name", unique("c1adm") ++ "@localhost",
                "--master", "", "--cookie", "x"],
        {St, Out} = run_cli(Args, 10000),
        Lines = [X || X <- binary:split(Out, <<"\n">>, [global, trim]), X =/= <<>>],
        ?assertEqual({exit_status, 2}, {exit_status, St}),
        ?assertMatch({one_line, [_]}, {one_line, Lines}),
        [Line] = Lines,
        ?assertNotEqual(nomatch, binary:match(Line, <<"--admin-listen">>)),
        ?assertNotEqual(nomatch, binary:match(Line, integer_to_binary(Taken)))
    after
        gen_tcp:close(L)
    end.

%% 127.0.0.1:8001, the default, held for the test: by us if it is free,
%% else it is taken already, which is what the test needs.
hold_default() ->
    case gen_tcp:listen(8001, [{ip, {127, 0, 0, 1}}]) of
        {ok, L} -> L;
        {error, eaddrinuse} -> taken_by_another
    end.

release_default(taken_by_another) -> ok;
release_default(L) -> gen_tcp:close(L).

default_in_use() ->
    S = httpdtest_server:start_server(#{admin => default}),
    try
        C = open_stream(S, 6),
        send(S, {6, <<"served">>}),
        ?assertEqual(<<"served">>, expect_chunk(C, ?T)),
        close(C),
        ?assertEqual({"/stats", 404}, status(port_of(S), "/stats")),
        Log = httpdtest_os:log_tail(maps:get(log, S), 100),
        ?assertMatch([_], [L || L <- binary:split(Log, <<"\n">>, [global]),
                                binary:match(L, <<"127.0.0.1:8001 is in use">>) =/= nomatch]),
        ?assertEqual(running, httpdtest_os:proc_status(S))
    after
        httpdtest_server:stop_server(S)
    end.
