%% SPDX-License-Identifier: Apache-2.0
%% --writers: large fan-outs are written by several threads. Whatever the
%% threads, every live stream gets every message once and in order, a
%% client that vanished is ended and counted, and one that does not read is
%% ended as a slow consumer without slowing the others.
-module(core_writers_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [send/2, stats/1, port_of/1]).
-import(httpdtest_http, [close/1, expect_chunks/3, open_streams/4]).
-import(httpdtest_wait, [wait_until/3]).

-define(T, 20000).
-define(LIVE, 200).       % uids 2..201 read everything
-define(RESET, 20).       % uids 202..221 reset their connection mid-way
-define(MSGS, 100).       % multicasts to all 221 uids (and the stuck uid 1)

writers_test_() ->
    [{"--writers " ++ integer_to_list(W) ++ ": multicasts to 221 streams, some reset, "
      "one stuck: each live stream gets all in order",
      {timeout, 120, fun() -> fan_out(W) end}} || W <- [1, 4]].

fan_out(Writers) ->
    S = httpdtest_server:start_server(#{max_message => 512, max_backlog => 4096,
                                        extra_args => ["--writers",
                                                       integer_to_list(Writers)]}),
    try
        Stuck = raw_stream(S, 1, [{recbuf, 4096}]),
        Live = open_streams(S, lists:seq(2, ?LIVE + 1), 50, #{}),
        Resetters = [raw_stream(S, U, []) || U <- lists:seq(?LIVE + 2, ?LIVE + 1 + ?RESET)],
        true = wait_until(fun() -> maps:get(streams_open, stats(S)) =:= 1 + ?LIVE + ?RESET end,
                          ?T, all_streams),
        Closed0 = maps:get(client_closed, stats(S)),
        Uids = lists:seq(1, ?LIVE + 1 + ?RESET),
        Pad = binary:copy(<<"x">>, 400),
        Msg = fun(I) -> <<I:32, Pad/binary>> end,
        [send(S, {Uids, Msg(I)}) || I <- lists:seq(1, ?MSGS div 2)],
        %% The resets land while writes to those streams are on the way.
        [reset(Sock) || Sock <- Resetters],
        %% More than the kernel's buffers hold for the stuck stream: it gets a
        %% backlog (so the next multicasts pass it to the loop, not a writer
        %% thread), then passes --max-backlog.
        [send(S, {1, Pad}) || _ <- lists:seq(1, 10000)],
        [send(S, {Uids, Msg(I)}) || I <- lists:seq(?MSGS div 2 + 1, ?MSGS)],
        Want = [Msg(I) || I <- lists:seq(1, ?MSGS)],
        [ok = expect_chunks(C, Want, ?T) || {_Uid, C} <- Live],
        #{streams_open := ?LIVE} =
            wait_until(fun() ->
                               St = stats(S),
                               Open = maps:get(streams_open, St),
                               Closed = maps:get(client_closed, St) - Closed0,
                               {Open =:= ?LIVE andalso Closed =:= ?RESET,
                                #{streams_open => Open, client_closed => Closed,
                                  slow_closed => maps:get(slow_closed, St)}}
                       end, ?T, resets_counted),
        St = stats(S),
        ?assertEqual(1, maps:get(slow_closed, St)),
        ?assertEqual(?LIVE, maps:get(uids_online, St)),
        [close(C) || {_, C} <- Live],
        gen_tcp:close(Stuck)
    after
        httpdtest_server:stop_server(S)
    end.

%% A stream read by hand: headers and welcome taken, then nothing more.
raw_stream(S, Uid, Opts) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S), [binary, {active, false} | Opts],
                                 ?T),
    ok = gen_tcp:send(Sock, ["GET /test/", integer_to_list(Uid), " HTTP/1.1\r\nHost: t\r\n\r\n"]),
    Welcome = iolist_to_binary(io_lib:format("Welcome, Url: '/test/~b' Id: ~b", [Uid, Uid])),
    ok = recv_until(Sock, Welcome, <<>>),
    Sock.

recv_until(Sock, Want, Got) ->
    case binary:match(Got, Want) of
        nomatch ->
            {ok, More} = gen_tcp:recv(Sock, 0, ?T),
            recv_until(Sock, Want, <<Got/binary, More/binary>>);
        _ ->
            ok
    end.

%% Closes with a reset (SO_LINGER 0): the server's next write fails.
reset(Sock) ->
    ok = inet:setopts(Sock, [{linger, {true, 0}}]),
    gen_tcp:close(Sock).
