%% SPDX-License-Identifier: Apache-2.0
%% GET /sse/N read by an independent, WHATWG-conformant EventSource (npm
%% "eventsource", pinned in tests/js/package-lock.json): it reconnects by
%% itself and sends Last-Event-ID; what it was sent meanwhile must reach it
%% exactly once and in order, and a gap must be told before the rest.
-module(client_eventsource_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [send/2, port_of/1, wait_stat/4]).

-define(T, 10000).

eventsource_test_() ->
    [httpdtest_server:server_test("EventSource: ids, reconnect with Last-Event-ID, "
                                  "every message once and in order", #{}, 60,
                                  fun resume/1),
     httpdtest_server:server_test("EventSource: a gap event when history is too short",
                                  #{extra_args => ["--history", "2"]}, 60, fun gap/1)].

resume(S) ->
    C = client(S, 40),
    expect(C, open),
    [send(S, {40, <<"m", (integer_to_binary(I))/binary>>}) || I <- lists:seq(1, 3)],
    Epoch = epoch(expect_message(C, 1, <<"m1">>)),
    expect_message(C, 2, <<"m2">>),
    expect_message(C, 3, <<"m3">>),
    %% The server ends the stream; what is sent before the client is back
    %% waits in the uid's history.
    send(S, {kick, 40}),
    [send(S, {40, <<"m", (integer_to_binary(I))/binary>>}) || I <- lists:seq(4, 6)],
    expect(C, error),
    expect(C, open),
    [expect_message(C, I, <<"m", (integer_to_binary(I))/binary>>) || I <- lists:seq(4, 6)],
    send(S, {40, <<"m7\nwith two lines">>}),
    #{<<"id">> := Id7} = expect_message(C, 7, <<"m7\nwith two lines">>),
    ?assertEqual(<<Epoch/binary, ":7">>, Id7),
    stop(C).

gap(S) ->
    C = client(S, 41),
    expect(C, open),
    send(S, {41, <<"m1">>}),
    Epoch = epoch(expect_message(C, 1, <<"m1">>)),
    send(S, {kick, 41}),
    [send(S, {41, <<"m", (integer_to_binary(I))/binary>>}) || I <- lists:seq(2, 6)],
    expect(C, error),
    expect(C, open),
    #{<<"data">> := Gap} = expect(C, gap),
    ?assertEqual(#{<<"last">> => <<Epoch/binary, ":1">>, <<"first">> => <<Epoch/binary, ":5">>,
                   <<"next">> => <<Epoch/binary, ":4">>}, Gap),
    expect_message(C, 5, <<"m5">>),
    expect_message(C, 6, <<"m6">>),
    stop(C).

%%% ---------------------------------------------------------------- the client

client(S, Uid) ->
    Root = httpdtest_os:repo_root(),
    Node = os:find_executable("node"),
    ?assertNotEqual(false, Node),
    Url = "http://127.0.0.1:" ++ integer_to_list(port_of(S)) ++ "/sse/" ++ integer_to_list(Uid),
    open_port({spawn_executable, Node},
              [{args, [filename:join([Root, "tests", "js", "sse_client.mjs"]), Url]},
               {cd, filename:join([Root, "tests", "js"])}, {line, 1 bsl 20}, binary,
               use_stdio, exit_status]).

stop(C) -> catch port_close(C), ok.

%% The client's next line, decoded; fails on anything but What.
expect(C, What) ->
    receive
        {C, {data, {eol, Line}}} ->
            M = httpdtest_json:json_decode(Line),
            Want = atom_to_binary(What),
            case maps:get(<<"ev">>, M) of
                Want -> M;
                _ -> erlang:error({expected, What, got, M})
            end;
        {C, {exit_status, St}} -> erlang:error({client_exited, St})
    after ?T -> erlang:error({client_silent, waiting_for, What})
    end.

expect_message(C, Seq, Data) ->
    M = #{<<"id">> := Id, <<"data">> := D} = expect(C, message),
    ?assertEqual({Seq, Data}, {seq(Id), D}),
    M.

epoch(#{<<"id">> := Id}) -> hd(binary:split(Id, <<":">>)).

seq(Id) -> binary_to_integer(lists:last(binary:split(Id, <<":">>))).
