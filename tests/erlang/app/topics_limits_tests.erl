%% SPDX-License-Identifier: Apache-2.0
%% Topics' bounds and who may join, on real servers: --max-topics,
%% --max-topics-per-stream and --max-streams-per-topic at the door and for
%% a WebSocket's joins, each refusal counted; a client joining as fast as
%% it can; a topic joined and left a million times; the token's topics
%% claim; the handler's authorize_join (--topic-auth handler); a publisher
%% flooding one topic with large messages, which keeps its newest within
%% --topic-history-bytes and evicts neither another topic's history nor a
%% uid's; and a node killed and started again with its --history-file,
%% whose topics come back with their ids.
-module(topics_limits_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [server_test/4, port_of/1, stats/1, wait_stat/4, send/2,
                           start_server/1, node_of/1, stop_server/1, logged/2, restart_server/1,
                           kill_server/1]).
-import(httpdtest_os, [scaled/1, memory_judged/0, proc_kb/2, repo_root/0, unique/1]).
-import(httpdtest_http, [http_request/2, request_bytes/4, open/2, get_request/1, expect_head/2,
                         expect_chunk/2, close/1]).
-import(httpdtest_json, [json_decode/1]).
-import(httpdtest_master, [sink_subscribe/1, wait_master_sees/3, start_master/0, master_node/1,
                           stop_master/1]).
-import(httpdtest_wait, [wait_until/3]).

-define(R, httpdtest_raw).
-define(IL, httpdtest_inbox).
-define(T, 10000).
%% The flood: --history-bytes, and what a hostile publisher sends one topic
%% (six arenas' worth).
-define(FLOOD_ARENA, 4194304).
-define(FLOOD_MSG, 60000).
-define(FLOOD_N, 420).

-import(topics_tests, [sse/2, sse/3, event/1, meta/2, ws_text/2, poll/2, joined/1, joined/2]).

limits_test_() ->
    [server_test("bounds at the door and for a WebSocket's joins, each refusal counted; "
                 "a topic no stream holds lingers, then is given up",
                 #{extra_args => ["--max-topics", "3", "--max-topics-per-stream", "2",
                                  "--max-streams-per-topic", "2", "--history-ttl", "1"]},
                 60, fun bounds/1),
     server_test("a client joining as fast as it can is closed (1008) past --client-rate",
                 #{}, 60, fun hostile_joins/1),
     server_test("a topic flooded with large messages keeps its newest within "
                 "--topic-history-bytes: another topic's clients and a uid's resume with "
                 "nothing lost",
                 #{extra_args => ["--history-bytes", integer_to_list(?FLOOD_ARENA),
                                  "--topic-history", "4096"]},
                 120, fun flood/1),
     {"a topic joined and left a million times: the masters hear a few windows of it, "
      "the index stays small", {timeout, scaled(300), fun million_joins/0}},
     token_test(),
     ?IL:app_test("--topic-auth handler: authorize_join decides the joins the token does not "
                  "allow; its refusal is told; a long-poll cannot ask it",
                  topic_test_handler, "topic_handler_sink",
                  ["--topic-auth", "handler"], fun handler/1),
     {"killed and started again with its --history-file: the topics come back with their ids "
      "and the masters send to them", {timeout, scaled(120), fun crash/0}}].

%%% ------------------------------------------------------------------ helpers

%% GET Path (Headers added): its status and body.
get(S, Path) -> get(S, Path, []).

get(S, Path, Headers) ->
    R = http_request(port_of(S), request_bytes("GET", Path, "HTTP/1.1",
                                                case Headers of
                                                    [] -> ["Connection: close"];
                                                    _ -> Headers
                                                end)),
    {maps:get(status, R), maps:get(body, R)}.

join(W, Topic) -> ok = gen_tcp:send(W, ?R:frame(1, <<"event: join\n\n", Topic/binary>>)).

%%% ------------------------------------------------------------------ cases

bounds(S) ->
    ?assertMatch({400, <<"Too many topics", _/binary>>}, get(S, "/sse/1?topics=a,b,c")),
    ?assertMatch({400, <<"Bad topic", _/binary>>}, get(S, "/sse/1?topics=a,bad%20name")),
    ?assertMatch({400, <<"Bad topic", _/binary>>}, get(S, "/sse/1?topics=a@")),
    ?assertMatch({400, <<"Resuming a topic needs", _/binary>>},
                 get(S, "/ws/1?topics=a@00000000:1",
                     ["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13",
                      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="])),
    A1 = sse(S, "/sse/1?topics=a,b"),
    A2 = sse(S, "/sse/2?topics=a"),
    ?assertMatch({503, <<"Topic a has all the streams", _/binary>>}, get(S, "/sse/3?topics=a")),
    C = sse(S, "/sse/4?topics=c"),
    ?assertMatch({503, <<"This node holds all the topics", _/binary>>}, get(S, "/poll/5?topics=d")),
    W = meta(S, "/ws/6?topics=c"),
    joined(W, [<<"c">>]),
    Joins = [{<<"a">>, <<"topic_full">>}, {<<"d">>, <<"no_room">>}],
    [begin
         join(W, T),
         ?assertEqual({<<"event: refused">>,
                       <<"{\"topic\":\"", T/binary, "\",\"reason\":\"", Why/binary, "\"}">>},
                      ws_text(W, S))
     end || {T, Why} <- Joins],
    join(W, <<"b">>),
    #{<<"topic">> := <<"b">>} = joined(W),
    join(W, <<"c2">>),
    {<<"event: refused">>, <<"{\"topic\":\"c2\",\"reason\":\"too_many_topics\"}">>} =
        ws_text(W, S),
    ?assertMatch(#{topic_refused_stream_full := 2, topic_refused_name := 2,
                   topic_refused_topic_full := 2, topic_refused_no_room := 2,
                   topics := 3, topic_subscriptions := 6}, stats(S)),
    %% no stream holds them: given up after their linger (--history-ttl)
    [gen_tcp:close(X) || X <- [A1, A2, C, W]],
    wait_stat(S, topics_given_up, fun(V) -> V =:= 3 end, ?T),
    ?assertMatch(#{topics := 0, topic_subscriptions := 0}, stats(S)),
    D = sse(S, "/sse/7?topics=d"),            % room again
    gen_tcp:close(D).

hostile_joins(S) ->
    W = meta(S, "/ws/1"),
    Frames = iolist_to_binary([?R:frame(1, <<"event: join\n\nt", (integer_to_binary(I))/binary>>)
                               || I <- lists:seq(1, 1000)]),
    ok = gen_tcp:send(W, Frames),
    %% what its bucket holds at most is taken (the joins read with the one
    %% past it go with the stream), then it is closed for policy
    Close = fun Loop(N) ->
                    case ?R:recv_frame(W) of
                        {1, 1, <<"event: ", _/binary>>} -> Loop(N + 1);
                        {1, 8, <<Code:16, _/binary>>} -> {Code, N}
                    end
            end,
    {Code, Told} = Close(0),
    ?assertEqual(1008, Code),
    wait_stat(S, streams_open, fun(V) -> V =:= 0 end, ?T),
    #{topic_joins := Joins, client_rate_closed := 1, topic_subscriptions := 0} = stats(S),
    ?assert(Told =< 20),                      % the bucket: --client-rate / 4 + 8
    ?assert(Joins =< 16).                     % --max-topics-per-stream's default

%% The ids and data of N events of Sock, each data up to its first ":".
events(Sock, N) ->
    [{maps:get(id, E), hd(binary:split(maps:get(data, E), <<":">>))}
     || E <- [event(Sock) || _ <- lists:seq(1, N)]].

flood(S) ->
    %% a topic's clients and a uid's get five messages each, then leave:
    %% of 5,000 bytes, so that moving them ahead costs (a copy budget the
    %% flood's own messages spent, when all of them were of use)
    Q = sse(S, "/sse/11?topics=quiet,flood"),
    #{<<"topic">> := <<"quiet">>} = joined(Q),
    #{<<"topic">> := <<"flood">>, <<"id">> := FloodId0} = joined(Q),
    U = sse(S, "/sse/12"),
    Pad = binary:copy(<<"p">>, 5000),
    Msgs = [integer_to_binary(I) || I <- lists:seq(1, 5)],
    [begin
         send(S, {topic, <<"quiet">>, <<"q", M/binary, ":", Pad/binary>>}),
         send(S, {12, <<"u", M/binary, ":", Pad/binary>>})
     end || M <- Msgs],
    [{QId1, <<"q1">>} | _] = events(Q, 5),
    [{UId1, <<"u1">>} | _] = events(U, 5),
    [gen_tcp:close(X) || X <- [Q, U]],
    wait_stat(S, topic_subscriptions, fun(V) -> V =:= 0 end, ?T),
    %% a hostile publisher: six arenas of 60,000-byte messages to "flood"
    Big = binary:copy(<<"f">>, ?FLOOD_MSG),
    Published = maps:get(topic_published, stats(S)),
    [send(S, {topic, <<"flood">>, Big}) || _ <- lists:seq(1, ?FLOOD_N)],
    St = wait_stat(S, topic_published, fun(V) -> V =:= Published + ?FLOOD_N end, ?T * 3),
    %% the other topic's client comes back: all it missed, no gap
    Q2 = sse(S, "/sse/11?topics=" ++ binary_to_list(QId1)),
    joined(Q2, [<<"quiet">>]),
    ?assertMatch([{<<"quiet@", _/binary>>, <<"q2">>}], events(Q2, 1)),      % no gap first
    ?assertMatch([{_, <<"q3">>}, {_, <<"q4">>}, {_, <<"q5">>}], events(Q2, 3)),
    %% and the uid's
    U2 = sse(S, "/sse/12", ["Last-Event-ID: " ++ binary_to_list(UId1)]),
    ?assertMatch([{_, <<"u2">>}], events(U2, 1)),
    ?assertMatch([{_, <<"u3">>}, {_, <<"u4">>}, {_, <<"u5">>}], events(U2, 3)),
    %% flood's client from its start: a gap, then its newest (within 1 MiB)
    F = sse(S, "/sse/13?topics=flood@" ++ binary_to_list(FloodId0)),
    joined(F, [<<"flood">>]),
    #{event := <<"gap">>, data := Gap} = event(F),
    #{<<"first">> := First} = json_decode(Gap),
    [_, FirstSeq] = binary:split(First, <<":">>),
    Kept = ?FLOOD_N - binary_to_integer(FirstSeq) + 1,
    ?assert(Kept >= 1 andalso Kept * (?FLOOD_MSG + 32) =< 1048576),
    %% what it pushed out was its own, counted
    ?assert(maps:get(topic_history_trimmed, St) > 0),
    ?assert(maps:get(history_bytes, St) =< ?FLOOD_ARENA),
    [gen_tcp:close(X) || X <- [Q2, U2, F]].

%% One chunked stream of uid Uid that asked for its conn id: {Conn, Id}.
conn_stream(S, Uid) ->
    C = open(port_of(S), get_request("/test/" ++ integer_to_list(Uid) ++ "?conn=1")),
    #{status := 200} = expect_head(C, 5000),
    _ = expect_chunk(C, 5000),
    #{<<"conn">> := Id} = json_decode(expect_chunk(C, 5000)),
    {C, binary_to_integer(Id)}.

million_joins() ->
    {Sink, M, MNode} = ?IL:presence_master("topic_presence_sink"),
    S = start_server(#{master => M, presence => presence}),
    try
        sink_subscribe(Sink),
        wait_master_sees(M, node_of(S), ?T),
        Node = node_of(S),
        Conns = [conn_stream(S, U) || U <- [1, 2, 3, 4]],
        N = case memory_judged() of true -> 250000; false -> 25000 end,
        Kb0 = proc_kb(S, "VmRSS"),
        %% applied every 1,000 rounds: the hand-off's ring (32 MB, its pages
        %% touched as far as commands pile up in it, which a busy machine
        %% makes them do) holds 8,000 at most, ~0.5 MB, so that what the
        %% resident size measures is the index
        [begin
             [httpdcnode:subscribe({Node, Id}, <<"busy">>) || {_, Id} <- Conns],
             [httpdcnode:unsubscribe({Node, Id}, <<"busy">>) || {_, Id} <- Conns],
             I rem 1000 =:= 0 andalso ?R:sync(S)
         end || I <- lists:seq(1, N)],
        [httpdcnode:subscribe({Node, Id}, <<"busy">>) || {_, Id} <- Conns],
        ?R:sync(S),
        #{topic_joins := J, topic_leaves := Lv, topic_subscriptions := 4} = stats(S),
        ?assertEqual({4 * N + 4, 4 * N}, {J, Lv}),
        %% the masters hear the net count per window, not each join
        Last = fun Loop(Msgs, Seen) ->
                       receive
                           {forwarded, presence, {httpdcnode, Node, topics, L}} ->
                               Loop(Msgs + 1, proplists:get_value(<<"busy">>, L, Seen));
                           {forwarded, presence, _} -> Loop(Msgs, Seen)
                       after 2000 -> {Msgs, Seen}
                       end
               end,
        {Msgs, Final} = Last(0, none),
        ?assertEqual({4, Msgs}, {Final, Msgs}),
        ?assert(Msgs < 2000),
        %% the index did not grow with the joins (its arrays shrink back)
        case memory_judged() of
            true -> ?assert(proc_kb(S, "VmRSS") - Kb0 < 4096);
            false -> ok
        end,
        [close(C) || {C, _} <- Conns],
        _ = MNode
    after
        ?IL:stop_all(M, S, Sink)
    end.

%%% ------------------------------------------------------------------ token

token_test() ->
    {setup,
     fun() ->
             Secret = <<"topic secret 0123456789">>,
             File = filename:join([repo_root(), "build", "tests", unique("tsecret")]),
             ok = filelib:ensure_dir(File),
             ok = file:write_file(File, Secret),
             ok = file:change_mode(File, 8#600),
             #{s => start_server(#{extra_args => ["--auth-secret-file", File]}),
               secret => Secret, file => File}
     end,
     fun(#{s := S, file := File}) -> stop_server(S), file:delete(File) end,
     fun(Ctx = #{s := S}) ->
             {"--topic-auth token: a JWT's topics claim (names, prefixes) opens them, nothing "
              "else; a WebSocket joins by its token's claim",
              {timeout, scaled(60), fun() -> logged(S, fun(_) -> token(Ctx) end) end}}
     end}.

jwt(#{secret := K}, Uid, Topics) ->
    Claims = #{sub => integer_to_binary(Uid), exp => os:system_time(second) + 600},
    binary_to_list(httpdcnode_token:sign_jwt(K, case Topics of
                                                   none -> Claims;
                                                   _ -> Claims#{topics => Topics}
                                               end)).

token(Ctx = #{s := S}) ->
    T = jwt(Ctx, 5, [<<"room:*">>, <<"news">>]),
    Sock = sse(S, "/sse/5?topics=room:1,news&token=" ++ T),
    ?assertMatch({403, <<"Topic secret is not allowed by the token">>},
                 get(S, "/sse/5?topics=news,secret&token=" ++ T)),
    ?assertMatch({403, _}, get(S, "/poll/5?topics=room&token=" ++ T)),   % no prefix match
    ?assertMatch({403, _}, get(S, "/sse/6?topics=news&token=" ++ jwt(Ctx, 6, none))),
    ?assertMatch({403, <<"Malformed token: topics", _/binary>>},
                 get(S, "/sse/6?token=" ++ jwt(Ctx, 6, [<<"bad name">>]))),
    W = meta(S, "/ws/5?token=" ++ T),
    join(W, <<"room:2">>),
    #{<<"topic">> := <<"room:2">>} = joined(W),
    join(W, <<"secret">>),
    ?assertEqual({<<"event: refused">>, <<"{\"topic\":\"secret\",\"reason\":\"denied\"}">>},
                 ws_text(W, S)),
    send(S, {topic, <<"room:2">>, <<"r2">>}),
    {<<"id: room:2@", _/binary>>, <<"r2">>} = ws_text(W, S),
    ?assertMatch(#{topic_refused_denied := 4, auth_bad := 1}, stats(S)),
    gen_tcp:close(Sock),
    gen_tcp:close(W).

%%% ------------------------------------------------------------------ handler

handler(#{server := S, mnode := MNode}) ->
    W = meta(S, "/ws/9"),
    join(W, <<"ok:1">>),
    receive {join, 9, {_, _}, <<"ok:1">>, undefined} -> ok after ?T -> error(no_join) end,
    ?assertMatch(#{<<"topic">> := <<"ok:1">>, <<"id">> := _}, joined(W)),
    join(W, <<"no:1">>),
    receive {join, 9, _, <<"no:1">>, undefined} -> ok after ?T -> error(no_join) end,
    ?assertEqual({<<"event: refused">>, <<"{\"topic\":\"no:1\",\"reason\":\"not_allowed\"}">>},
                 ws_text(W, S)),
    %% a resume asked of the handler: it sees the id, the replay follows
    wait_until(fun() -> erpc:call(MNode, httpdcnode, topic_count, [<<"ok:1">>]) =:= 1 end,
               ?T, topic_known),
    {ok, 1} = erpc:call(MNode, httpdcnode, publish_sync, [<<"ok:1">>, <<"first">>]),
    {<<"id: ok:1@", Id/binary>>, <<"first">>} = ws_text(W, S),
    {ok, 1} = erpc:call(MNode, httpdcnode, publish_sync, [<<"ok:1">>, <<"second">>]),
    {_, <<"second">>} = ws_text(W, S),
    Sse = sse(S, "/sse/10?topics=ok:1@" ++ binary_to_list(Id)),
    receive {join, 10, _, <<"ok:1">>, Id} -> ok after ?T -> error(no_join) end,
    ?assertEqual(#{<<"topic">> => <<"ok:1">>}, joined(Sse)),       % it resumes: no id
    #{data := <<"second">>} = event(Sse),
    ?assertMatch({403, <<"Topic ok:2: a long-poll may name only", _/binary>>},
                 get(S, "/poll/11?topics=ok:2")),
    ok = gen_tcp:send(W, ?R:frame(1, <<"event: leave\n\nok:1">>)),
    {<<"event: left">>, _} = ws_text(W, S),
    receive {leave, 9, _, <<"ok:1">>} -> ok after ?T -> error(no_leave) end,
    ?assertMatch(#{topic_asks := 3, topic_asks_allowed := 2, topic_asks_refused := 1},
                 stats(S)),
    gen_tcp:close(Sse),
    gen_tcp:close(W).

%%% ------------------------------------------------------------------ crash

crash() ->
    M = start_master(),
    MNode = master_node(M),
    Dir = case filelib:is_dir("/dev/shm") of true -> "/dev/shm"; false -> "/tmp" end,
    File = filename:join(Dir, unique("topics") ++ ".hist"),
    try
        httpdtest_cluster:start_app(MNode, []),
        S = start_server(#{master => M, presence => httpdcnode_presence, max_users => 1000,
                           extra_args => ["--history-file", File]}),
        Node = node_of(S),
        Count = fun() -> erpc:call(MNode, httpdcnode, topic_nodes, [<<"kept">>]) end,
        Sock = sse(S, "/sse/1?topics=kept"),
        joined(Sock, [<<"kept">>]),
        wait_until(fun() -> Count() =:= [{Node, 1}] end, ?T, {topic_at, Node}),
        Pub = fun(X) -> {ok, _} = erpc:call(MNode, httpdcnode, publish_sync, [<<"kept">>, X]) end,
        Pub(<<"k1">>),
        Pub(<<"k2">>),
        #{id := <<"kept@", Id1/binary>>} = event(Sock),
        #{data := <<"k2">>} = event(Sock),
        gen_tcp:close(Sock),
        wait_until(fun() -> Count() =:= [{Node, 0}] end, ?T, lingers),
        Pub(<<"k3">>),                         % kept for the client coming back
        %% the node acknowledged it (else, killed, it would be in doubt: a gap)
        wait_until(fun() -> maps:get(unacked, erpc:call(MNode, httpdcnode, app_stats, []))
                                =:= 0 end, ?T, acked),
        S2 = restart_server(kill_server(S)),
        try
            %% the master keeps the topic there meanwhile (its link may come back)
            wait_until(fun() -> Count() =:= [{Node, 0}] andalso
                                    lists:member(Node, erpc:call(MNode, erlang, nodes,
                                                                 [hidden]))
                       end, ?T, restored),
            Pub(<<"k4">>),
            [E, _] = binary:split(Id1, <<":">>),
            Sock2 = sse(S2, "/sse/1?topics=kept@" ++ binary_to_list(Id1)),
            joined(Sock2, [<<"kept">>]),
            Got = [event(Sock2) || _ <- [2, 3, 4]],
            ?assertEqual([{<<"kept@", E/binary, ":", (integer_to_binary(I))/binary>>, D}
                          || {I, D} <- [{2, <<"k2">>}, {3, <<"k3">>}, {4, <<"k4">>}]],
                         [{maps:get(id, X), maps:get(data, X)} || X <- Got]),
            gen_tcp:close(Sock2)
        after
            stop_server(S2)
        end
    after
        stop_master(M),
        file:delete(File)
    end.
