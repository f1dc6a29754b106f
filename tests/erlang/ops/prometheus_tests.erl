%% SPDX-License-Identifier: Apache-2.0
%% A real Prometheus (Debian's /usr/bin/prometheus) scrapes the server's
%% admin port every second; its query API must come to show the server's
%% streams, deliveries, drops and delivery-time histogram, and follow a
%% change. Prometheus runs on loopback with a data directory of its own
%% and is ended by its pid (run-tests.sh ends it if this node dies first).
-module(prometheus_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [server_test/4, send/2, admin_port_of/1]).
-import(httpdtest_http, [open_stream/2, expect_chunks/3, close/1, http_request/2]).
-import(httpdtest_wait, [wait_until/3]).
-import(httpdtest_os, [free_port/0, unique/1]).
-import(httpdtest_json, [json_decode/1]).

-define(T, 5000).
-define(PROMETHEUS, "/usr/bin/prometheus").
-define(SCRAPED_WITHIN, 30000).   % ms: start-up, first scrape, one more after a change

prometheus_test_() ->
    server_test("a real Prometheus scrapes /metrics and sees the traffic", #{}, 120,
                fun scraped/1).

scraped(S) ->
    case filelib:is_regular(?PROMETHEUS) of
        true -> ok;
        false -> erlang:error({missing, ?PROMETHEUS, "run scripts/install-deps.sh"})
    end,
    Uids = [11, 12, 13],
    Conns = [{U, open_stream(S, U)} || U <- Uids],
    Msgs = [<<"msg ", (integer_to_binary(I))/binary>> || I <- lists:seq(1, 10)],
    [send(S, {U, M}) || M <- Msgs, U <- Uids],
    [ok = expect_chunks(C, Msgs, ?T) || {_, C} <- Conns],
    send(S, {99, <<"nobody listens">>}),
    httpdtest_server:wait_stat(S, dropped_no_conn, fun(V) -> V =:= 1 end, ?T),
    {Prom, PromPort, Dir} = start_prometheus(admin_port_of(S)),
    try
        Expect = fun(Query, Want) -> wait_query(PromPort, Query, Want, Prom) end,
        Expect("up{job=\"httpdcnode\"}", 1),
        Expect("httpdcnode_streams_open", 3),
        Expect("httpdcnode_deliveries_total", 30),
        Expect("httpdcnode_delivery_seconds_count", 30),
        Expect("httpdcnode_delivery_seconds_bucket{le=\"+Inf\"}", 30),
        Expect("httpdcnode_messages_dropped_total{reason=\"no_conn\"}", 1),
        %% Prometheus follows a change at the next scrapes.
        {_, C13} = lists:keyfind(13, 1, Conns),
        close(C13),
        Expect("httpdcnode_streams_open", 2),
        Expect("httpdcnode_streams_closed_total{reason=\"client\"}", 1),
        %% the histogram makes sense to PromQL: a median within the buckets
        Median = query(PromPort, "histogram_quantile(0.5, httpdcnode_delivery_seconds_bucket)"),
        ?assertMatch({value, V} when is_number(V) andalso V > 0 andalso V =< 2.5, Median)
    after
        httpdtest_os:stop_proc(Prom),
        file:del_dir_r(Dir)
    end,
    [close(C) || {U, C} <- Conns, U =/= 13].

start_prometheus(AdminPort) ->
    Name = unique("prometheus"),
    Dir = filename:join([httpdtest_os:repo_root(), "build", "tests", Name]),
    Config = filename:join(Dir, "prometheus.yml"),
    ok = filelib:ensure_dir(Config),
    ok = file:write_file(Config, ["global:\n"
                                  "  scrape_interval: 1s\n"
                                  "  evaluation_interval: 1s\n"
                                  "scrape_configs:\n"
                                  "  - job_name: httpdcnode\n"
                                  "    scrape_interval: 1s\n"
                                  "    scrape_timeout: 1s\n"
                                  "    static_configs:\n"
                                  "      - targets: ['127.0.0.1:",
                                  integer_to_list(AdminPort), "']\n"]),
    Port = free_port(),
    %% Loopback only; no lifecycle or admin API; nothing leaves the host
    %% (Prometheus has no update check or telemetry).
    Args = ["--config.file=" ++ Config,
            "--storage.tsdb.path=" ++ filename:join(Dir, "data"),
            "--web.listen-address=127.0.0.1:" ++ integer_to_list(Port),
            "--log.level=warn"],
    Log = httpdtest_os:log_path(Name),
    %% Its config path holds Name: run-tests.sh can tell the leftover is it.
    P = httpdtest_os:spawn_os(?PROMETHEUS, Args, Log, Name),
    {P, Port, Dir}.

%% Waits until the query's one result is Want; on timeout says what
%% Prometheus last answered and shows its log.
wait_query(Port, Query, Want, Prom) ->
    try
        wait_until(fun() ->
                           case query(Port, Query) of
                               {value, Want} -> true;
                               Other -> {false, Other}
                           end
                   end, ?SCRAPED_WITHIN, {prometheus_query, Query, Want})
    catch error:E ->
            #{log := Log} = Prom,
            io:format(user, "~n--- prometheus (~p), end of its log ~s ---~n~s~n---~n",
                      [httpdtest_os:proc_status(Prom), Log,
                       httpdtest_os:log_tail(Log)]),
            erlang:error(E)
    end.

%% {value, Number} for a query with one result; otherwise what came back.
query(Port, Query) ->
    Path = "/api/v1/query?" ++ uri_string:compose_query([{"query", Query}]),
    try http_request(Port, "GET " ++ Path ++ " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "Connection: close\r\n\r\n") of
        #{status := 200, body := Body} ->
            case json_decode(Body) of
                #{<<"status">> := <<"success">>,
                  <<"data">> := #{<<"result">> := [#{<<"value">> := [_, V]}]}} ->
                    {value, number(V)};
                #{<<"data">> := #{<<"result">> := R}} -> {results, R};
                Other -> {unexpected, Other}
            end;
        R -> {http, maps:get(status, R, none)}
    catch C:E -> {not_answering, C, E}
    end.

number(B) ->
    try binary_to_integer(B)
    catch error:badarg ->
            try binary_to_float(B) catch error:badarg -> B end
    end.
