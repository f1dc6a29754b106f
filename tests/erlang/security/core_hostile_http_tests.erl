%% SPDX-License-Identifier: Apache-2.0
%% HTTP clients that try to exhaust the server: each test is an attack that
%% hurt an earlier version (memory, descriptors or CPU) and the bound that
%% now stops it.
-module(core_hostile_http_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_http, [open_stream/2, close/1, expect_chunk/2, welcome/1]).
-import(httpdtest_server, [send/2, stats/1, port_of/1, wait_stat/4]).
-import(httpdtest_wait, [wait_until/3]).

-define(T, 5000).
-define(MB, (1024 * 1024)).

hostile_http_test_() ->
    [httpdtest_server:server_test(
       "a client pipelining requests without reading holds a bounded input",
       #{}, 60, fun pipelining_reader/1),
     httpdtest_server:server_test(
       "a header trickled a byte at a time is cut at --header-timeout",
       #{header_timeout => 2}, 60, fun slow_header/1),
     httpdtest_server:server_test(
       "tricklers holding every descriptor are cut and real users served",
       #{header_timeout => 2, fd_limit => 200}, 90, fun slowloris_crowd/1),
     httpdtest_server:server_test(
       "a stream client sending bytes past the allowance is ended",
       #{}, 60, fun talking_stream/1),
     httpdtest_server:server_test(
       "the largest backlogs are ended past --max-backlog-total",
       #{max_backlog => 64 * ?MB, max_backlog_total => 10 * ?MB, max_message => 65536},
       120, fun backlog_total/1),
     httpdtest_server:server_test(
       "a body whose end could be read two ways (Content-Length twice, or with "
       "Transfer-Encoding): 400, counted, and nothing behind it taken as a request",
       #{}, 60, fun smuggling/1),
     httpdtest_server:server_test(
       "a peer that vanishes without FIN or RST is dropped by keepalive",
       #{keepalive => 1}, 60, fun vanished_peer/1)].

%%% ---------------------------------------------------------------- cases

%% The client writes pipelined requests (each a small 404) and never reads: the server stops
%% reading it once a little is buffered, so the client's sends block.
pipelining_reader(S) ->
    Before = maps:get(memory, stats(S)),
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S),
                                 [binary, {active, false}, {send_timeout, 2000},
                                  {recbuf, 4096}]),
    Req = <<"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n">>,
    Block = binary:copy(Req, 65536 div byte_size(Req)),
    Sent = send_until_blocked(Sock, Block, 0, 256 * ?MB),
    After = maps:get(memory, stats(S)),
    gen_tcp:close(Sock),
    io:format(user, "~npipelined ~b KB before the server stopped reading; "
              "its memory grew by ~b KB~n", [Sent div 1024, (After - Before) div 1024]),
    ?assert(Sent < 64 * ?MB),
    httpdtest_os:memory_judged() andalso ?assert(After - Before < 32 * ?MB).

send_until_blocked(_Sock, _Block, Sent, Max) when Sent >= Max -> Sent;
send_until_blocked(Sock, Block, Sent, Max) ->
    case gen_tcp:send(Sock, Block) of
        ok -> send_until_blocked(Sock, Block, Sent + byte_size(Block), Max);
        {error, _} -> Sent
    end.

%% One byte every 200 ms: before, every byte restarted evhttp's timeout.
slow_header(S) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S), [binary, {active, false}]),
    ok = gen_tcp:send(Sock, <<"GET /test/1 HTTP/1.1\r\n">>),
    T0 = erlang:monotonic_time(millisecond),
    Trickled = trickle(Sock, 200, 100),
    Took = erlang:monotonic_time(millisecond) - T0,
    gen_tcp:close(Sock),
    io:format(user, "~ncut after ~b ms and ~b trickled bytes~n", [Took, Trickled]),
    %% 100 bytes take 20 s: less than evhttp's own 30-s timeout
    ?assert(Trickled < 100),
    wait_stat(S, http_header_timeout, fun(V) -> V >= 1 end, ?T),
    %% The server itself is fine.
    C = open_stream(S, 2),
    send(S, {2, <<"after">>}),
    ?assertEqual(<<"after">>, expect_chunk(C, ?T)),
    close(C).

%% Sends one header byte every Ms until the server closes or Max bytes went;
%% returns how many went.
trickle(Sock, Ms, Max) -> trickle(Sock, Ms, Max, 0).

trickle(_Sock, _Ms, Max, N) when N >= Max -> N;
trickle(Sock, Ms, Max, N) ->
    case gen_tcp:recv(Sock, 0, Ms) of
        {error, timeout} ->
            case gen_tcp:send(Sock, <<"x">>) of
                ok -> trickle(Sock, Ms, Max, N + 1);
                {error, _} -> N
            end;
        {error, closed} -> N;
        {ok, _Reply} -> N         % a 408/400 before the close is fine
    end.

%% 180 tricklers on a 200-descriptor server (those it cannot accept wait in
%% its listen queue): they are cut as their header timeout passes, and a real
%% user gets a stream while the rest still trickle, long before they would
%% have given up by themselves (30 s).
slowloris_crowd(S) ->
    Self = self(),
    Port = port_of(S),
    Pids = [spawn_link(fun() -> crowd_member(Self, Port) end) || _ <- lists:seq(1, 180)],
    Connected = length([ok || _ <- Pids, receive {crowd, ok} -> true after ?T -> false end]),
    io:format(user, "~n~b tricklers connected~n", [Connected]),
    ?assert(Connected >= 150),
    wait_stat(S, http_header_timeout, fun(V) -> V >= 100 end, 20000),
    C = wait_until(fun() ->
                           try {true, open_stream(S, 3)}
                           catch error:E -> {false, E}
                           end
                   end, 10000, stream_after_crowd),
    send(S, {3, <<"served">>}),
    ?assertEqual(<<"served">>, expect_chunk(C, ?T)),
    close(C),
    [receive {crowd_done, P} -> ok after 30000 -> erlang:error(trickler_stuck) end
     || P <- Pids].

crowd_member(Parent, Port) ->
    case gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}], ?T) of
        {ok, Sock} ->
            Parent ! {crowd, ok},
            _ = gen_tcp:send(Sock, <<"GET /test/4 HTTP/1.1\r\n">>),
            trickle(Sock, 300, 100),
            gen_tcp:close(Sock);
        {error, _} ->
            Parent ! {crowd, failed}
    end,
    Parent ! {crowd_done, self()}.

%% A few stray bytes after the request are tolerated; a flood ends the
%% stream at once instead of being read and dropped for ever.
talking_stream(S) ->
    Quiet = raw_stream(S, 5),
    ok = gen_tcp:send(Quiet, binary:copy(<<"\r\n">>, 50)),
    Flood = raw_stream(S, 6),
    Junk = binary:copy(<<"x">>, 65536),
    Sent = send_until_closed(Flood, Junk, 0, 64 * ?MB),
    io:format(user, "~nflooding client sent ~b KB before the server closed it~n",
              [Sent div 1024]),
    ?assert(Sent < 64 * ?MB),
    wait_stat(S, input_closed, fun(V) -> V =:= 1 end, ?T),
    send(S, {5, <<"still here">>}),
    ?assertEqual({ok, <<"a\r\nstill here\r\n">>}, gen_tcp:recv(Quiet, 15, ?T)),
    gen_tcp:close(Quiet),
    gen_tcp:close(Flood).

send_until_closed(_Sock, _Junk, Sent, Max) when Sent >= Max -> Sent;
send_until_closed(Sock, Junk, Sent, Max) ->
    case gen_tcp:send(Sock, Junk) of
        ok -> send_until_closed(Sock, Junk, Sent + byte_size(Junk), Max);
        {error, _} -> Sent
    end.

%% B holds a large backlog; C then grows one until the total passes the
%% limit: B, the larger, is ended, C is kept.
backlog_total(S) ->
    Limit = 10 * ?MB,
    Msg = binary:copy(<<"b">>, 60000),
    B = raw_stream(S, 21, [{recbuf, 4096}]),
    C = raw_stream(S, 22, [{recbuf, 4096}]),
    SentB = push(S, 21, Msg, 200),                         % 12 MB
    BacklogB = maps:get(backlog_bytes, wait_stat(S, backlog_bytes, fun(V) -> V > 0 end, ?T)),
    Absorbed = SentB - BacklogB,
    io:format(user, "~nB: sent ~b KB, ~b KB held by the server, ~b KB by the kernel~n",
              [SentB div 1024, BacklogB div 1024, Absorbed div 1024]),
    ?assert(BacklogB > (Limit + ?MB) div 2),
    %% Enough for C to pass the total while still holding less than B.
    ForC = Limit - BacklogB + Absorbed + ?MB,
    push(S, 22, Msg, ForC div byte_size(Msg) + 1),
    St = wait_stat(S, slow_closed, fun(V) -> V >= 1 end, ?T),
    ?assertEqual(1, maps:get(slow_closed, St)),
    ?assert(maps:get(backlog_bytes, St) =< Limit),
    ?assertEqual(0, acked(S, 21)),
    ?assertEqual(1, acked(S, 22)),
    gen_tcp:close(B),
    gen_tcp:close(C).

push(S, Uid, Msg, N) ->
    [send(S, {Uid, Msg}) || _ <- lists:seq(1, N)],
    %% an acknowledged message: the ones before it are applied
    acked(S, Uid),
    N * byte_size(Msg).

acked(S, Uid) ->
    Ref = make_ref(),
    send(S, {self(), Ref, Uid, <<"ack">>}),
    receive {Ref, N} -> N after ?T -> erlang:error({no_ack, Uid}) end.

%% Each request carries a body that a proxy in front could end elsewhere
%% than evhttp does (the first Content-Length, or chunked over any
%% Content-Length), with a request for a stream hidden behind it: the
%% server answers 400 and closes, and opens no stream. Debian's libevent
%% (with its security fixes) refuses a Transfer-Encoding with a
%% Content-Length itself, before the server sees the request (so those are
%% counted only where the server answers); the lengths it leaves to us. A
%% request framed one way, chunked or not, is answered as usual.
smuggling(S) ->
    Hidden = <<"GET /test/9 HTTP/1.1\r\nHost: x\r\n\r\n">>,
    Len = integer_to_binary(5 + byte_size(Hidden)),
    Head = <<"POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n">>,
    Ours = [%% two lengths: evhttp reads "hello", a proxy taking the last reads all
            [Head, "Content-Length: 5\r\nContent-Length: ", Len, "\r\n\r\nhello", Hidden],
            %% the same length twice
            [Head, "Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello", Hidden],
            %% a length with a sign, read as 5 by evhttp
            [Head, "Content-Length: +5\r\n\r\nhello", Hidden],
            %% on a stream's route too
            ["GET /test/8 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
             "Content-Length: 0\r\n\r\n", Hidden]],
    Either = [%% chunked for evhttp, 5 bytes for a proxy that takes the length
              [Head, "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", Hidden],
              [Head, "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", Hidden],
              %% a coding evhttp 2.1.12 does not know (it takes the length), a proxy may
              [Head, "Transfer-Encoding: gzip, chunked\r\nContent-Length: 5\r\n\r\nhello", Hidden]],
    [?assertEqual({400, 1}, exchange(S, Bytes)) || Bytes <- Ours ++ Either],
    N = length(Ours),
    St = stats(S),
    ?assertEqual(0, maps:get(streams_total, St)),
    Counted = maps:get(http_bad_framing, St),
    ?assert(Counted >= N andalso Counted =< N + length(Either)),
    ?assertEqual(Counted, maps:get(<<"httpdcnode_http_rejected_total{reason=\"bad_framing\"}">>,
                                   httpdtest_server:metrics(S))),
    %% Framed one way: answered (405, POST is not served there) and kept open.
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S), [binary, {active, false}]),
    ok = gen_tcp:send(Sock, [Head, "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
                             Head, "Content-Length: 5\r\n\r\nhello"]),
    {ok, <<"HTTP/1.1 405 ", _/binary>> = Two} = recv_responses(Sock, 2, <<>>),
    ?assertEqual(2, count_responses(Two)),
    gen_tcp:close(Sock),
    ?assertMatch(#{http_bad_framing := Counted}, stats(S)).

%% Bytes sent on a new connection: the status of the first response and
%% how many came before the server closed (a stream that opened keeps it
%% open: then the responses of 5 s).
exchange(S, Bytes) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S), [binary, {active, false}]),
    ok = gen_tcp:send(Sock, Bytes),
    All = recv_until_closed(Sock, <<>>, erlang:monotonic_time(millisecond) + ?T),
    gen_tcp:close(Sock),
    <<"HTTP/1.1 ", Code:3/binary, _/binary>> = All,
    {binary_to_integer(Code), count_responses(All)}.

recv_until_closed(Sock, Acc, Deadline) ->
    case gen_tcp:recv(Sock, 0, max(0, Deadline - erlang:monotonic_time(millisecond))) of
        {ok, More} -> recv_until_closed(Sock, <<Acc/binary, More/binary>>, Deadline);
        {error, _} -> Acc
    end.

%% Until N answers 405 came whole (each ends with its body).
recv_responses(Sock, N, Acc) ->
    case length(binary:matches(Acc, <<"Only GET and HEAD are served">>)) >= N of
        true -> {ok, Acc};
        false ->
            case gen_tcp:recv(Sock, 0, ?T) of
                {ok, More} -> recv_responses(Sock, N, <<Acc/binary, More/binary>>);
                Err -> {Err, Acc}
            end
    end.

count_responses(Bytes) -> length(binary:matches(Bytes, <<"HTTP/1.1 ">>)).

%% The client's packets are dropped (iptables), as when a phone loses
%% coverage: no FIN, no RST. Keepalive probes go unanswered and the
%% server drops the stream by itself.
vanished_peer(S) ->
    Sock = raw_stream(S, 31),
    {ok, {_, ClientPort}} = inet:sockname(Sock),
    %% keepalive is on for the server's side of the stream
    Ss = os:cmd("ss -Htno state established '( sport = :" ++ integer_to_list(port_of(S))
                ++ " and dport = :" ++ integer_to_list(ClientPort) ++ " )'"),
    ?assertNotEqual(nomatch, string:find(Ss, "keepalive")),
    Rule = "INPUT -i lo -p tcp --dport " ++ integer_to_list(ClientPort) ++ " -j DROP",
    ok = httpdtest_os:iptables("-I " ++ Rule),
    try
        ?assertEqual(1, maps:get(streams_open, stats(S))),
        St = wait_stat(S, streams_open, fun(V) -> V =:= 0 end, 30000),
        ?assertEqual(0, maps:get(uids_online, St))
    after
        httpdtest_os:iptables("-D " ++ Rule),
        gen_tcp:close(Sock)
    end.


%%% ---------------------------------------------------------------- helpers

raw_stream(S, Uid) -> raw_stream(S, Uid, []).

%% A stream on a plain socket (passive), read up to its welcome chunk.
raw_stream(S, Uid, SockOpts) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S),
                                 [binary, {active, false}, {send_timeout, 2000} | SockOpts]),
    ok = gen_tcp:send(Sock, httpdtest_http:get_request("/test/" ++ integer_to_list(Uid))),
    W = welcome(Uid),
    Chunk = <<(string:lowercase(integer_to_binary(byte_size(W), 16)))/binary, "\r\n", W/binary,
              "\r\n">>,
    read_until(Sock, Chunk, <<>>),
    Sock.

read_until(Sock, Tail, Acc) ->
    case binary:match(Acc, Tail) of
        {P, L} when P + L =:= byte_size(Acc) -> ok;
        _ ->
            {ok, More} = gen_tcp:recv(Sock, 0, ?T),
            read_until(Sock, Tail, <<Acc/binary, More/binary>>)
    end.
