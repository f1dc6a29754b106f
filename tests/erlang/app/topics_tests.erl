%% SPDX-License-Identifier: Apache-2.0
%% Topics through the application: two real masters (A and B, env masters)
%% and two real C-nodes (--presence httpdcnode_presence --presence-topics)
%% with real streams on every transport: publish once per C-node, joins by
%% query, by a WebSocket's message and by the application, per-topic
%% resume and gaps on SSE, ws+meta and long-poll, topic presence on both
%% masters, and a C-node killed.
%%
%% The cases run in order on one cluster; each uses its own uids and
%% topics and closes its sockets.
-module(topics_tests).
-include_lib("eunit/include/eunit.hrl").

-export([sse/2, sse/3, event/1, meta/2, ws_text/2, poll/2, parse_event/1, joined/1, joined/2]).

-import(httpdtest_master, [start_master/0, master_node/1, stop_master/1,
                           kill_master_by_name/1]).
-import(httpdtest_server, [start_server/1, node_of/1, stop_server/1, port_of/1, stats/1,
                           kill_server/1]).
-import(httpdtest_wait, [wait_until/3]).
-import(httpdtest_http, [request_bytes/4, open/2, get_request/1, expect_head/2, expect_chunk/2,
                         close/1]).
-import(httpdtest_json, [json_decode/1]).

-define(R, httpdtest_raw).
-define(WAIT, 15000).
-define(PRESENCE, httpdcnode_presence).

topics_test_() ->
    {timeout, 300,
     {setup, fun setup/0, fun cleanup/1,
      fun(Ctx) ->
              {inorder,
               [t(Ctx, "a topic's message reaches its streams on every transport, one Erlang "
                  "message per C-node", fun every_transport/1),
                t(Ctx, "a WebSocket joins and leaves a topic by message", fun ws_join_leave/1),
                t(Ctx, "the application subscribes and unsubscribes a connection",
                  fun app_subscribe/1),
                t(Ctx, "resume per topic on SSE, ws+meta and long-poll: what was missed, once",
                  fun resume/1),
                t(Ctx, "a topic's gap is told on SSE, ws+meta and long-poll", fun gaps/1),
                t(Ctx, "topic presence: counts and members on both masters, a killed C-node's "
                  "subscribers gone, its topics kept with none", fun presence/1)]}
      end}}.

t(Ctx, Label, Fun) ->
    httpdtest_cluster:test_case(Label, 60, fun() -> Fun(Ctx) end, fun() -> logs(Ctx) end,
                                fun() -> [catch gen_tcp:close(S) || S <- erase_socks()] end).

logs(#{servers := Ss, mlogs := ML}) -> ML ++ [maps:get(log, S) || S <- Ss].

erase_socks() ->
    case erase(topic_socks) of
        undefined -> [];
        L -> L
    end.

keep(Sock) ->
    put(topic_socks, [Sock | case get(topic_socks) of undefined -> []; L -> L end]),
    Sock.

setup() ->
    Procs = [start_master() || _ <- [1, 2]],
    [A, B] = Masters = [master_node(P) || P <- Procs],
    [httpdtest_cluster:start_app(N, [{masters, Masters}]) || N <- Masters],
    Both = list_to_atom(atom_to_list(A) ++ "," ++ atom_to_list(B)),
    Servers = [start_server(#{master => Both, presence => ?PRESENCE,
                              extra_args => ["--presence-topics", "--history", "64"]})
               || _ <- [1, 2]],
    Nodes = [node_of(S) || S <- Servers],
    [httpdtest_cluster:wait_known(M, Nodes, ?WAIT) || M <- Masters],
    #{a => A, b => B, procs => Procs, servers => Servers, nodes => Nodes,
      mlogs => [maps:get(log, P) || P <- Procs]}.

cleanup(#{procs := Procs, servers := Servers, a := A, b := B}) ->
    [catch stop_server(S) || S <- Servers],
    [catch stop_master(P) || P <- Procs],
    [catch kill_master_by_name(N) || N <- [A, B]],
    ok.

m(Node, F, A) -> erpc:call(Node, httpdcnode, F, A, 30000).

server(#{servers := Ss}, I) -> lists:nth(I, Ss).
cnode(#{nodes := Ns}, I) -> lists:nth(I, Ns).

%% Until both masters count N streams of Topic on the C-nodes Nodes.
wait_count(#{a := A, b := B}, Topic, N, Nodes) ->
    Want = {N, lists:sort(Nodes)},
    [wait_until(fun() ->
                        case catch {m(M, topic_count, [Topic]),
                                    lists:sort([Nd || {Nd, _} <- m(M, topic_nodes, [Topic])])} of
                            Want -> true;
                            Other -> {false, Other}
                        end
                end, ?WAIT, {topic_count, M, Topic, Want}) || M <- [A, B]],
    ok.

%%% ------------------------------------------------------------------ clients

%% GET Path as an SSE stream (Headers added): the socket, past its retry:.
sse(S, Path) -> sse(S, Path, []).

sse(S, Path, Headers) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S), [binary, {active, false}]),
    ok = gen_tcp:send(Sock, request_bytes("GET", Path, "HTTP/1.1", Headers)),
    {Head, Rest} = ?R:read_until(Sock, <<"\r\n\r\n">>, <<>>),
    ?assertMatch(<<"HTTP/1.1 200 ", _/binary>>, Head),
    put({buf, Sock}, Rest),
    <<"retry: ", _/binary>> = ?R:read_event(Sock),
    keep(Sock).

%% The next SSE event as a map of its fields (data lines joined).
event(Sock) -> parse_event(?R:read_event(Sock)).

parse_event(Bin) ->
    Lines = [L || L <- binary:split(Bin, <<"\n">>, [global]), L =/= <<>>],
    lists:foldl(fun(<<"data: ", D/binary>>, #{data := Old} = M) -> M#{data := <<Old/binary, "\n", D/binary>>};
                   (<<"data: ", D/binary>>, M) -> M#{data => D};
                   (<<"id: ", I/binary>>, M) -> M#{id => I};
                   (<<"event: ", E/binary>>, M) -> M#{event => E};
                   (_, M) -> M
                end, #{}, Lines).

%% The next events (SSE) or frames (ws+meta) of Sock are joined events of
%% Topics, in that order: what a stream is told of the topics it opened with.
joined(Sock, Topics) ->
    [?assertMatch({T, #{<<"topic">> := T}}, {T, joined(Sock)}) || T <- Topics],
    ok.

%% The next event or frame: a joined event's JSON ({"topic":T} and, joined
%% from now, "id": where it stands).
joined(Sock) ->
    case get({ws, Sock}) of
        true ->
            {<<"event: joined">>, J} = ws_text(Sock, none),
            json_decode(J);
        _ ->
            #{event := <<"joined">>, data := J} = event(Sock),
            json_decode(J)
    end.

%% GET Path upgraded to a ws+meta WebSocket.
meta(S, Path) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, port_of(S), [binary, {active, false}]),
    put({ws, Sock}, true),
    keep(?R:ws_meta_upgrade(Sock, Path)).

%% The next ws+meta text or binary frame as {Head, Body}.
ws_text(Sock, _) ->
    {1, Op, P} = ?R:recv_frame(Sock),
    ?assert(Op =:= 1 orelse Op =:= 2),
    [H, Body] = binary:split(P, <<"\n\n">>),
    {H, Body}.

%% GET Path answered at once: its JSON.
poll(S, Path) -> element(2, ?R:poll_raw(S, Path)).

send_text(Sock, Text) -> ok = gen_tcp:send(Sock, ?R:frame(1, Text)).

epoch_of(<<_:8/binary>> = E) -> E.

%% "T@E:S" -> {T, E, S}
split_id(Id) ->
    [T, ES] = binary:split(Id, <<"@">>),
    [E, S] = binary:split(ES, <<":">>),
    {T, epoch_of(E), binary_to_integer(S)}.

stat(S, K) -> maps:get(K, stats(S)).

%%% ------------------------------------------------------------------ cases

every_transport(Ctx = #{a := A, b := B}) ->
    S1 = server(Ctx, 1),
    S2 = server(Ctx, 2),
    Sse = sse(S1, "/sse/101?topics=news,other"),
    Meta1 = meta(S1, "/ws/102?topics=news"),
    Chunked = open(port_of(S1), get_request("/test/103?topics=news")),
    #{status := 200} = expect_head(Chunked, 5000),
    _Welcome = expect_chunk(Chunked, 5000),
    Meta2 = meta(S2, "/ws/105?topics=news"),
    Poll = ?R:spawn_poll(S2, "/poll/104?topics=news,other"),
    wait_count(Ctx, <<"news">>, 5, [cnode(Ctx, 1), cnode(Ctx, 2)]),
    joined(Sse, [<<"news">>, <<"other">>]),
    [joined(W, [<<"news">>]) || W <- [Meta1, Meta2]],
    Before = [stat(S, topic_published) || S <- [S1, S2]],
    ?assertEqual({ok, 5}, m(A, publish_sync, [<<"news">>, <<"hello">>])),
    %% one Erlang message per C-node, not one per stream
    ?assertEqual([B1 + 1 || B1 <- Before], [stat(S, topic_published) || S <- [S1, S2]]),
    #{id := Id1, data := <<"hello">>} = event(Sse),
    {<<"news">>, E1, 1} = split_id(Id1),
    ?assertEqual({<<"id: news@", E1/binary, ":1">>, <<"hello">>}, ws_text(Meta1, S1)),
    ?assertEqual(<<"hello">>, expect_chunk(Chunked, 5000)),
    {H2, <<"hello">>} = ws_text(Meta2, S2),
    {<<"news">>, E2, 1} = split_id(binary:part(H2, 4, byte_size(H2) - 4)),
    ?assertNotEqual(E1, E2),                 % each C-node numbers its own
    receive
        {poll_answer, Poll, Bytes} ->
            [_, Json] = binary:split(Bytes, <<"\r\n\r\n">>),
            ?assertMatch(#{<<"messages">> := [#{<<"topic">> := <<"news">>, <<"data">> := <<"hello">>}],
                           <<"topics">> := #{<<"news">> := _, <<"other">> := _}},
                         json_decode(Json))
    after 5000 -> error(no_poll_answer)
    end,
    %% through the other master, async; a topic no C-node holds is counted
    ok = m(B, publish, ["news", {binary, <<1, 2>>}]),
    #{id := <<"news@", _/binary>>, event := <<"base64">>, data := <<"AQI=">>} = event(Sse),
    ok = m(B, publish, [<<"nobody">>, <<"x">>]),
    wait_until(fun() -> maps:get(topic_unheld, m(B, app_stats, [])) >= 1 end, ?WAIT, unheld),
    ?assertError({exception, badarg, _}, m(A, publish, [<<"no spaces">>, <<"x">>])),
    close(Chunked).

ws_join_leave(Ctx = #{a := A}) ->
    S = server(Ctx, 1),
    W = meta(S, "/ws/110"),
    send_text(W, <<"event: join\n\nchat:1">>),
    #{<<"topic">> := <<"chat:1">>, <<"id">> := <<_:8/binary, ":0">>} = joined(W),
    wait_count(Ctx, <<"chat:1">>, 1, [cnode(Ctx, 1)]),
    ok = m(A, publish, [<<"chat:1">>, <<"one">>]),
    {<<"id: chat:1@", _/binary>>, <<"one">>} = ws_text(W, S),
    send_text(W, <<"event: join\n\nnot a name">>),
    ?assertMatch({<<"event: refused">>, <<"{\"topic\":\"\",\"reason\":\"bad_name\"}">>},
                 ws_text(W, S)),
    send_text(W, <<"event: leave\n\nchat:1">>),
    ?assertEqual({<<"event: left">>, <<"{\"topic\":\"chat:1\"}">>}, ws_text(W, S)),
    wait_count(Ctx, <<"chat:1">>, 0, [cnode(Ctx, 1)]),   % lingers: kept for resumes
    ok = m(A, publish, [<<"chat:1">>, <<"two">>]),
    ok = m(A, send, [110, <<"after">>]),                  % the uid's: nothing came between
    {<<"id: ", _/binary>>, <<"after">>} = ws_text(W, S).

app_subscribe(Ctx = #{a := A, b := B}) ->
    S = server(Ctx, 2),
    Sock = sse(S, "/sse/120?conn=1"),
    #{event := <<"conn">>, data := D} = event(Sock),
    #{<<"conn">> := Id} = json_decode(D),
    Conn = {cnode(Ctx, 2), binary_to_integer(Id)},
    ?assertEqual(ok, m(A, subscribe_sync, [Conn, <<"room">>])),
    #{<<"topic">> := <<"room">>, <<"id">> := _} = joined(Sock),
    wait_count(Ctx, <<"room">>, 1, [cnode(Ctx, 2)]),
    %% the join is told with the count that names the C-node
    ?assertEqual([{120, Conn}], m(B, topic_members, [<<"room">>])),
    ok = m(B, publish, [<<"room">>, <<"in">>]),
    #{id := <<"room@", _/binary>>, data := <<"in">>} = event(Sock),
    ok = m(A, unsubscribe, [Conn, room]),
    #{event := <<"left">>} = event(Sock),
    ?assertEqual({error, refused}, m(A, subscribe_sync, [{cnode(Ctx, 2), 1}, <<"room">>])).

%% Publishes N messages to Topic through master M, each acknowledged.
pub(M, Topic, Msgs) -> [{ok, _} = m(M, publish_sync, [Topic, X]) || X <- Msgs].

resume(Ctx = #{a := A}) ->
    S = server(Ctx, 1),
    Sock = sse(S, "/sse/130?topics=r1,r2"),
    joined(Sock, [<<"r1">>, <<"r2">>]),
    wait_count(Ctx, <<"r2">>, 1, [cnode(Ctx, 1)]),
    pub(A, <<"r1">>, [<<"a1">>, <<"a2">>]),
    pub(A, <<"r2">>, [<<"b1">>]),
    [#{id := I1}, #{id := _}, #{id := I3}] = [event(Sock) || _ <- [1, 2, 3]],
    gen_tcp:close(Sock),
    wait_count(Ctx, <<"r2">>, 0, [cnode(Ctx, 1)]),
    pub(A, <<"r1">>, [<<"a3">>, <<"a4">>]),
    pub(A, <<"r2">>, [<<"b2">>]),
    %% SSE: each topic from its own id, exactly what was missed, then live
    [_, Id1] = binary:split(I1, <<"@">>),    % the client saw only a1 of r1
    [_, Id3] = binary:split(I3, <<"@">>),
    Q = ["/sse/130?topics=r1@", Id1, ",r2@", Id3],
    Sock2 = sse(S, lists:flatten(io_lib:format("~s~s~s~s", Q))),
    joined(Sock2, [<<"r1">>, <<"r2">>]),
    Got = [maps:get(data, event(Sock2)) || _ <- [1, 2, 3, 4]],
    ?assertEqual([<<"a2">>, <<"a3">>, <<"a4">>, <<"b2">>], Got),
    pub(A, <<"r2">>, [<<"b3">>]),
    #{data := <<"b3">>} = event(Sock2),
    %% ws+meta: the same from r2's id
    W = meta(S, lists:flatten(["/ws/131?topics=r2@", binary_to_list(Id3)])),
    joined(W, [<<"r2">>]),
    ?assertMatch([{_, <<"b2">>}, {_, <<"b3">>}], [ws_text(W, S) || _ <- [1, 2]]),
    %% long-poll: r1's missed ones, and where each topic stands
    J = poll(S, "/poll/132?topics=r1@" ++ binary_to_list(Id1) ++ ",r2"),
    ?assertMatch(#{<<"messages">> := [#{<<"topic">> := <<"r1">>, <<"data">> := <<"a2">>},
                                      #{<<"data">> := <<"a3">>}, #{<<"data">> := <<"a4">>}],
                   <<"gap">> := false}, J),
    #{<<"topics">> := #{<<"r1">> := R1Next, <<"r2">> := R2Next}} = J,
    ?assertMatch(<<_:8/binary, ":4">>, R1Next),
    ?assertMatch(<<_:8/binary, ":3">>, R2Next),
    %% an EventSource coming back by itself: its Last-Event-ID names r2
    Sock3 = sse(S, "/sse/133?topics=r1,r2", ["Last-Event-ID: r2@" ++ binary_to_list(Id3)]),
    joined(Sock3, [<<"r1">>, <<"r2">>]),
    ?assertEqual([<<"b2">>, <<"b3">>], [maps:get(data, event(Sock3)) || _ <- [1, 2]]).

gaps(Ctx = #{a := A}) ->
    S = server(Ctx, 2),
    Sock = sse(S, "/sse/140?topics=g"),
    joined(Sock, [<<"g">>]),
    wait_count(Ctx, <<"g">>, 1, [cnode(Ctx, 2)]),
    pub(A, <<"g">>, [<<"m1">>]),
    #{id := <<"g@", Id/binary>>} = event(Sock),
    [E, _] = binary:split(Id, <<":">>),
    Other = case E of <<"00000000">> -> "00000001"; _ -> "00000000" end,
    %% an id of another epoch: a gap, then what is kept
    Sock2 = sse(S, "/sse/141?topics=g@" ++ Other ++ ":1"),
    joined(Sock2, [<<"g">>]),
    #{event := <<"gap">>, id := <<"g@", Next/binary>>, data := GapJson} = event(Sock2),
    ?assertMatch(#{<<"topic">> := <<"g">>, <<"first">> := _, <<"next">> := _},
                 json_decode(GapJson)),
    ?assertEqual(<<E/binary, ":0">>, Next),
    #{data := <<"m1">>} = event(Sock2),
    W = meta(S, "/ws/142?topics=g@" ++ Other ++ ":1"),
    joined(W, [<<"g">>]),
    {<<"event: gap">>, WJ} = ws_text(W, S),
    ?assertMatch(#{<<"topic">> := <<"g">>}, json_decode(WJ)),
    {_, <<"m1">>} = ws_text(W, S),
    J = poll(S, "/poll/143?topics=g@" ++ Other ++ ":1"),
    ?assertMatch(#{<<"messages">> := [#{<<"gap">> := #{<<"topic">> := <<"g">>}},
                                      #{<<"topic">> := <<"g">>, <<"data">> := <<"m1">>}],
                   <<"gap">> := false}, J).

presence(Ctx = #{a := A, b := B}) ->
    [S1, S2] = [server(Ctx, I) || I <- [1, 2]],
    Socks = [sse(S1, "/sse/150?topics=p"), sse(S1, "/sse/151?topics=p"),
             sse(S2, "/sse/152?topics=p,q")],
    wait_count(Ctx, <<"p">>, 3, [cnode(Ctx, 1), cnode(Ctx, 2)]),
    [?assertEqual([150, 151, 152], lists:sort([U || {U, _} <- m(M, topic_members, [<<"p">>])]))
     || M <- [A, B]],
    ?assertEqual(lists:sort([{cnode(Ctx, 1), 2}, {cnode(Ctx, 2), 1}]),
                 lists:sort(m(B, topic_nodes, [<<"p">>]))),
    gen_tcp:close(lists:nth(2, Socks)),
    wait_count(Ctx, <<"p">>, 2, [cnode(Ctx, 1), cnode(Ctx, 2)]),
    kill_server(S2),
    %% its subscribers gone; its topics kept there (no stream) for its
    %% history's TTL, in case its link comes back
    wait_count(Ctx, <<"p">>, 1, [cnode(Ctx, 1), cnode(Ctx, 2)]),
    [?assertEqual([150], [U || {U, _} <- m(M, topic_members, [<<"p">>])]) || M <- [A, B]],
    [?assertEqual([{cnode(Ctx, 2), 0}], m(M, topic_nodes, [<<"q">>])) || M <- [A, B]].
