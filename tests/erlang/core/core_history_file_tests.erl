%% SPDX-License-Identifier: Apache-2.0
%% --history-file: a node killed with SIGKILL and started again with the same
%% name and file keeps its epoch, ids and history, so that its SSE,
%% WebSocket (ws+meta) and long-poll clients resume with no gap, given what
%% was sent before the kill and they had not read; a damaged file, another
%% node's, or one in use is refused with one clear line.
-module(core_history_file_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [send/2, stats/1, wait_stat/4, port_of/1]).
-import(httpdtest_http, [request_bytes/4]).
-import(httpdtest_raw, [read_event/1, read_until/3, sync/1, meta_frame/1, poll_raw/2]).

-define(T, 5000).
-define(MAX_USERS, 1000).
-define(MAX_TOPICS, 100).                 % a topic's slot and name record follow the uids'

history_file_test_() ->
    [{"killed and started again: SSE, WebSocket and long-poll clients resume from their ids, "
      "no gap, the same epoch, then live", {timeout, 90, fun resume_after_kill/0}},
     {"a damaged file (a message's byte, the head) or another node's: refused, logged, "
      "a new epoch, a gap", {timeout, 120, fun refused/0}},
     {"a file another server uses: refused, exit 1", {timeout, 60, fun in_use/0}}].

%%% ---------------------------------------------------------------- cases

resume_after_kill() ->
    with_file(fun(File) ->
        S = start(File),
        try
            Sse = sse(S, 1, []),
            Ws = ws_meta(S, "2"),
            send(S, {1, <<"a1">>}),
            send(S, {2, <<"b1">>}),
            send(S, {[1, 2, 3], <<"to three">>}),
            {E, 1, [<<"a1">>]} = parse(read_event(Sse)),
            {E, 2, [<<"to three">>]} = parse(read_event(Sse)),
            {E, 1, <<"b1">>} = meta_frame(Ws),
            {E, 2, <<"to three">>} = meta_frame(Ws),
            {_, #{<<"messages">> := [#{<<"id">> := Id3}]}} = poll_raw(S, "/poll/3?since=" ++ id(E, 0)),
            ?assertEqual(list_to_binary(id(E, 1)), Id3),
            gen_tcp:close(Sse),
            gen_tcp:close(Ws),
            wait_stat(S, streams_open, fun(V) -> V =:= 0 end, ?T),
            %% Sent while no client reads: in the history only.
            send(S, {1, <<"a3">>}),
            send(S, {2, <<0, 255>>}),
            send(S, {3, <<"c2">>}),
            send(S, {[1, 2, 3], <<"to three again">>}),
            [send(S, {1, <<"a", (integer_to_binary(I))/binary>>}) || I <- lists:seq(5, 20)],
            sync(S),
            S2 = httpdtest_server:restart_server(httpdtest_server:kill_server(S)),
            try
                ?assertMatch({match, _}, re:run(restarted_log(S2), "history: --history-file .* "
                                                 "resumed, epoch " ++ binary_to_list(E))),
                Sse2 = sse(S2, 1, ["Last-Event-ID: " ++ id(E, 2)]),
                ?assertEqual([{E, 3, [<<"a3">>]}, {E, 4, [<<"to three again">>]} |
                              [{E, I, [<<"a", (integer_to_binary(I))/binary>>]}
                               || I <- lists:seq(5, 20)]],
                             [parse(read_event(Sse2)) || _ <- lists:seq(3, 20)]),
                Ws2 = ws_meta(S2, "2?since=" ++ id(E, 2)),
                ?assertEqual({1, 2, <<"id: ", E/binary, ":3\n\n", 0, 255>>},
                             httpdtest_raw:recv_frame(Ws2)),
                ?assertEqual({E, 4, <<"to three again">>}, meta_frame(Ws2)),
                {_, #{<<"messages">> := Ms, <<"gap">> := false}} =
                    poll_raw(S2, "/poll/3?since=" ++ id(E, 1)),
                ?assertEqual([{id(E, 2), <<"c2">>}, {id(E, 3), <<"to three again">>}],
                             [{binary_to_list(I), D} || #{<<"id">> := I, <<"data">> := D} <- Ms]),
                %% Then live, the ids going on.
                send(S2, {[1, 2, 3], <<"live">>}),
                ?assertEqual({E, 21, [<<"live">>]}, parse(read_event(Sse2))),
                ?assertEqual({E, 5, <<"live">>}, meta_frame(Ws2)),
                {_, #{<<"messages">> := [#{<<"id">> := Id4}]}} =
                    poll_raw(S2, "/poll/3?since=" ++ id(E, 3)),
                ?assertEqual(list_to_binary(id(E, 4)), Id4),
                ?assertMatch(#{replay_gaps := 0}, stats(S2)),
                gen_tcp:close(Sse2),
                gen_tcp:close(Ws2)
            after
                httpdtest_server:stop_server(S2)
            end
        catch C:R:St ->
                httpdtest_server:stop_server(S),
                erlang:raise(C, R, St)
        end
    end).

%% Each damage: a server sends uid 5 a message, stops, the file is damaged,
%% the server starts again: one line says why it was refused, and uid 5's
%% client is told of a gap (another epoch).
refused() ->
    with_file(fun(File) ->
        Arena = 4096 + page_up((?MAX_USERS + ?MAX_TOPICS + 1) * 16) + page_up(?MAX_TOPICS * 72),
        Damages = [{"a message's byte", fun() -> flip(File, Arena + 32) end,
                    "the entry at position 0: it is not as written"},
                   {"the head", fun() -> flip(File, 40) end, "its head is damaged"},
                   {"another node's", none, "it is node .*'s, not .*'s"}],
        [begin
             S = start(File),
             E = try
                     send(S, {5, <<"m1">>}),
                     sync(S),
                     {_, #{<<"messages">> := [#{<<"id">> := Id}]}} = poll_raw(S, "/poll/5?since=0"),
                     [Epoch, <<"1">>] = binary:split(Id, <<":">>),
                     Epoch
                 after
                     httpdtest_server:stop_server(S)
                 end,
             S2 = case Damage of
                      none -> start(File);               % a new node name
                      _ -> Damage(), httpdtest_server:restart_server(S)
                  end,
             try
                 ?assertMatch({match, _},
                              re:run(restarted_log(S2), "history: --history-file .* refused: " ++
                                         Why ++ ".*; started afresh, epoch [0-9a-f]{8}: clients "
                                         "coming back are told of a gap")),
                 Sse = sse(S2, 5, ["Last-Event-ID: " ++ id(E, 1)]),
                 [<<"id: ", GapId/binary>>, <<"event: gap">>, <<"data: ", Json/binary>>] =
                     binary:split(read_event(Sse), <<"\n">>, [global, trim_all]),
                 [E2, <<"0">>] = binary:split(GapId, <<":">>),
                 ?assertNotEqual(E, E2),
                 ?assertMatch(#{<<"last">> := L} when L =:= <<E/binary, ":1">>,
                              httpdtest_json:json_decode(Json)),
                 gen_tcp:close(Sse)
             after
                 httpdtest_server:stop_server(S2)
             end,
             io:format(user, "~n  ~s: refused~n", [Label])
         end || {Label, Damage, Why} <- Damages]
    end).

in_use() ->
    with_file(fun(File) ->
        S = start(File),
        try
            {St, Out} = httpdtest_server:run_cli(
                          ["--listen", "127.0.0.1:" ++ integer_to_list(httpdtest_os:free_port()),
                           "--admin-listen", "", "--master", "",
                           "--name", httpdtest_os:unique("c2") ++ "@localhost",
                           "--cookie", httpdtest_os:cookie(), "--max-users",
                           integer_to_list(?MAX_USERS), "--history-file", File], 10000),
            ?assertEqual(1, St),
            ?assertMatch({match, _}, re:run(Out, "--history-file .* is in use by another "
                                                 "process")),
            %% The first one is not disturbed.
            send(S, {7, <<"still here">>}),
            sync(S),
            {_, #{<<"messages">> := [#{<<"data">> := <<"still here">>}]}} =
                poll_raw(S, "/poll/7?since=0")
        after
            httpdtest_server:stop_server(S)
        end
    end).

%%% ---------------------------------------------------------------- helpers

%% A file of this run's own, removed after Fun.
with_file(Fun) ->
    Dir = case filelib:is_dir("/dev/shm") of
              true -> "/dev/shm";
              false -> filename:join([httpdtest_os:repo_root(), "build", "tests"])
          end,
    File = filename:join(Dir, httpdtest_os:unique("history") ++ ".hist"),
    try Fun(File)
    after file:delete(File)
    end.

start(File) ->
    httpdtest_server:start_server(#{max_users => ?MAX_USERS,
                                    extra_args => ["--history-file", File, "--max-topics",
                                                   integer_to_list(?MAX_TOPICS)]}).

%% The server's log since its last (re)start.
restarted_log(#{log := Log}) ->
    {ok, B} = file:read_file(Log),
    lists:last(binary:split(B, <<"# restarted: ">>, [global])).

page_up(N) -> (N + 4095) div 4096 * 4096.

flip(File, At) ->
    {ok, F} = file:open(File, [read, write, binary, raw]),
    {ok, <<B>>} = file:pread(F, At, 1),
    ok = file:pwrite(F, At, <<(B bxor 1)>>),
    ok = file:close(F).

id(E, Seq) -> binary_to_list(E) ++ ":" ++ integer_to_list(Seq).

sse(S, Uid, Headers) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S), [binary, {active, false}]),
    ok = gen_tcp:send(Sock, request_bytes("GET", "/sse/" ++ integer_to_list(Uid), "HTTP/1.1",
                                          Headers)),
    {Head, Rest} = read_until(Sock, <<"\r\n\r\n">>, <<>>),
    ?assertMatch(<<"HTTP/1.1 200 OK", _/binary>>, Head),
    put({buf, Sock}, Rest),
    <<"retry: ", _/binary>> = read_event(Sock),
    Sock.

ws_meta(S, Path) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S), [binary, {active, false}]),
    httpdtest_raw:ws_meta_upgrade(Sock, "/ws/" ++ Path).

%% {Epoch, Seq, DataLines} of "id: E:S\ndata: ...\n\n".
parse(Event) ->
    [<<"id: ", Id/binary>> | Rest] = binary:split(Event, <<"\n">>, [global, trim_all]),
    [Epoch, Seq] = binary:split(Id, <<":">>),
    {Epoch, binary_to_integer(Seq), [D || <<"data: ", D/binary>> <- Rest]}.
