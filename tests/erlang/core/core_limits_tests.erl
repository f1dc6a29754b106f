%% SPDX-License-Identifier: Apache-2.0
%% Running out of descriptors, and requests pipelined behind a stream.
-module(core_limits_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_http, [open_stream/2, close/1, expect_chunk/2, http_request/2,
                         request_bytes/4]).
-import(httpdtest_server, [send/2, stats/1, port_of/1]).
-import(httpdtest_wait, [wait_until/3]).

-define(T, 5000).
-define(FDS, 300).          % the server's limit; it keeps 32 in reserve
-define(TRIES, 400).        % connections attempted at once, more than it can hold

limits_test_() ->
    [{"descriptors run short: 503 to the surplus, the rest served, recovery after",
      {timeout, 60, fun out_of_fds/0}},
     {"a request pipelined behind a stream request is dropped",
      {timeout, 30, fun pipelined/0}},
     {"a multicast repeating a uid 70,000 times: delivered and kept once",
      {timeout, 60, fun a_uid_listed_many_times/0}},
     {"a term nested 2,000,000 deep is refused; 90,000 deep is served",
      {timeout, 60, fun deep_terms/0}}].

out_of_fds() ->
    S = httpdtest_server:start_server(#{fd_limit => ?FDS}),
    try
        Port = port_of(S),
        %% A burst: every connection is either a working stream or a 503,
        %% never a welcome followed by a close.
        Burst = burst(Port, ?TRIES),
        Welcomed = [Sock || {welcomed, Sock} <- Burst],
        Refused = [x || refused <- Burst],
        io:format(user, "~nfd limit ~p, ~p at once: ~p welcomed, ~p refused with 503~n",
                  [?FDS, ?TRIES, length(Welcomed), length(Refused)]),
        ?assertEqual([], [R || R <- Burst, R =/= refused, element(1, R) =/= welcomed]),
        ?assert(length(Welcomed) > 0),
        ?assert(length(Refused) > 0),
        all_receive(S, Welcomed, <<"after the burst">>),
        close_all(S, Welcomed),
        %% One at a time: streams up to the limit less its small reserve.
        Held = one_by_one(Port, 1, []),
        io:format(user, "one at a time: ~p streams before the first 503~n", [length(Held)]),
        ?assert(length(Held) >= ?FDS - 60),
        ?assert(length(Held) < ?FDS),
        all_receive(S, Held, <<"at the limit">>),
        close_all(S, Held),
        %% Freed: served again, and every refusal was counted.
        ?assert(maps:get(http_no_fds, stats(S)) >= length(Refused) + 1),
        C = open_stream(S, 7),
        send(S, {7, <<"after">>}),
        ?assertEqual(<<"after">>, expect_chunk(C, ?T)),
        close(C)
    after
        httpdtest_server:stop_server(S)
    end.

burst(Port, N) ->
    Self = self(),
    [spawn_link(fun() ->
                        R = try_stream(Port, U),
                        %% the socket must outlive this process
                        [ok = gen_tcp:controlling_process(Sock, Self) || {welcomed, Sock} <- [R]],
                        Self ! {try_result, R}
                end)
     || U <- lists:seq(1, N)],
    [receive {try_result, R} -> R after 20000 -> timeout end || _ <- lists:seq(1, N)].

one_by_one(_Port, U, Acc) when U > ?TRIES -> Acc;
one_by_one(Port, U, Acc) ->
    case try_stream(Port, U) of
        {welcomed, Sock} -> one_by_one(Port, U + 1, [Sock | Acc]);
        refused -> Acc;
        Other -> erlang:error({unexpected, Other, after_streams, length(Acc)})
    end.

all_receive(S, Socks, Msg) ->
    send(S, {broadcast, Msg}),
    [?assertEqual({ok, Msg}, read_chunk(Sock)) || Sock <- Socks].

close_all(S, Socks) ->
    [gen_tcp:close(Sock) || Sock <- Socks],
    true = wait_until(fun() -> maps:get(streams_open, stats(S)) =:= 0 end,
                    10000, streams_closed).

%% welcomed (socket kept open, passive), refused (a 503), or closed.
try_stream(Port, Uid) ->
    case gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}, {packet, http_bin}],
                         10000) of
        {ok, Sock} ->
            ok = gen_tcp:send(Sock, ["GET /test/", integer_to_list(Uid),
                                     " HTTP/1.1\r\nHost: t\r\n\r\n"]),
            R = case gen_tcp:recv(Sock, 0, 15000) of
                    {ok, {http_response, _, 200, _}} -> welcomed;
                    {ok, {http_response, _, 503, _}} -> refused;
                    {error, closed} -> closed;
                    Other -> {unexpected, Other}
                end,
            case R of
                welcomed ->
                    skip_headers(Sock),
                    ok = inet:setopts(Sock, [{packet, raw}]),
                    {ok, _Welcome} = read_chunk(Sock),
                    {welcomed, Sock};
                _ ->
                    gen_tcp:close(Sock),
                    R
            end;
        {error, E} -> {connect_error, E}
    end.

skip_headers(Sock) ->
    case gen_tcp:recv(Sock, 0, ?T) of
        {ok, http_eoh} -> ok;
        {ok, {http_header, _, _, _, _}} -> skip_headers(Sock)
    end.

%% One chunk of a chunked body from a passive raw socket.
read_chunk(Sock) ->
    ok = inet:setopts(Sock, [{packet, line}]),
    {ok, SizeLine} = gen_tcp:recv(Sock, 0, ?T),
    Size = binary_to_integer(string:trim(SizeLine), 16),
    ok = inet:setopts(Sock, [{packet, raw}]),
    {ok, <<Data:Size/binary, "\r\n">>} = gen_tcp:recv(Sock, Size + 2, ?T),
    {ok, Data}.

pipelined() ->
    S = httpdtest_server:start_server(#{}),
    try
        {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S),
                                     [binary, {active, false}, {packet, http_bin}], ?T),
        %% Two requests in one packet: the second is behind a stream that never ends.
        ok = gen_tcp:send(Sock, ["GET /test/5 HTTP/1.1\r\nHost: t\r\n\r\n",
                                 "GET /test/6 HTTP/1.1\r\nHost: t\r\n\r\n"]),
        {ok, {http_response, _, 200, _}} = gen_tcp:recv(Sock, 0, ?T),
        skip_headers(Sock),
        ok = inet:setopts(Sock, [{packet, raw}]),
        {ok, <<"Welcome, Url: '/test/5' Id: 5\n">>} = read_chunk(Sock),
        send(S, {5, <<"to five">>}),
        ?assertEqual({ok, <<"to five">>}, read_chunk(Sock)),
        St = stats(S),
        ?assertEqual(1, maps:get(streams_open, St)),
        ?assertEqual(1, maps:get(uids_online, St)),
        %% Nothing (such as a second response) came in between: the next
        %% bytes are the next chunk.
        send(S, {5, <<"marker">>}),
        ?assertEqual({ok, <<"marker">>}, read_chunk(Sock)),
        gen_tcp:close(Sock)
    after
        httpdtest_server:stop_server(S)
    end.

%% The write batch holds 65,536 deliveries; a multicast listing one uid
%% 70,000 times fills it while a stream of that uid is being ended for
%% not reading. The stream must be ended once and never touched again.
a_uid_listed_many_times() ->
    S = httpdtest_server:start_server(#{max_message => 512, max_backlog => 1024}),
    try
        {ok, Stuck} = gen_tcp:connect({127, 0, 0, 1}, port_of(S),
                                      [binary, {active, false}, {recbuf, 4096}], ?T),
        ok = gen_tcp:send(Stuck, "GET /test/2 HTTP/1.1\r\nHost: t\r\n\r\n"),
        true = wait_until(fun() -> maps:get(streams_open, stats(S)) =:= 1 end, ?T, stream),
        Reader = open_stream(S, 3),
        Pad = binary:copy(<<"x">>, 500),
        send(S, {lists:duplicate(70000, 2), Pad}),
        send(S, {lists:duplicate(70000, 2), Pad}),
        send(S, {3, <<"alive">>}),
        ?assertEqual(<<"alive">>, expect_chunk(Reader, 20000)),
        %% A uid listed 70,000 times gets the message once, and keeps it once.
        St = stats(S),
        ?assertEqual(2 * 69999, maps:get(multicast_repeats, St)),
        ?assertEqual(3, maps:get(deliveries, St)),
        ?assertEqual(3, maps:get(history_entries, St)),
        ?assertEqual(0, maps:get(slow_closed, St)),
        ?assertEqual(2, maps:get(streams_open, St)),
        close(Reader),
        gen_tcp:close(Stuck)
    after
        httpdtest_server:stop_server(S)
    end.

deep_terms() ->
    S = httpdtest_server:start_server(#{max_message => 1000000}),
    try
        C = open_stream(S, 3),
        Bad0 = maps:get(bad_terms, stats(S)),
        send(S, {3, lists:foldl(fun(_, A) -> [A] end, [], lists:seq(1, 2000000))}),
        Deep = lists:foldl(fun(_, A) -> [A, <<"a">>] end, [], lists:seq(1, 90000)),
        send(S, {3, Deep}),
        ?assertEqual(binary:copy(<<"a">>, 90000), expect_chunk(C, 20000)),
        ?assertEqual(Bad0 + 1, maps:get(bad_terms, stats(S))),
        close(C)
    after
        httpdtest_server:stop_server(S)
    end.
