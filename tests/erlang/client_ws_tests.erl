%% GET /ws/N read by an independent, strict WebSocket client (npm "ws",
%% pinned in tests/js/package-lock.json): it fails the connection on any
%% framing error of the server, answers pings by itself, and checks text
%% frames are UTF-8. Plain and ws+meta clients, resume with since= and the
%% gap frame, pings, kick and SIGTERM.
-module(client_ws_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdcnode_test_lib, [send/2, port_of/1, stats/1, wait_stat/4]).

-define(T, 10000).

ws_client_test_() ->
    [httpdcnode_test_lib:server_test("ws: text and binary frames, pings answered, kick closes "
                                     "with 1000", #{extra_args => ["--heartbeat", "1"]}, 60,
                                     fun plain/1),
     httpdcnode_test_lib:server_test("ws: ws+meta ids, resume with since= exactly once and in "
                                     "order, then live", #{}, 60, fun resume/1),
     httpdcnode_test_lib:server_test("ws: a gap frame when history is too short",
                                     #{extra_args => ["--history", "2"]}, 60, fun gap/1),
     httpdcnode_test_lib:server_test("ws: SIGTERM closes with 1000", #{}, 60, fun sigterm/1)].

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
    ?assertMatch(#{<<"code">> := 1000}, expect(C, close)),
    stop(C).

resume(S) ->
    C = client(S, "51", meta),
    #{<<"protocol">> := <<"ws+meta.httpdcnode">>} = expect(C, open),
    [send(S, {51, <<"m", (integer_to_binary(I))/binary>>}) || I <- lists:seq(1, 3)],
    {Epoch, 1, <<"m1">>} = meta(expect(C, message)),
    ?assertEqual({Epoch, 2, <<"m2">>}, meta(expect(C, message))),
    ?assertEqual({Epoch, 3, <<"m3">>}, meta(expect(C, message))),
    send(S, {kick, 51}),
    ?assertMatch(#{<<"code">> := 1000}, expect(C, close)),
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
    ?assertEqual(#{<<"last">> => <<Epoch/binary, ":1">>, <<"first">> => <<Epoch/binary, ":5">>},
                 httpdcnode_test_lib:json_decode(Json)),
    ?assertEqual({Epoch, 5, <<"m5">>}, meta(expect(C2, message))),
    ?assertEqual({Epoch, 6, <<"m6">>}, meta(expect(C2, message))),
    stop(C2).

sigterm(S) ->
    C = client(S, "53", none),
    expect(C, open),
    httpdcnode_test_lib:signal(S, "TERM"),
    ?assertMatch(#{<<"code">> := 1000}, expect(C, close)),
    ?assertMatch({ok, 0, _}, httpdcnode_test_lib:wait_exit(S, ?T)),
    stop(C).

%%% ---------------------------------------------------------------- the client

client(S, Path, Protocol) ->
    Root = httpdcnode_test_lib:repo_root(),
    Node = os:find_executable("node"),
    ?assertNotEqual(false, Node),
    Url = "ws://127.0.0.1:" ++ integer_to_list(port_of(S)) ++ "/ws/" ++ Path,
    Args = [filename:join([Root, "tests", "js", "ws_client.mjs"]), Url] ++
        [ "ws+meta.httpdcnode" || Protocol =:= meta],
    open_port({spawn_executable, Node},
              [{args, Args}, {cd, filename:join([Root, "tests", "js"])}, {line, 1 bsl 20},
               binary, use_stdio, exit_status]).

stop(C) -> catch port_close(C), ok.

%% The client's next line, decoded; fails on anything but What. Pings
%% (the heartbeat's, at any time) are passed over unless asked for.
expect(C, What) ->
    receive
        {C, {data, {eol, Line}}} ->
            M = httpdcnode_test_lib:json_decode(Line),
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
