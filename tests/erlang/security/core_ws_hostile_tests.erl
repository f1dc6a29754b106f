%% SPDX-License-Identifier: Apache-2.0
%% GET /ws/N against WebSocket clients that mean harm, on plain sockets: a
%% pinger that never reads its pongs, messages that never end, ping and
%% data-frame floods; and a polite client that none of the bounds touches.
-module(core_ws_hostile_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [send/2, stats/1, wait_stat/4, port_of/1]).
-import(httpdtest_os, [scaled/1]).
-import(httpdtest_raw, [read_until/3, take/2, recv_frame/1, frame/2, frame/3, sync/1]).

-define(T, 5000).
-define(KEY, "dGhlIHNhbXBsZSBub25jZQ==").
-define(UPGRADE, ["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13",
                  "Sec-WebSocket-Key: " ?KEY]).
-define(POLICY, 1008).
-define(BACKLOG, 65568).        % the least --max-backlog with 64 KB messages

hostile_test_() ->
    [httpdtest_server:server_test("a pong that passes --max-backlog ends the stream: a "
                                  "pinger that never reads, each ping in two sends; the "
                                  "server lives and serves",
                                  #{max_message => 512, max_backlog => 1024}, 90,
                                  fun pong_ends_stream/1),
     httpdtest_server:server_test("the same within the ping budget: the pong of a ping in "
                                  "two reads passes --max-backlog and ends it (slow_closed)",
                                  #{max_backlog => ?BACKLOG, extra_args => ["--heartbeat", "0"]},
                                  60,
                                  fun paced_pong_ends_stream/1),
     httpdtest_server:server_test("the pings of one read get one pong, the last", #{}, 30,
                                  fun coalesced/1),
     httpdtest_server:server_test("a message in 64 frames is taken, in 65 closed with 1008",
                                  #{}, 30, fun fragments/1),
     httpdtest_server:server_test("a message not whole 10 s after its first frame, its "
                                  "client answering pings: 1008",
                                  #{extra_args => ["--heartbeat", "1"]}, 60, fun too_slow/1),
     httpdtest_server:server_test("a fragment, then nothing (no heartbeat for 120 s): closed "
                                  "1008 at 10 s, not at the next heartbeat",
                                  #{extra_args => ["--heartbeat", "120"]}, 90,
                                  fun silent_fragment/1),
     httpdtest_server:server_test("two ping flooders: closed with 1008 at once, counted, "
                                  "/stats answering all along", #{}, 30, fun ping_flood/1),
     httpdtest_server:server_test("a flooder that has not read what was sent to it: closed "
                                  "with 1008, its close frame after every message, no reset",
                                  #{}, 30, fun close_behind_unread/1),
     httpdtest_server:server_test("300 WebSockets ended at once, their clients silent: 256 "
                                  "linger, 44 closed at once and counted, every client gets "
                                  "its close frame; the slots free as the clients close",
                                  #{}, 60, fun linger_bound/1),
     httpdtest_server:server_test("a flood of 4 KB data frames: closed with 1008, counted",
                                  #{}, 30, fun data_flood/1),
     httpdtest_server:server_test("a client that pings once a second and sends a few "
                                  "messages is never closed", #{}, 30, fun polite/1)].

%%% ---------------------------------------------------------------- cases

%% The pong of a ping whose frame began in an earlier read passes
%% --max-backlog and ends the stream, which frees the frame: the server
%% must touch it no more (under ASan the old code wrote to it, and died).
%% Up to 300 connections, 40,000 pings or 30 s; the ping budget may close
%% each one long before.
pong_ends_stream(S) ->
    Ping = frame(9, binary:copy(<<"p">>, 125)),
    <<Head:60/binary, Tail/binary>> = Ping,
    Deadline = now_ms() + 30000,
    Sent = pingers(S, Head, Tail, 300, 40000, Deadline),
    ?assert(Sent > 0),
    ?assertEqual(running, httpdtest_os:proc_status(S)),
    wait_stat(S, streams_open, fun(V) -> V =:= 0 end, ?T),
    St = stats(S),
    ?assert(maps:get(ws_policy_closed, St, 0) + maps:get(slow_closed, St) >= 1),
    Other = open(S, 2),
    send(S, {2, <<"still serving">>}),
    ?assertEqual({1, 1, <<"still serving">>}, recv_frame(Other)),
    gen_tcp:close(Other).

pingers(_S, _Head, _Tail, 0, _Left, _Deadline) -> 0;
pingers(S, Head, Tail, Conns, Left, Deadline) ->
    ?assertEqual(running, httpdtest_os:proc_status(S)),
    Sock = open(S, 1, [{recbuf, 1024}, {nodelay, true}]),
    N = pinger(Sock, Head, Tail, 0, Left, Deadline),
    gen_tcp:close(Sock),
    case N < Left andalso now_ms() < Deadline of
        true -> N + pingers(S, Head, Tail, Conns - 1, Left - N, Deadline);
        false -> N
    end.

%% Sends pings in two pieces each, never reading; the pings sent until a
%% send fails (the server closed), Left are sent or Deadline passed.
pinger(_Sock, _Head, _Tail, N, Left, _Deadline) when N >= Left -> N;
pinger(Sock, Head, Tail, N, Left, Deadline) ->
    case now_ms() < Deadline andalso gen_tcp:send(Sock, Head) =:= ok
        andalso gen_tcp:send(Sock, Tail) =:= ok of
        true -> pinger(Sock, Head, Tail, N + 1, Left, Deadline);
        false -> N
    end.

%% Within the ping budget: messages fill the kernel's buffers and the
%% backlog to 200 bytes short of --max-backlog, then each ping comes in two
%% reads (its frame waits in a slot between them) and the second pong
%% passes --max-backlog and ends the stream (slow_closed).
paced_pong_ends_stream(S) ->
    Sock = open(S, 1, [{recbuf, 1024}, {nodelay, true}]),
    Held = fill(S, 16384, 500),
    Short = ?BACKLOG - Held - 4 - 200,
    ?assert(Short >= 126),
    send(S, {1, binary:copy(<<"t">>, Short)}),
    sync(S),
    #{backlog_bytes := Full, slow_closed := 0} = stats(S),
    ?assert(Full > ?BACKLOG - 400),
    <<Head:60/binary, Tail/binary>> = frame(9, binary:copy(<<"p">>, 125)),
    [begin
         _ = gen_tcp:send(Sock, Head),
         receive after 30 -> _ = gen_tcp:send(Sock, Tail) end,
         receive after 30 -> ok end
     end || _ <- lists:seq(1, 4)],
    St = wait_stat(S, slow_closed, fun(V) -> V =:= 1 end, ?T),
    ?assertMatch(#{streams_open := 0, backlog_bytes := 0}, St),
    ?assertEqual(0, maps:get(ws_policy_closed, St, 0)),
    ?assertEqual(running, httpdtest_os:proc_status(S)),
    gen_tcp:close(Sock),
    Other = open(S, 2),
    send(S, {2, <<"still serving">>}),
    ?assertEqual({1, 1, <<"still serving">>}, recv_frame(Other)),
    gen_tcp:close(Other).

%% Messages of Size to uid 1 (whose client never reads) until some are
%% held in its backlog: the bytes held.
fill(_S, _Size, 0) -> erlang:error(backlog_never_started);
fill(S, Size, Left) ->
    send(S, {1, binary:copy(<<"f">>, Size)}),
    sync(S),
    case stats(S) of
        #{backlog_bytes := 0} -> fill(S, Size, Left - 1);
        #{backlog_bytes := B} -> B
    end.

coalesced(S) ->
    Sock = open(S, 3),
    ok = gen_tcp:send(Sock, [frame(9, <<"one">>), frame(9, <<"two">>), frame(9, <<"three">>)]),
    ?assertEqual({1, 10, <<"three">>}, recv_frame(Sock)),
    %% and no other pong after it
    send(S, {3, <<"next">>}),
    ?assertEqual({1, 1, <<"next">>}, recv_frame(Sock)),
    gen_tcp:close(Sock).

fragments(S) ->
    Sock = open(S, 4),
    ok = gen_tcp:send(Sock, [frame(1, <<"a">>, #{fin => 0}),
                             [frame(0, <<"b">>, #{fin => 0}) || _ <- lists:seq(1, 62)],
                             frame(0, <<"c">>), frame(9, <<"after 64">>)]),
    ?assertEqual({1, 10, <<"after 64">>}, recv_frame(Sock)),
    ?assertMatch(#{ws_ignored := 1, ws_policy_closed := 0}, stats(S)),
    %% The 65th frame of a message (empty ones: they cost the client nothing).
    Sock2 = open(S, 4),
    ok = gen_tcp:send(Sock2, [frame(2, <<>>, #{fin => 0}),
                              [frame(0, <<>>, #{fin => 0}) || _ <- lists:seq(1, 64)]]),
    expect_close(Sock2, ?POLICY),
    St = wait_stat(S, ws_policy_closed, fun(V) -> V =:= 1 end, ?T),
    ?assertMatch(#{ws_bad_frames := 0, ws_ignored := 1, streams_open := 1}, St),
    ?assertEqual(1, maps:get(<<"httpdcnode_streams_closed_total{reason=\"ws_policy\"}">>,
                             httpdtest_server:metrics(S))),
    gen_tcp:close(Sock).

%% The server pings every second and the client answers: it is alive,
%% but its message never ends.
too_slow(S) ->
    Sock = open(S, 5),
    T0 = now_ms(),
    ok = gen_tcp:send(Sock, frame(1, <<"never ends">>, #{fin => 0})),
    {Pings, Code} = answer_until_close(Sock, 0, T0 + scaled(20000)),
    Elapsed = now_ms() - T0,
    ?assertEqual(?POLICY, Code),
    %% not before its time (a coarse clock: within its second)
    ?assert(Elapsed >= 8500),
    ?assert(Elapsed =< scaled(14000)),
    ?assert(Pings >= 5),
    ?assertMatch(#{ws_policy_closed := 1, ws_dead := 0, ws_bad_frames := 0}, stats(S)).

%% The client starts a message and sends nothing more, and the server has
%% no heartbeat for 120 s that could notice it: its own timer closes it,
%% not before 10 s and long before the heartbeat (which took up to 10 s +
%% --heartbeat). The bound on a busy machine: 30 s, scaled.
silent_fragment(S) ->
    Sock = open(S, 7),
    ?assertEqual(<<>>, get({buf, Sock})),
    T0 = now_ms(),
    ok = gen_tcp:send(Sock, frame(1, <<"never ends">>, #{fin => 0})),
    Got = gen_tcp:recv(Sock, 4, scaled(30000)),
    Elapsed = now_ms() - T0,
    io:format(user, "~nclosed after ~b ms~n", [Elapsed]),
    ?assertEqual({ok, <<16#88, 2, ?POLICY:16>>}, Got),
    ?assert(Elapsed >= 10000),
    ?assertEqual({error, closed}, gen_tcp:recv(Sock, 0, ?T)),
    ?assertMatch(#{ws_policy_closed := 1, ws_dead := 0, ws_bad_frames := 0, streams_open := 0},
                 stats(S)).

answer_until_close(Sock, Pings, Deadline) ->
    ?assert(now_ms() < Deadline),
    case recv_frame(Sock) of
        {1, 9, P} ->
            ok = gen_tcp:send(Sock, frame(10, P)),
            answer_until_close(Sock, Pings + 1, Deadline);
        {1, 8, <<Code:16, _/binary>>} ->
            ?assertEqual({error, closed}, gen_tcp:recv(Sock, 0, ?T)),
            {Pings, Code}
    end.

ping_flood(S) ->
    Pings = iolist_to_binary(lists:duplicate(100, frame(9, <<>>))),
    floods(S, Pings, 2),
    ?assertMatch(#{ws_bad_frames := 0}, stats(S)).

data_flood(S) ->
    Frame = frame(2, binary:copy(<<"d">>, 4096)),
    floods(S, Frame, 1),
    #{ws_ignored := Ignored, ws_bad_frames := 0} = stats(S),
    %% cut off past 64 KiB in a second of the clock (so twice that at most
    %% when the flood spans the turn of a second): nowhere near the 10 s of
    %% frames sent
    ?assert(Ignored =< 32).

%% 8 KB of messages wait in the server's socket for a client whose window is
%% small (it has not read); it then floods pings, 192 KB, far past what the
%% server reads before it closes (one read, then 64 KB drained). Closing
%% the socket with the rest unread would make the kernel reset the
%% connection and drop the 8 KB and the close frame it had not sent yet.
%% Read afterwards, every message is there, then the close frame.
close_behind_unread(S) ->
    Sock = open(S, 40, [{recbuf, 2048}]),
    Msg = binary:copy(<<"m">>, 1024),
    Closed0 = maps:get(ws_policy_closed, stats(S)),
    [send(S, {40, Msg}) || _ <- lists:seq(1, 8)],
    wait_stat(S, bytes_out, fun(B) -> B >= 8 * 1024 end, ?T),
    Flood = iolist_to_binary(lists:duplicate(32000, frame(9, <<>>))),
    spawn_link(fun() -> gen_tcp:send(Sock, Flood) end),    % may block: the server's window
    wait_stat(S, ws_policy_closed, fun(V) -> V =:= Closed0 + 1 end, ?T),
    Frames = read_to_close(Sock, []),
    ?assertEqual({lists:duplicate(8, {1, 1, Msg}), ?POLICY},
                 {[F || F = {_, Op, _} <- Frames, Op =/= 10 andalso Op =/= 8],
                  case lists:last(Frames) of {1, 8, <<C:16, _/binary>>} -> C; Last -> Last end}),
    gen_tcp:close(Sock).

%% A drain of 0 s ends every stream in one turn of the loop, so no
%% lingering slot frees before the last is taken: exactly 300 - 256 are
%% closed at once. A client that sent nothing has no unread input, so
%% those get a FIN, not a reset: their close frame arrives too.
linger_bound(S) ->
    N = 300,
    Socks = [open(S, 100 + I) || I <- lists:seq(1, N)],
    wait_stat(S, streams_open, fun(V) -> V =:= N end, ?T),
    #{linger_full := 0, lingering := 0} = stats(S),
    send(S, {drain, 0}),
    St = wait_stat(S, streams_open, fun(V) -> V =:= 0 end, ?T),
    ?assertEqual(N - 256, maps:get(linger_full, St)),
    ?assert(maps:get(lingering, St) =< 256),
    [begin
         ?assertMatch({1, 8, _}, recv_frame(Sock)),
         ?assertEqual({error, closed}, gen_tcp:recv(Sock, 0, ?T))
     end || Sock <- Socks],
    [gen_tcp:close(Sock) || Sock <- Socks],
    wait_stat(S, lingering, fun(V) -> V =:= 0 end, ?T),
    ?assertMatch(#{<<"httpdcnode_linger_full_total">> := 44},
                 httpdtest_server:metrics(S)).

read_to_close(Sock, Acc) ->
    case catch recv_frame(Sock) of
        {1, 8, _} = F -> lists:reverse([F | Acc]);
        {_, _, _} = F -> read_to_close(Sock, [F | Acc]);
        Other -> lists:reverse([{no_close_frame, Other} | Acc])
    end.

%% N clients send Bytes every millisecond (up to 10 s) without reading;
%% each is closed with 1008 at once and counted, and /stats answers quickly
%% all the while. The sockets are active, so that what the server sends
%% is taken as it comes: once closed, the flood earns a reset, which would
%% lose what is left unread.
floods(S, Bytes, N) ->
    Self = self(),
    Socks = [open(S, 10 + I) || I <- lists:seq(1, N)],
    [ok = inet:setopts(Sock, [{active, true}]) || Sock <- Socks],
    T0 = now_ms(),
    Flooders = [spawn_link(fun() -> Self ! {flooded, self(), flood(Sock, Bytes, 0, T0 + 10000)} end)
                || Sock <- Socks],
    closed_while_answering(S, N, T0 + scaled(3000)),
    [begin
         {Frames, Code} = until_close(Sock, ?T),
         ?assertEqual(?POLICY, Code),
         ?assertEqual([], [F || F <- Frames, element(2, F) =/= 10])   % pongs only
     end || Sock <- Socks],
    [receive {flooded, F, Sent} -> ?assert(Sent > 0) after scaled(15000) -> error(flooding) end
     || F <- Flooders],
    wait_stat(S, streams_open, fun(V) -> V =:= 0 end, ?T),
    [gen_tcp:close(Sock) || Sock <- Socks].

closed_while_answering(S, N, Deadline) ->
    T = now_ms(),
    St = stats(S),
    Took = now_ms() - T,
    ?assert(Took < scaled(1000)),
    case maps:get(ws_policy_closed, St, 0) of
        N -> ok;
        _ ->
            ?assert(now_ms() < Deadline),
            closed_while_answering(S, N, Deadline)
    end.

flood(Sock, Bytes, Sent, Deadline) ->
    case now_ms() < Deadline andalso gen_tcp:send(Sock, Bytes) of
        ok -> receive after 1 -> flood(Sock, Bytes, Sent + 1, Deadline) end;
        _ -> Sent
    end.

%% A ping a second (a library keeping its connection warm) and a message
%% with it, then a burst of 20 messages of 1 KB (a page catching up).
polite(S) ->
    Sock = open(S, 6),
    [begin
         ok = gen_tcp:send(Sock, [frame(9, <<"n", I>>), frame(1, <<"a message">>)]),
         ?assertEqual({1, 10, <<"n", I>>}, recv_frame(Sock)),
         timer:sleep(1000)                 % the client's pace, not a wait
     end || I <- lists:seq(1, 4)],
    ok = gen_tcp:send(Sock, [frame(1, binary:copy(<<"m">>, 1024)) || _ <- lists:seq(1, 20)]),
    ok = gen_tcp:send(Sock, frame(9, <<"last">>)),
    ?assertEqual({1, 10, <<"last">>}, recv_frame(Sock)),
    send(S, {6, <<"still open">>}),
    ?assertEqual({1, 1, <<"still open">>}, recv_frame(Sock)),
    St = stats(S),
    ?assertMatch(#{ws_bad_frames := 0, ws_ignored := 24, streams_open := 1}, St),
    ?assertEqual(0, maps:get(ws_policy_closed, St, 0)),
    gen_tcp:close(Sock).

%%% ---------------------------------------------------------------- helpers

now_ms() -> erlang:monotonic_time(millisecond).

open(S, Uid) -> open(S, Uid, []).

%% GET /ws/Uid, upgraded; the socket (passive), its bytes past the head kept.
open(S, Uid, Opts) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S), [binary, {active, false} | Opts]),
    ok = gen_tcp:send(Sock, httpdtest_http:request_bytes("GET", "/ws/" ++ integer_to_list(Uid),
                                                          "HTTP/1.1", ?UPGRADE)),
    {Head, Rest} = read_until(Sock, <<"\r\n\r\n">>, <<>>),
    ?assertMatch(<<"HTTP/1.1 101 ", _/binary>>, Head),
    put({buf, Sock}, Rest),
    Sock.

expect_close(Sock, Code) ->
    {1, 8, <<Got:16, _/binary>>} = recv_frame(Sock),
    ?assertEqual(Code, Got),
    ?assertEqual({error, closed}, gen_tcp:recv(Sock, 0, ?T)).

%% The frames before the server's close and its code (closed: none came),
%% on an active socket.
until_close(Sock, Timeout) ->
    until_close(Sock, get({buf, Sock}), [], now_ms() + scaled(Timeout)).

until_close(Sock, Buf, Acc, Deadline) ->
    case parse_frame(Buf) of
        {{1, 8, <<Code:16, _/binary>>}, _} -> {lists:reverse(Acc), Code};
        {F, Rest} -> until_close(Sock, Rest, [F | Acc], Deadline);
        more ->
            receive
                {tcp, Sock, Data} -> until_close(Sock, <<Buf/binary, Data/binary>>, Acc, Deadline);
                {tcp_closed, Sock} -> {lists:reverse(Acc), closed};
                {tcp_error, Sock, E} -> {lists:reverse(Acc), {error, E}}
            after max(0, Deadline - now_ms()) -> {lists:reverse(Acc), timeout}
            end
    end.

parse_frame(<<Fin:1, 0:3, Op:4, 0:1, 126:7, L:16, P:L/binary, Rest/binary>>) -> {{Fin, Op, P}, Rest};
parse_frame(<<Fin:1, 0:3, Op:4, 0:1, 127:7, L:64, P:L/binary, Rest/binary>>) -> {{Fin, Op, P}, Rest};
parse_frame(<<Fin:1, 0:3, Op:4, 0:1, L:7, P:L/binary, Rest/binary>>) when L < 126 -> {{Fin, Op, P}, Rest};
parse_frame(_) -> more.
