%% SPDX-License-Identifier: Apache-2.0
%% Hot upgrade (--takeover): a new server process takes over from the
%% running one while a real master sends through the application, and no
%% client sees anything: every stream (chunked, SSE, WebSocket, ws+meta, a
%% long-poll waiting, an SSE stream whose client does not read and holds
%% unsent bytes, a WebSocket in the middle of a client frame) goes on with
%% no message lost, doubled or out of order, its ids going on in the same
%% epoch, its framing whole; the master sees no nodedown and no presence
%% message, and its numbered stream to the node is acknowledged to the end
%% with nothing sent twice. A takeover the running process refuses (another state format,
%% other options) leaves it serving. SIGUSR2 makes the running process
%% start its own binary to take over (systemctl reload), with a
%% --history-file, the test node's own link to the C-node kept. Streams
%% subscribed to topics, handed over while the master publishes to them,
%% get each topic's messages once, in order, their ids going on in the
%% topic's epoch; a topic no stream holds keeps what is published to it
%% for the client that comes back.
-module(core_takeover_tests).
-include_lib("eunit/include/eunit.hrl").

%% run on the master
-export([sender/1, burst/3, watch/1, topic_sender/1]).

-define(T, 10000).
-define(BURST_SIZE, 16384).      % bytes of each message to the client that does not read

takeover_test_() ->
    [httpdtest_inbox:app_test(
       "every transport, a slow reader and a client frame in flight, a master sending "
       "through the application: nothing lost, doubled or reordered, no stream closed, "
       "ids and framing whole, the master sees nothing",
       inbox_test_handler, "takeover_sink", ["--max-backlog", "8388608"], fun every_stream/1),
     httpdtest_inbox:app_test(
       "topics: streams subscribed to topics handed over under publishes: each topic's "
       "messages once, in order, ids going on; a lingering topic's history kept; the master "
       "sees nothing", inbox_test_handler, "takeover_topics_sink", [], fun topics/1),
     {"refused (another state format, other options): the running process serves on",
      {timeout, 120, fun refused/0}},
     {"SIGUSR2 with a --history-file: the binary takes over, streams and links kept",
      {timeout, 120, fun on_sigusr2/0}}].

%%% ---------------------------------------------------------------- every stream

every_stream(#{server := S, mnode := MNode}) ->
    CNode = httpdtest_server:node_of(S),
    {ChunkedSock, ChunkedBuf} = open_plain(S, "/test/1"),
    Chunked = collector(chunked, ChunkedSock, ChunkedBuf),
    {SseSock, SseBuf} = open_sse(S, "/sse/2"),
    Sse = collector(sse, SseSock, SseBuf),
    WsSock = httpdtest_inbox:ws_open(S, 3),
    Ws = collector(ws, WsSock, get({buf, WsSock})),
    {ok, MetaSock} = gen_tcp:connect({127, 0, 0, 1}, httpdtest_server:port_of(S),
                                     [binary, {active, false}]),
    httpdtest_raw:ws_meta_upgrade(MetaSock, "/ws/4"),
    Meta = collector(meta, MetaSock, get({buf, MetaSock})),
    {SlowSock, SlowBuf} = open_sse(S, "/sse/6", [{recbuf, 4096}]),
    Slow = collector(sse, SlowSock, SlowBuf, wait),
    InFlight = httpdtest_inbox:ws_open(S, 7),
    InHeader = httpdtest_inbox:ws_open(S, 7),
    Uids = [1, 2, 3, 4, 6, 7],
    httpdtest_wait:wait_until(fun() -> m(MNode, httpdcnode, online_uids, [CNode]) =:= Uids end,
                              ?T, master_knows_streams),
    %% The client of uid 6 reads nothing: what it is sent past what the
    %% kernel holds (its send buffer grows to tcp_wmem's most) waits in
    %% the server.
    Burst = (wmem_max() + (2 bsl 20)) div ?BURST_SIZE,
    ok = m(MNode, ?MODULE, burst, [6, Burst, ?BURST_SIZE]),
    httpdtest_server:wait_stat(S, backlog_bytes, fun(V) -> V > 0 end, ?T),
    Sender = m(MNode, ?MODULE, sender, [[1, 2, 3, 4, 6]]),
    wait_units(Chunked, 20),
    E = epoch_of(hd(units(Sse))),
    All = lists:sort([5 | Uids]),
    Poll = httpdtest_raw:spawn_poll(S, "/poll/5?since=" ++ binary_to_list(E) ++ ":0"),
    httpdtest_wait:wait_until(fun() -> m(MNode, httpdcnode, online_uids, [CNode]) =:= All end,
                              ?T, master_knows_poll),
    %% Client frames cut in the middle of the payload and of the header:
    %% the rest comes after the hand-over.
    Frame = httpdtest_inbox:frame(<<"from seven, across the upgrade">>),
    <<Half:9/binary, Rest/binary>> = Frame,
    ok = gen_tcp:send(InFlight, Half),
    Frame2 = httpdtest_inbox:frame(<<"and its header too">>),
    <<Head2:3/binary, Rest2/binary>> = Frame2,
    ok = gen_tcp:send(InHeader, Head2),
    Watch = m(MNode, ?MODULE, watch, [CNode]),
    Before = httpdtest_server:stats(S),
    ?assert(maps:get(backlog_bytes, Before) > 0),

    {ok, S2} = httpdtest_server:takeover_server(S),

    Counts = [length(units(C)) || C <- [Chunked, Sse, Ws, Meta]],
    [wait_units(C, N + 30) || {C, N} <- lists:zip([Chunked, Sse, Ws, Meta], Counts)],
    Sender ! {stop, self()},
    N = receive {sent, Sender, Last} -> Last after ?T -> erlang:error(sender_silent) end,
    ok = gen_tcp:send(InFlight, Rest),
    [{7, _, <<"from seven, across the upgrade">>}] = httpdtest_inbox:collect(1),
    ok = gen_tcp:send(InHeader, Rest2),
    [{7, _, <<"and its header too">>}] = httpdtest_inbox:collect(1),
    Slow ! go,
    [wait_units(C, K) || {C, K} <- [{Chunked, N + 1}, {Sse, N}, {Ws, N}, {Meta, N},
                                    {Slow, Burst + N}]],
    %% Each client: every message once, in order, its ids going on.
    ?assertEqual([welcome(1) | [payload(1, I) || I <- lists:seq(1, N)]], units(Chunked)),
    ?assertEqual([{id(E, I), payload(2, I)} || I <- lists:seq(1, N)], units(Sse)),
    ?assertEqual([payload(3, I) || I <- lists:seq(1, N)], units(Ws)),
    ?assertEqual([{id(E, I), payload(4, I)} || I <- lists:seq(1, N)], units(Meta)),
    ?assertEqual([{id(E, I), burst_payload(I, ?BURST_SIZE)} || I <- lists:seq(1, Burst)] ++
                     [{id(E, Burst + I), payload(6, I)} || I <- lists:seq(1, N)],
                 units(Slow)),
    %% No stream closed, and the master saw nothing of it all.
    [?assertEqual(open, closed_or_open(C)) || C <- [Chunked, Sse, Ws, Meta, Slow]],
    ?assertEqual({watched, 0, []}, report(Watch)),
    ?assertEqual(All, m(MNode, httpdcnode, online_uids, [CNode])),
    %% The master's numbered stream: all of it acknowledged (what came
    %% after the hand-over by the new process), none of it sent twice.
    httpdtest_wait:wait_until(
      fun() -> maps:get(unacked, m(MNode, httpdcnode_outq, info, [])) =:= 0 end, ?T, all_acked),
    St = httpdtest_server:stats(S2),
    ?assertMatch(#{client_closed := 0, slow_closed := 0, replay_gaps := 0, streams_open := 8,
                   erl_masters := 1, seq_duplicates := 0, seq_skipped := 0}, St),
    ?assert(maps:get(deliveries, St) > maps:get(deliveries, Before)),   % counters go on
    ?assert(maps:get(seq_acks, St) > maps:get(seq_acks, Before)),
    %% The long-poll that waited through it is answered by the new process.
    ok = m(MNode, httpdcnode, send, [5, <<"five">>]),
    Answer = receive {poll_answer, Poll, Bytes} -> Bytes after ?T -> erlang:error(no_poll) end,
    [_, Body] = binary:split(Answer, <<"\r\n\r\n">>),
    ?assertMatch(#{<<"messages">> := [#{<<"id">> := Id5, <<"data">> := <<"five">>}]}
                   when Id5 =:= <<E/binary, ":1">>, httpdtest_json:json_decode(Body)),
    {ok, Log} = file:read_file(maps:get(log, S2)),
    ?assertMatch({match, _}, re:run(Log, "takeover: handed over to pid [0-9]+ in [0-9]+ ms "
                                          "\\(8 streams")),
    ?assertMatch({match, _}, re:run(Log, "takeover: took over from pid [0-9]+ in [0-9]+ ms: "
                                          "8 streams")),
    [gen_tcp:close(Sock) || Sock <- [InFlight, InHeader]],
    [C ! stop || C <- [Chunked, Sse, Ws, Meta, Slow]],
    ok.

%%% ---------------------------------------------------------------- topics

topics(#{server := S, mnode := MNode}) ->
    CNode = httpdtest_server:node_of(S),
    Nodes = fun(T) -> m(MNode, httpdcnode, topic_nodes, [T]) end,
    %% d: a topic no stream holds any more, lingering for its client
    D = topics_tests:sse(S, "/sse/15?topics=d"),
    #{<<"id">> := DFrom} = topics_tests:joined(D),
    gen_tcp:close(D),
    {AbSock, AbBuf} = topic_sse(S, "/sse/11?topics=a,b", [<<"a">>, <<"b">>]),
    Ab = collector(sse, AbSock, AbBuf),
    {BSock, BBuf} = topic_sse(S, "/sse/12?topics=b", [<<"b">>]),
    B = collector(sse, BSock, BBuf),
    MetaSock = topics_tests:meta(S, "/ws/13?topics=a"),
    topics_tests:joined(MetaSock, [<<"a">>]),
    Meta = collector(meta, MetaSock, get({buf, MetaSock})),
    {ChunkedSock, ChunkedBuf} = open_plain(S, "/test/14?topics=c"),
    Chunked = collector(chunked, ChunkedSock, ChunkedBuf),
    Held = [{<<"a">>, 2}, {<<"b">>, 2}, {<<"c">>, 1}, {<<"d">>, 0}],
    [httpdtest_wait:wait_until(fun() -> Nodes(T) =:= [{CNode, K}] end, ?T, {held, T, K})
     || {T, K} <- Held],
    [{ok, 0} = m(MNode, httpdcnode, publish_sync, [<<"d">>, tpayload(<<"d">>, I)])
     || I <- [1, 2, 3]],
    Watch = m(MNode, ?MODULE, watch, [CNode]),
    Sender = m(MNode, ?MODULE, topic_sender, [[<<"a">>, <<"b">>, <<"c">>]]),
    wait_units(Chunked, 20),

    {ok, S2} = httpdtest_server:takeover_server(S),

    Counts = [length(units(C)) || C <- [Ab, B, Meta, Chunked]],
    [wait_units(C, K + 30) || {C, K} <- lists:zip([Ab, B, Meta, Chunked], Counts)],
    Sender ! {stop, self()},
    N = receive {sent, Sender, Last} -> Last after ?T -> erlang:error(sender_silent) end,
    [{ok, 0} = m(MNode, httpdcnode, publish_sync, [<<"d">>, tpayload(<<"d">>, I)])
     || I <- [4, 5]],
    [wait_units(C, K) || {C, K} <- [{Ab, 2 * N}, {B, N}, {Meta, N}, {Chunked, N + 1}]],
    %% Each topic on each stream: every message once, in order, its ids
    %% going on in the topic's epoch.
    [EA, EB] = [topic_epoch(T, units(Ab)) || T <- [<<"a">>, <<"b">>]],
    ?assertEqual([{tid(<<"a">>, EA, I), tpayload(<<"a">>, I)} || I <- lists:seq(1, N)],
                 of_topic(<<"a">>, units(Ab))),
    ?assertEqual([{tid(<<"b">>, EB, I), tpayload(<<"b">>, I)} || I <- lists:seq(1, N)],
                 of_topic(<<"b">>, units(Ab))),
    ?assertEqual([{tid(<<"b">>, EB, I), tpayload(<<"b">>, I)} || I <- lists:seq(1, N)], units(B)),
    ?assertEqual([{tid(<<"a">>, EA, I), tpayload(<<"a">>, I)} || I <- lists:seq(1, N)],
                 units(Meta)),
    ?assertEqual([welcome(14) | [tpayload(<<"c">>, I) || I <- lists:seq(1, N)]], units(Chunked)),
    [?assertEqual(open, closed_or_open(C)) || C <- [Ab, B, Meta, Chunked]],
    %% The masters heard nothing of it: every topic held as it was.
    ?assertEqual({watched, 0, []}, report(Watch)),
    [?assertEqual([{CNode, K}], Nodes(T)) || {T, K} <- Held],
    %% d's client comes back: what was published meanwhile, before the
    %% hand-over and after, once, in order; the masters hear it joined.
    D2 = topics_tests:sse(S2, "/sse/16?topics=d@" ++ binary_to_list(DFrom)),
    topics_tests:joined(D2, [<<"d">>]),
    [DEpoch, _] = binary:split(DFrom, <<":">>),
    ?assertEqual([#{id => tid(<<"d">>, DEpoch, I), data => tpayload(<<"d">>, I)}
                  || I <- lists:seq(1, 5)],
                 [maps:with([id, data], topics_tests:event(D2)) || _ <- lists:seq(1, 5)]),
    httpdtest_wait:wait_until(fun() -> Nodes(<<"d">>) =:= [{CNode, 1}] end, ?T, d_joined),
    ?assertMatch(#{topics := 4, topic_subscriptions := 6, replay_gaps := 0, client_closed := 1},
                 httpdtest_server:stats(S2)),
    {ok, Log} = file:read_file(maps:get(log, S2)),
    ?assertMatch({match, _}, re:run(Log, "topics: 4 taken over, 5 subscriptions")),
    gen_tcp:close(D2),
    [C ! stop || C <- [Ab, B, Meta, Chunked]],
    ok.

%% An SSE stream of Path whose joined events for Topics were read: its
%% socket and what came after them.
topic_sse(S, Path, Topics) ->
    Sock = topics_tests:sse(S, Path),
    topics_tests:joined(Sock, Topics),
    {Sock, get({buf, Sock})}.

%% The units (SSE events {Id, Data}) of Topic ("T@E:S" ids).
of_topic(T, Units) ->
    [U || {Id, _} = U <- Units, hd(binary:split(Id, <<"@">>)) =:= T].

topic_epoch(T, Units) ->
    [{Id, _} | _] = of_topic(T, Units),
    [_, ES] = binary:split(Id, <<"@">>),
    hd(binary:split(ES, <<":">>)).

tid(T, E, I) -> <<T/binary, "@", E/binary, ":", (integer_to_binary(I))/binary>>.

tpayload(T, I) -> <<T/binary, "-", (integer_to_binary(I))/binary>>.

%%% ---------------------------------------------------------------- refused

refused() ->
    S = httpdtest_server:start_server(#{max_users => 1000}),
    try
        {Sock, Buf} = open_sse(S, "/sse/1"),
        Sse = collector(sse, Sock, Buf),
        httpdtest_server:send(S, {1, <<"before">>}),
        wait_units(Sse, 1),
        E = epoch_of(hd(units(Sse))),
        Tries = [{#{env => ["HTTPDCNODE_TAKEOVER_FORMAT=99"]},
                  "it reads state format 99, this process writes format 2"},
                 {#{extra => ["--max-backlog", "2000000"]},
                  "it was started with other options than this process"}],
        [begin
             {refused, 1, _} = httpdtest_server:takeover_server(S, Try),
             {ok, Log} = file:read_file(maps:get(log, S)),
             ?assertMatch({match, _}, re:run(Log, "takeover: refused pid [0-9]+: " ++ Why ++
                                                  ".*; this process serves on")),
             ?assertMatch({match, _}, re:run(Log, "takeover: refused by the running process "
                                                  "of node [^:]+: " ++ Why))
         end || {Try, Why} <- Tries],
        %% It serves on: its stream goes on, a new one opens.
        httpdtest_server:send(S, {1, <<"after">>}),
        wait_units(Sse, 2),
        ?assertEqual([{id(E, 1), <<"before">>}, {id(E, 2), <<"after">>}], units(Sse)),
        ?assertEqual(open, closed_or_open(Sse)),
        {Sock2, Buf2} = open_sse(S, "/sse/2"),
        Sse2 = collector(sse, Sock2, Buf2),
        httpdtest_server:send(S, {2, <<"new">>}),
        wait_units(Sse2, 1),
        ?assertEqual(running, httpdtest_os:proc_status(S)),
        [C ! stop || C <- [Sse, Sse2]]
    after
        httpdtest_server:stop_server(S)
    end.

%%% ---------------------------------------------------------------- SIGUSR2

on_sigusr2() ->
    File = filename:join("/dev/shm", httpdtest_os:unique("takeover") ++ ".history"),
    S = httpdtest_server:start_server(#{max_users => 1000,
                                        extra_args => ["--history-file", File]}),
    CNode = httpdtest_server:node_of(S),
    NewPid = fun() ->
                     {ok, L} = file:read_file(maps:get(log, S)),
                     case re:run(L, "SIGUSR2: started pid ([0-9]+)", [{capture, [1], list}]) of
                         {match, [P]} -> P;
                         nomatch -> none
                     end
             end,
    try
        {ok, MetaSock} = gen_tcp:connect({127, 0, 0, 1}, httpdtest_server:port_of(S),
                                         [binary, {active, false}]),
        httpdtest_raw:ws_meta_upgrade(MetaSock, "/ws/1"),
        Meta = collector(meta, MetaSock, get({buf, MetaSock})),
        {ChunkedSock, ChunkedBuf} = open_plain(S, "/test/2"),
        Chunked = collector(chunked, ChunkedSock, ChunkedBuf),
        monitor_node(CNode, true),
        Send = fun(From, To) -> [httpdtest_server:send(S, {[1, 2], payload(0, I)})
                                 || I <- lists:seq(From, To)] end,
        Send(1, 50),
        wait_units(Meta, 50),
        E = epoch_of(hd(units(Meta))),
        ok = httpdtest_os:signal(S, "USR2"),
        httpdtest_wait:wait_until(fun() -> NewPid() =/= none end, ?T, spawned),
        httpdtest_os:note_pid(list_to_integer(NewPid()), "takeover"),
        %% Messages keep coming while the new process takes over.
        Send(51, 100),
        {ok, 0, _} = httpdtest_os:wait_exit(S, 30000),
        Send(101, 150),
        wait_units(Meta, 150),
        wait_units(Chunked, 151),
        ?assertEqual([{id(E, I), payload(0, I)} || I <- lists:seq(1, 150)], units(Meta)),
        ?assertEqual([welcome(2) | [payload(0, I) || I <- lists:seq(1, 150)]], units(Chunked)),
        receive {nodedown, CNode} -> erlang:error(nodedown) after 0 -> ok end,
        {ok, Log} = file:read_file(maps:get(log, S)),
        ?assertMatch({match, _}, re:run(Log, "history: taken over, epoch " ++ binary_to_list(E))),
        ?assertMatch({match, _}, re:run(Log, "takeover: [0-9]+ Erlang links and the epmd "
                                             "registration taken over")),
        ?assertEqual([open, open], [closed_or_open(C) || C <- [Meta, Chunked]]),
        [C ! stop || C <- [Meta, Chunked]]
    after
        monitor_node(CNode, false),
        case NewPid() of
            none -> ok;
            P ->
                os:cmd("kill -KILL " ++ P),
                httpdtest_wait:wait_until(fun() -> gone(P) end, ?T, {gone, P}),
                httpdtest_os:forget_pid(list_to_integer(P))
        end,
        httpdtest_server:stop_server(S),
        file:delete(File)
    end.

%% Whether the process P has exited (a zombie has: its parent left).
gone(P) ->
    case file:read_file("/proc/" ++ P ++ "/stat") of
        {ok, Stat} -> nomatch =/= re:run(Stat, "^[0-9]+ \\(.*\\) Z");
        {error, _} -> true
    end.

%%% ---------------------------------------------------------------- on the master

%% Sends Uids their next message every 2 ms, until told to stop: then
%% answers {sent, Self, N}, N the last message each was sent.
sender(Uids) ->
    spawn(fun() -> send_loop(Uids, 1) end).

send_loop(Uids, I) ->
    [httpdcnode:send(U, payload(U, I)) || U <- Uids],
    receive {stop, From} -> From ! {sent, self(), I}
    after 2 -> send_loop(Uids, I + 1)
    end.

%% Publishes each topic of Topics its next message every 2 ms, until
%% told to stop: then answers {sent, Self, N}, N the last one each got.
topic_sender(Topics) ->
    spawn(fun() -> topic_loop(Topics, 1) end).

topic_loop(Topics, I) ->
    [httpdcnode:publish(T, tpayload(T, I)) || T <- Topics],
    receive {stop, From} -> From ! {sent, self(), I}
    after 2 -> topic_loop(Topics, I + 1)
    end.

%% K messages of Size bytes to Uid, in order.
burst(Uid, K, Size) ->
    [httpdcnode:send(Uid, burst_payload(I, Size)) || I <- lists:seq(1, K)],
    ok.

%% Watches CNode from here: its nodedown, and what the presence process
%% gets from it; {report, From} answers {watched, Nodedowns, Messages}.
watch(CNode) ->
    Self = self(),
    Pid = spawn(fun() ->
                        monitor_node(CNode, true),
                        erlang:trace(whereis(httpdcnode_presence), true, ['receive']),
                        Self ! {watching, self()},
                        watch_loop(CNode, 0, [])
                end),
    receive {watching, Pid} -> Pid after ?T -> erlang:error(watch_not_started) end.

watch_loop(CNode, Downs, Msgs) ->
    receive
        {nodedown, CNode} -> watch_loop(CNode, Downs + 1, Msgs);
        {trace, _, 'receive', M} when element(1, M) =:= httpdcnode, element(2, M) =:= CNode ->
            watch_loop(CNode, Downs, [M | Msgs]);
        {trace, _, _, _} -> watch_loop(CNode, Downs, Msgs);
        {report, From} -> From ! {watched, Downs, lists:reverse(Msgs)}
    end.

%%% ---------------------------------------------------------------- clients

%% The most a socket's send buffer grows to (tcp_wmem's third number).
wmem_max() ->
    {ok, B} = file:read_file("/proc/sys/net/ipv4/tcp_wmem"),
    [_, _, Max] = string:lexemes(binary_to_list(B), " \t\n"),
    list_to_integer(Max).

payload(Uid, I) -> iolist_to_binary([integer_to_list(Uid), "-", integer_to_list(I)]).

burst_payload(I, Size) ->
    Head = iolist_to_binary(["b", integer_to_list(I), "-"]),
    <<Head/binary, (binary:copy(<<"x">>, Size - byte_size(Head)))/binary>>.

welcome(Uid) -> iolist_to_binary(io_lib:format("Welcome, Url: '/test/~b' Id: ~b\n", [Uid, Uid])).

id(E, I) -> <<E/binary, ":", (integer_to_binary(I))/binary>>.

epoch_of({Id, _}) -> hd(binary:split(Id, <<":">>)).

open_plain(S, Path) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, httpdtest_server:port_of(S),
                                 [binary, {active, false}]),
    ok = gen_tcp:send(Sock, httpdtest_http:get_request(Path)),
    {Head, Rest} = httpdtest_raw:read_until(Sock, <<"\r\n\r\n">>, <<>>),
    ?assertMatch(<<"HTTP/1.1 200 ", _/binary>>, Head),
    {Sock, Rest}.

open_sse(S, Path) -> open_sse(S, Path, []).

open_sse(S, Path, Opts) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, httpdtest_server:port_of(S),
                                 [binary, {active, false} | Opts]),
    ok = gen_tcp:send(Sock, httpdtest_http:get_request(Path)),
    {Head, Rest} = httpdtest_raw:read_until(Sock, <<"\r\n\r\n">>, <<>>),
    ?assertMatch(<<"HTTP/1.1 200 ", _/binary>>, Head),
    {Sock, Rest}.

%% A process that owns Sock and takes apart what comes on it (after Buf)
%% as Kind frames it: chunked (chunks), sse (events {Id, Data}), ws (text
%% frames) or meta (ws+meta frames {Id, Payload}); every frame checked
%% (a WebSocket's as RFC 6455 says a server's must be). wait: it reads
%% nothing until sent go.
collector(Kind, Sock, Buf) -> collector(Kind, Sock, Buf, read).

collector(Kind, Sock, Buf, Mode) ->
    Self = self(),
    Pid = spawn_link(fun() ->
                             receive {owner, Self} -> ok end,
                             Mode =:= read andalso inet:setopts(Sock, [{active, true}]),
                             collect(#{kind => Kind, sock => Sock, buf => Buf, units => [],
                                       state => open})
                     end),
    ok = gen_tcp:controlling_process(Sock, Pid),
    Pid ! {owner, Self},
    Pid.

collect(C = #{kind := Kind, sock := Sock, buf := Buf, units := Us}) ->
    {New, Rest} = parse(Kind, Buf, []),
    C1 = C#{buf => Rest, units => lists:reverse(New, Us)},
    receive
        {tcp, Sock, D} -> collect(C1#{buf => <<Rest/binary, D/binary>>});
        {tcp_closed, Sock} -> collect(C1#{state => closed});
        go -> inet:setopts(Sock, [{active, true}]), collect(C1);
        {units, From} -> From ! {units, self(), lists:reverse(maps:get(units, C1))}, collect(C1);
        {state, From} -> From ! {state, self(), maps:get(state, C1)}, collect(C1);
        stop -> gen_tcp:close(Sock)
    end.

parse(chunked, B, Acc) ->
    case binary:split(B, <<"\r\n">>) of
        [SizeHex, After] ->
            Size = binary_to_integer(SizeHex, 16),
            case After of
                <<Data:Size/binary, "\r\n", Rest/binary>> -> parse(chunked, Rest, [Data | Acc]);
                _ -> {lists:reverse(Acc), B}
            end;
        [_] -> {lists:reverse(Acc), B}
    end;
parse(sse, B, Acc) ->
    case binary:split(B, <<"\n\n">>) of
        [Event, Rest] ->
            Lines = binary:split(Event, <<"\n">>, [global]),
            case [{K, V} || L <- Lines, [K, V] <- [binary:split(L, <<": ">>)],
                            K =:= <<"id">> orelse K =:= <<"data">>] of
                [{<<"id">>, Id}, {<<"data">>, Data}] -> parse(sse, Rest, [{Id, Data} | Acc]);
                [] -> parse(sse, Rest, Acc);          % the retry advice, a heartbeat
                Other -> parse(sse, Rest, [{unexpected, Other} | Acc])
            end;
        [_] -> {lists:reverse(Acc), B}
    end;
parse(Ws, B, Acc) ->
    case frame(B) of
        more -> {lists:reverse(Acc), B};
        {9, _, Rest} -> parse(Ws, Rest, Acc);               % a ping
        {1, P, Rest} when Ws =:= ws -> parse(Ws, Rest, [P | Acc]);
        {1, <<"id: ", P/binary>>, Rest} when Ws =:= meta ->
            [Id, Payload] = binary:split(P, <<"\n\n">>),
            parse(Ws, Rest, [{Id, Payload} | Acc]);
        {Op, P, Rest} -> parse(Ws, Rest, [{unexpected, Op, P} | Acc])
    end.

%% A server frame: FIN, no RSV, no mask, its length in the shortest form.
frame(<<1:1, 0:3, Op:4, 0:1, Len0:7, R0/binary>>) ->
    {Len, R} = case {Len0, R0} of
                   {126, <<L:16, T/binary>>} when L >= 126 -> {L, T};
                   {127, <<L:64, T/binary>>} when L >= 65536 -> {L, T};
                   {126, T} when byte_size(T) < 2 -> {more, T};
                   {127, T} when byte_size(T) < 8 -> {more, T};
                   {L, T} when L < 126 -> {L, T}
               end,
    case R of
        _ when Len =:= more -> more;
        <<P:Len/binary, Rest/binary>> -> {Op, P, Rest};
        _ -> more
    end;
frame(B) when byte_size(B) < 2 -> more;
frame(B) -> erlang:error({bad_frame, binary:part(B, 0, min(16, byte_size(B)))}).

units(C) -> ask(C, units).

closed_or_open(C) -> ask(C, state).

ask(C, What) ->
    C ! {What, self()},
    receive {What, C, V} -> V after ?T -> erlang:error({collector_silent, What}) end.

wait_units(C, N) ->
    httpdtest_wait:wait_until(fun() ->
                                      K = length(units(C)),
                                      {K >= N, K}
                              end, 30000, {units, N}).

report(Watch) ->
    Watch ! {report, self()},
    receive {watched, _, _} = R -> R after ?T -> erlang:error(watch_silent) end.

m(Node, Mod, F, A) -> erpc:call(Node, Mod, F, A, 30000).
