%% SPDX-License-Identifier: Apache-2.0
%% --max-input-total: what clients sent that the server holds until it is
%% whole (POST bodies being read, WebSocket messages in flight) is bounded
%% all together. Hostile clients start many large messages and never end
%% them: memory follows what arrived, past the bound the largest holders
%% are shed (HTTP: 503 and closed, http_shed; WebSocket: close 1013,
%% ws_shed), and a real user's small message still gets through. Real
%% server, real master with an inbox, raw sockets. The peak resident size
%% (VmHWM) is judged only without sanitizers.
-module(core_input_total_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [stats/1, wait_stat/4, port_of/1]).
-import(httpdtest_os, [proc_kb/2]).
-import(httpdtest_inbox, [ws_open/2, recv_frame/1, frame/3, collect/1]).

-define(T, 10000).
-define(MIB, 1048576).
-define(BOUND, (16 * ?MIB)).
-define(ARGS, ["--max-client-message", "1048576", "--max-input-total", "16777216",
               "--client-rate", "100000", "--header-timeout", "120"]).

input_total_test_() ->
    [inbox_test("200 POSTs each holding a 1 MB body it never ends: the largest are shed "
                "(503, http_shed), the server's peak memory stays within the bound and a "
                "margin, a real user's POSTs are all accepted", fun posts/2),
     inbox_test("100 WebSockets each starting a 1 MB message it never ends: memory follows "
                "what arrived, and past the bound the largest are closed 1013 (ws_shed); a "
                "real user's message still reaches the inbox", fun websockets/2)].

%% A master with an inbox (inbox_test_handler: each message to this test's
%% process) and a server with --inbox inbox and ?ARGS.
inbox_test(Label, Fun) ->
    {Label,
     {setup,
      fun() -> httpdtest_inbox:inbox_server("input_sink", ?ARGS) end,
      fun({M, S, Sink}) -> httpdtest_inbox:stop_all(M, S, Sink) end,
      fun({_, S, Sink}) -> httpdtest_inbox:sink_test(S, Sink, 120, fun() -> Fun(S, Sink) end)
      end}}.

%%% ---------------------------------------------------------------- POST

-define(HEAD, ["POST /send/7 HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
               "Content-Length: 1048576\r\n\r\n"]).

%% Each attacker announces 1 MB and sends all of it but the last byte, in
%% 64 KB pieces 20 ms apart, then holds the connection: 200 MB offered
%% against a 16 MiB bound, so at most 16 keep their body (each holding its
%% head and 1 MB less a byte) and 184 at least are shed. A real user posts
%% 10 bytes every 20 ms meanwhile.
posts(S, _) ->
    N = 200,
    PerConn = iolist_size(?HEAD) + ?MIB - 1,
    Hwm0 = proc_kb(S, "VmHWM"),
    Self = self(),
    Attackers = [spawn_link(fun() -> attacker(Self, S) end) || _ <- lists:seq(1, N)],
    User = spawn_link(fun() -> Self ! {user, user_posts(S, 0, [])} end),
    [receive {sent, A} -> ok after 60000 -> erlang:error(attacker_stuck) end || A <- Attackers],
    User ! stop,
    Codes = receive {user, C} -> C after ?T -> erlang:error(user_stuck) end,
    %% Everything read: each connection shed, or holding all it sent.
    St = httpdtest_wait:wait_until(
           fun() ->
                   X = #{http_shed := Shed, input_bytes := In} = stats(S),
                   {Shed + In div PerConn =:= N andalso In rem PerConn =:= 0, X}
           end, ?T, all_read),
    Outcomes = [begin A ! check, receive {outcome, A, R} -> R after ?T -> erlang:error(no_outcome) end end
                || A <- Attackers],
    Shed = length([x || {shed, _} <- Outcomes]),
    Held = length([x || holding <- Outcomes]),
    Hwm = proc_kb(S, "VmHWM"),
    io:format(user, "~nposts: ~p shed (~p read a 503), ~p holding, input_bytes ~p KB, "
              "user ~p posts, peak RSS +~p KB~n",
              [Shed, length([x || {shed, 503} <- Outcomes]), Held,
               maps:get(input_bytes, St) div 1024, length(Codes), Hwm - Hwm0]),
    ?assertEqual(N, Shed + Held),
    ?assert(Held =< ?BOUND div PerConn),
    ?assertEqual(Shed, maps:get(http_shed, St)),
    ?assertEqual(Held * PerConn, maps:get(input_bytes, St)),
    ?assertEqual(Shed, maps:get(<<"httpdcnode_http_rejected_total{reason=\"shed\"}">>,
                                httpdtest_server:metrics(S))),
    %% The real user: every post accepted and received.
    ?assert(length(Codes) >= 5),
    ?assertEqual([202], lists:usort(Codes)),
    ?assertEqual(length(Codes), length(collect(length(Codes)))),
    %% The bound and as much again for what it takes to hold it (evbuffer
    %% chains, a loop turn's reads before a shed, the connections).
    judge(Hwm - Hwm0, 2 * ?BOUND div 1024),
    [A ! close || A <- Attackers].

%% One attacker: tells Parent when it has sent what it could, and on check
%% whether it is holding (the connection open) or {shed, Status} (closed;
%% the status of the answer it read, none when the close came first).
attacker(Parent, S) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S),
                                 [binary, {active, false}, {send_timeout, ?T}]),
    ok = gen_tcp:send(Sock, ?HEAD),
    Piece = binary:copy(<<"b">>, 65536),
    send_pieces(Sock, [Piece || _ <- lists:seq(1, 15)] ++ [binary:part(Piece, 0, 65535)]),
    Parent ! {sent, self()},
    receive check -> ok end,
    R = case gen_tcp:recv(Sock, 0, 0) of
            {error, timeout} -> holding;
            {ok, <<"HTTP/1.1 ", Code:3/binary, _/binary>>} -> {shed, binary_to_integer(Code)};
            _ -> {shed, none}
        end,
    Parent ! {outcome, self(), R},
    receive close -> gen_tcp:close(Sock) end.

send_pieces(_, []) -> ok;
send_pieces(Sock, [P | Rest]) ->
    case gen_tcp:send(Sock, P) of
        ok -> receive after 20 -> send_pieces(Sock, Rest) end;
        {error, _} -> closed
    end.

%% POSTs of 10 bytes, each on a new connection, every 20 ms until told to
%% stop: their statuses.
user_posts(S, K, Acc) ->
    receive stop -> lists:reverse(Acc)
    after 20 ->
            {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S), [binary, {active, false}]),
            Body = iolist_to_binary(io_lib:format("user ~5..0b", [K])),
            ok = gen_tcp:send(Sock, ["POST /send/8 HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
                                     "Content-Length: ", integer_to_list(byte_size(Body)),
                                     "\r\n\r\n", Body]),
            {ok, <<"HTTP/1.1 ", Code:3/binary, _/binary>>} = gen_tcp:recv(Sock, 0, ?T),
            gen_tcp:close(Sock),
            user_posts(S, K + 1, [binary_to_integer(Code) | Acc])
    end.

%%% ---------------------------------------------------------------- WebSocket

%% Each of 100 WebSockets sends the first frame (4 KB) of a binary message
%% it never ends: 4 KB held each (the old server set 1 MiB aside for each).
%% Then each sends 15 more frames of 64 KB: its message would grow to 1 MiB
%% (16 steps of 64 KB), 100 MiB offered against 16 MiB: 16 at most keep
%% theirs, the others are closed 1013.
websockets(S, _) ->
    N = 100,
    Vm0 = proc_kb(S, "VmSize"),
    Hwm0 = proc_kb(S, "VmHWM"),
    Socks = [ws_open(S, 200 + I) || I <- lists:seq(1, N)],
    First = binary:copy(<<"w">>, 4096),
    [ok = gen_tcp:send(Sock, frame(2, First, #{fin => 0})) || Sock <- Socks],
    St1 = wait_stat(S, input_bytes, fun(V) -> V =:= N * 4096 end, ?T),
    Vm1 = proc_kb(S, "VmSize"),
    io:format(user, "~nwebsockets: ~p first frames of 4 KB: input_bytes ~p, address space "
              "+~p KB~n", [N, maps:get(input_bytes, St1), Vm1 - Vm0]),
    ?assertEqual(0, maps:get(ws_shed, St1)),
    %% not --max-client-message each (100 MiB): what came and the frame states
    judge(Vm1 - Vm0, N * ?MIB div 1024 div 4),
    Piece = frame(0, binary:copy(<<"v">>, 65536), #{fin => 0}),
    Self = self(),
    [spawn_link(fun() -> Self ! {grown, Sock, send_frames(Sock, Piece, 15)} end) || Sock <- Socks],
    [receive {grown, Sock, _} -> ok after 60000 -> erlang:error(sender_stuck) end || Sock <- Socks],
    St = httpdtest_wait:wait_until(
           fun() ->
                   X = #{ws_shed := Shed, input_bytes := In} = stats(S),
                   {Shed + In div ?MIB =:= N andalso In rem ?MIB =:= 0, X}
           end, ?T, all_read),
    Ends = [ending(Sock) || Sock <- Socks],
    Open = length([x || open <- Ends]),
    Shed = N - Open,
    Hwm = proc_kb(S, "VmHWM"),
    io:format(user, "websockets: ~p closed (~p read the 1013), ~p open, input_bytes ~p KB, "
              "peak RSS +~p KB~n", [Shed, length([x || 1013 <- Ends]), Open,
                                    maps:get(input_bytes, St) div 1024, Hwm - Hwm0]),
    ?assertEqual([], [E || E <- Ends, E =/= open, E =/= 1013, E =/= reset]),
    ?assert(lists:member(1013, Ends)),
    ?assert(Open =< ?BOUND div ?MIB),
    ?assertEqual(Shed, maps:get(ws_shed, St)),
    ?assertEqual(Open * ?MIB, maps:get(input_bytes, St)),
    ?assertEqual(Shed, maps:get(<<"httpdcnode_streams_closed_total{reason=\"ws_shed\"}">>,
                                httpdtest_server:metrics(S))),
    ?assertMatch(#{ws_bad_frames := 0, ws_policy_closed := 0, client_rate_closed := 0}, St),
    judge(Hwm - Hwm0, 2 * ?BOUND div 1024),
    %% A real user's message gets through.
    U = ws_open(S, 300),
    ok = gen_tcp:send(U, frame(1, <<"hello">>, #{})),
    ?assertMatch([{300, _, <<"hello">>}], collect(1)),
    [gen_tcp:close(Sock) || Sock <- [U | Socks]].

%% Sends Frame K times (fewer once the server closed): how many went.
send_frames(_, _, 0) -> 0;
send_frames(Sock, Frame, K) ->
    case gen_tcp:send(Sock, Frame) of
        ok -> 1 + send_frames(Sock, Frame, K - 1);
        {error, _} -> 0
    end.

%% The close code the server sent; reset when the close frame was lost to
%% a reset (the client was still sending when the server closed); open
%% when nothing comes.
ending(Sock) ->
    case gen_tcp:recv(Sock, 0, 0) of
        {error, timeout} -> open;
        {ok, <<16#88, 2, Code:16, _/binary>>} -> Code;
        {error, _} -> reset;
        Other -> {unexpected, Other}
    end.

%%% ---------------------------------------------------------------- helpers

judge(GrowthKb, LimitKb) ->
    case httpdtest_os:memory_judged() of
        true -> ?assert(GrowthKb < LimitKb);
        false -> ok
    end.
