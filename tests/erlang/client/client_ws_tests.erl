%% SPDX-License-Identifier: Apache-2.0
%% GET /ws/N read by an independent, strict WebSocket client (npm "ws",
%% pinned in tests/js/package-lock.json): it fails the connection on any
%% framing error of the server, answers pings by itself, and checks text
%% frames are UTF-8. Plain and ws+meta clients, resume with since= and the
%% gap frame, pings, kick and SIGTERM. Then the bundled load client
%% (./httpclient --proto ws, as make bench and make soak run it): it answers
%% the heartbeat's pings, and counts the gap frame as a gap, not an id error.
%% With --ws-deflate, ws agrees permessage-deflate, reads the server's
%% compressed frames and compresses every message it sends (threshold 0):
%% the inbox (the example ws_echo, through the application) gets them
%% inflated.
-module(client_ws_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [send/2, port_of/1, stats/1, wait_stat/4]).

-define(T, 10000).

ws_client_test_() ->
    [httpdtest_server:server_test("ws: text and binary frames, pings answered, kick closes "
                                  "with 4001", #{extra_args => ["--heartbeat", "1"]}, 60,
                                  fun plain/1),
     httpdtest_server:server_test("ws: ws+meta ids, resume with since= exactly once and in "
                                  "order, then live", #{}, 60, fun resume/1),
     httpdtest_server:server_test("ws: a gap frame when history is too short",
                                  #{extra_args => ["--history", "2"]}, 60, fun gap/1),
     httpdtest_server:server_test("ws: SIGTERM closes with 1012", #{}, 60, fun sigterm/1),
     httpdtest_server:server_test("httpclient --proto ws answers the heartbeat's pings: "
                                  "no stream closed as dead",
                                  #{extra_args => ["--heartbeat", "1"]}, 60,
                                  fun load_client_pongs/1),
     httpdtest_server:server_test("httpclient --proto ws resuming past --history counts "
                                  "the gap frame as a gap, no id error",
                                  #{extra_args => ["--history", "2"]}, 90,
                                  fun load_client_gaps/1),
     httpdtest_inbox:app_case("ws with --ws-deflate: permessage-deflate agreed (no "
                              "context takeover both ways), compressed messages read, its "
                              "own compressed messages echoed whole", ws_echo,
                              ["--ws-deflate"], 60, fun deflate/1)].

plain(S) ->
    C = client(S, "50", none),
    #{<<"protocol">> := <<>>} = expect(C, open),
    send(S, {50, <<"hello ", 16#e2, 16#82, 16#ac>>}),
    ?assertMatch(#{<<"binary">> := false, <<"data">> := <<"hello ", 16#e2, 16#82, 16#ac>>},
                 expect(C, message)),
    send(S, {50, <<0, 255, 16#c3>>}),
    #{<<"binary">> := true, <<"data">> := B64} = expect(C, message),
    ?assertEqual(<<0, 255, 16#c3>>, base64:decode(B64)),
    Big = binary:copy(<<"0123456789">>, 6000),
    send(S, {50, Big}),
    ?assertMatch(#{<<"data">> := Big}, expect(C, message)),
    %% The client answers pings: after three, it is still served.
    expect(C, ping),
    expect(C, ping),
    expect(C, ping),
    ?assertMatch(#{ws_dead := 0, ws_bad_frames := 0, streams_open := 1}, stats(S)),
    send(S, {kick, 50}),
    ?assertMatch(#{<<"code">> := 4001}, expect(C, close)),
    stop(C).

resume(S) ->
    C = client(S, "51", meta),
    #{<<"protocol">> := <<"ws+meta.httpdcnode">>} = expect(C, open),
    [send(S, {51, <<"m", (integer_to_binary(I))/binary>>}) || I <- lists:seq(1, 3)],
    {Epoch, 1, <<"m1">>} = meta(expect(C, message)),
    ?assertEqual({Epoch, 2, <<"m2">>}, meta(expect(C, message))),
    ?assertEqual({Epoch, 3, <<"m3">>}, meta(expect(C, message))),
    send(S, {kick, 51}),
    ?assertMatch(#{<<"code">> := 4001}, expect(C, close)),
    stop(C),
    wait_stat(S, streams_open, fun(V) -> V =:= 0 end, ?T),
    [send(S, {51, <<"m", (integer_to_binary(I))/binary>>}) || I <- lists:seq(4, 6)],
    ack(S),
    C2 = client(S, "51?since=" ++ binary_to_list(Epoch) ++ "%3A3", meta),
    expect(C2, open),
    [?assertEqual({Epoch, I, <<"m", (integer_to_binary(I))/binary>>}, meta(expect(C2, message)))
     || I <- lists:seq(4, 6)],
    send(S, {51, <<"m7">>}),
    ?assertEqual({Epoch, 7, <<"m7">>}, meta(expect(C2, message))),
    stop(C2).

gap(S) ->
    C = client(S, "52", meta),
    expect(C, open),
    send(S, {52, <<"m1">>}),
    {Epoch, 1, _} = meta(expect(C, message)),
    stop(C),
    wait_stat(S, streams_open, fun(V) -> V =:= 0 end, ?T),
    [send(S, {52, <<"m", (integer_to_binary(I))/binary>>}) || I <- lists:seq(2, 6)],
    ack(S),
    C2 = client(S, "52?since=" ++ binary_to_list(Epoch) ++ ":1", meta),
    expect(C2, open),
    #{<<"binary">> := false, <<"data">> := <<"event: gap\n\n", Json/binary>>} = expect(C2, message),
    ?assertEqual(#{<<"last">> => <<Epoch/binary, ":1">>, <<"first">> => <<Epoch/binary, ":5">>,
                   <<"next">> => <<Epoch/binary, ":4">>},
                 httpdtest_json:json_decode(Json)),
    ?assertEqual({Epoch, 5, <<"m5">>}, meta(expect(C2, message))),
    ?assertEqual({Epoch, 6, <<"m6">>}, meta(expect(C2, message))),
    stop(C2).

sigterm(S) ->
    C = client(S, "53", none),
    expect(C, open),
    httpdtest_os:signal(S, "TERM"),
    ?assertMatch(#{<<"code">> := 1012}, expect(C, close)),
    ?assertMatch({ok, 0, _}, httpdtest_os:wait_exit(S, ?T)),
    stop(C).

%% 20 streams held 4 s past their opening, a ping a second: each answers at
%% least 3 (the old client answered none, and the server closed all 20 with
%% 1001 after two pings).
load_client_pongs(S) ->
    N = 20,
    P = load_client(S, "httpclient_pongs", ["-n", integer_to_list(N), "--uid-base", "100",
                                            "--hold", "4"]),
    try
        R = load_client_result(P),
        ?assertMatch(#{<<"welcomed">> := N, <<"closed_by_server">> := 0,
                       <<"stream_errors">> := 0}, R),
        ?assert(maps:get(<<"pongs">>, R) >= 3 * N),
        ?assertMatch(#{ws_dead := 0, ws_bad_frames := 0}, stats(S))
    after
        httpdtest_os:stop_proc(P)
    end.

%% 20 streams each take one message and are dropped; 5 more are sent to each
%% uid while they are away, 3 more than --history keeps; on SIGUSR1 they
%% resume from the first: a gap frame, then the 2 kept. 20 gaps, no id error
%% (the old client took each gap frame for a message without an id, and the
%% jump after it for another id error: 40).
load_client_gaps(S) ->
    N = 20,
    Uids = lists:seq(200, 200 + N - 1),
    P = load_client(S, "httpclient_gaps",
                    ["-n", integer_to_list(N), "--uid-base", "200", "--reconnect-after", "1",
                     "--reconnect-on-signal", "--until-msgs", integer_to_list(3 * N)]),
    try
        wait_stat(S, streams_open, fun(V) -> V =:= N end, ?T),
        [send(S, {U, <<"m1">>}) || U <- Uids],
        %% each dropped after its first message, parked until the signal
        wait_stat(S, streams_open, fun(V) -> V =:= 0 end, ?T),
        [send(S, {U, <<"m", (integer_to_binary(I))/binary>>}) || U <- Uids, I <- lists:seq(2, 6)],
        ack(S),
        ok = httpdtest_os:signal(P, "USR1"),
        R = load_client_result(P),
        Msgs = 3 * N,
        ?assertMatch(#{<<"reconnects">> := N, <<"id_errors">> := 0, <<"gaps">> := N,
                       <<"dup">> := 0, <<"msgs">> := Msgs, <<"stream_errors">> := 0}, R)
    after
        httpdtest_os:stop_proc(P)
    end.

%%% ---------------------------------------------------------------- the load client

%% ./httpclient --proto ws at S (it is beside the server binary), its --json
%% line and stderr into a log of its own.
load_client(S, Name, Args) ->
    Exe = filename:join(filename:dirname(httpdtest_server:server_exe()), "httpclient"),
    Log = httpdtest_os:log_path(httpdtest_os:unique(Name)),
    Port = integer_to_list(port_of(S)),
    httpdtest_os:spawn_os(Exe, ["--proto", "ws", "-p", Port, "--json", "-q",
                                "--max-time", "60" | Args], Log, "httpclient").

%% Waits for the client to end (status 0) and decodes its JSON line.
load_client_result(#{log := Log} = P) ->
    ?assertMatch({ok, 0, _}, httpdtest_os:wait_exit(P, 70000)),
    {ok, Out} = file:read_file(Log),
    [Json | _] = [L || L <- lists:reverse(binary:split(Out, <<"\n">>, [global])),
                       binary:first(<<L/binary, " ">>) =:= ${],
    httpdtest_json:json_decode(Json).

%%% ---------------------------------------------------------------- the client

deflate(S) ->
    C = client(S, "70", meta, [{"WS_CLIENT_DEFLATE_THRESHOLD", "0"}]),
    #{<<"protocol">> := <<"ws+meta.httpdcnode">>, <<"extensions">> := Ext} = expect(C, open),
    ?assertEqual(<<"permessage-deflate; server_no_context_takeover; client_no_context_takeover">>,
                 Ext),
    Before = stats(S),
    Text = binary:copy(<<"all work and no play ">>, 500),
    send(S, {70, Text}),
    ?assertMatch({_, 1, Text}, meta(expect(C, message))),
    Bin = binary:copy(<<0, 255, 1>>, 1000),
    send(S, {70, {binary, Bin}}),
    #{<<"binary">> := true, <<"data">> := B64} = expect(C, message),
    ?assertMatch(<<"id: ", _:8/binary, ":2\n\n", Bin/binary>>, base64:decode(B64)),
    %% Each message the client sends is compressed; the echo (a reply,
    %% uncompressed) is what it sent.
    Line = binary:copy(<<"caf", 16#c3, 16#a9, " cr", 16#c3, 16#a8, "me ">>, 100),
    port_command(C, [<<"send ">>, Line, <<"\n">>]),
    ?assertMatch(#{<<"binary">> := false, <<"data">> := <<"event: conn\n\n", Line/binary>>},
                 expect(C, message)),
    port_command(C, [<<"sendbin ">>, base64:encode(Bin), <<"\n">>]),
    #{<<"binary">> := true, <<"data">> := B64b} = expect(C, message),
    ?assertEqual(<<"event: conn\n\n", Bin/binary>>, base64:decode(B64b)),
    port_command(C, <<"send hi\n">>),
    ?assertMatch(#{<<"data">> := <<"event: conn\n\nhi">>}, expect(C, message)),
    After = stats(S),
    D = fun(K) -> maps:get(K, After) - maps:get(K, Before) end,
    ?assertEqual({2, 3, 0}, {D(ws_deflated), D(ws_inflated), D(ws_bad_frames)}),
    send(S, {kick, 70}),
    ?assertMatch(#{<<"code">> := 4001}, expect(C, close)),
    stop(C).

client(S, Path, Protocol) -> client(S, Path, Protocol, []).

client(S, Path, Protocol, Env) ->
    Root = httpdtest_os:repo_root(),
    Node = os:find_executable("node"),
    ?assertNotEqual(false, Node),
    Url = "ws://127.0.0.1:" ++ integer_to_list(port_of(S)) ++ "/ws/" ++ Path,
    Args = [filename:join([Root, "tests", "js", "ws_client.mjs"]), Url] ++
        [ "ws+meta.httpdcnode" || Protocol =:= meta],
    open_port({spawn_executable, Node},
              [{args, Args}, {cd, filename:join([Root, "tests", "js"])}, {line, 1 bsl 20},
               {env, Env}, binary, use_stdio, exit_status]).

stop(C) -> catch port_close(C), ok.

%% The client's next line, decoded; fails on anything but What. Pings
%% (the heartbeat's, at any time) are passed over unless asked for.
expect(C, What) ->
    receive
        {C, {data, {eol, Line}}} ->
            M = httpdtest_json:json_decode(Line),
            Want = atom_to_binary(What),
            case maps:get(<<"ev">>, M) of
                Want -> M;
                <<"ping">> -> expect(C, What);
                _ -> erlang:error({expected, What, got, M})
            end;
        {C, {exit_status, St}} -> erlang:error({client_exited, St})
    after ?T -> erlang:error({client_silent, waiting_for, What})
    end.

%% A ws+meta message as {Epoch, Seq, Payload}.
meta(#{<<"binary">> := false, <<"data">> := <<"id: ", Epoch:8/binary, ":", Rest/binary>>}) ->
    [Seq, Payload] = binary:split(Rest, <<"\n\n">>),
    {Epoch, binary_to_integer(Seq), Payload}.

%% Every message sent before is applied.
ack(S) ->
    Ref = make_ref(),
    send(S, {self(), Ref, stats}),
    receive {Ref, _} -> ok after ?T -> erlang:error(no_stats_reply) end.
