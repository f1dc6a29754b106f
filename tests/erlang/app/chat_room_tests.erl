%% SPDX-License-Identifier: Apache-2.0
%% The example handler chat_room (examples/erlang) against hostile
%% and odd input: a real master running the application with chat_room as
%% its inbox (a pool of 4, as `make run` has it), a real server with
%% --inbox, --topic-auth handler and --presence-conns, ws+meta clients on
%% raw sockets. Rooms are topics (room:ROOM): a join goes to the handler's
%% authorize_join and its refusal is told to the client with its reason; a
%% refused line is answered on that connection with chat-error; every
%% refusal is counted, and the handler keeps going (same inbox process,
%% state kept). The bounds (room name, text size, UTF-8, 16 rooms, room
%% size, joins of a uid a second, lines of a room a second) hold at their
%% edges. One client opening thousands of short WebSockets, each joining
%% rooms and talking as fast as it can, stalls nobody: another user's lines
%% are answered while it goes on, the room size bound holds, and the
%% memberships of the connections gone are freed.
-module(chat_room_tests).
-include_lib("eunit/include/eunit.hrl").

-define(T, 10000).
-define(INBOX, httpdcnode_inbox).
-define(R, httpdtest_raw).
%% The flood: short WebSockets opened by ?ATTACKERS processes, ?FLOOD in
%% all; uids from ?FLOOD_UID on.
-define(ATTACKERS, 8).
-define(FLOOD, 3000).
-define(FLOOD_UID, 100001).
-define(FLOOD_ROOMS, 20).
-define(PROBES, 4).
%% chat_room's defaults
-define(MAX_MEMBERS, 1000).
-define(MEMBERS, chat_room_members).

chat_room_test_() ->
    [fixture(fun start/0, 60, "chat_room: bad input refused (joins told why, lines answered "
             "with chat-error), counted, the handler unharmed; the bounds at their edges",
             fun bad_input/1),
     fixture(fun start_small/0, 60, "chat_room: a room at its size refuses the next join until "
             "one leaves; a uid's joins past its burst and rate, a room's lines past its rate "
             "are refused, each told and counted", fun bounds/1),
     fixture(fun start/0, 240, "chat_room: one client's thousands of short WebSockets joining "
             "and talking as fast as they can; another user's lines answered meanwhile; the "
             "room size bound holds; the gone connections' memberships are freed",
             fun flood/1)].

fixture(Start, Secs, Label, Case) ->
    {setup, Start, fun stop/1,
     fun(Ctx = #{server := S}) ->
             {timeout, httpdtest_os:scaled(Secs),
              {Label, fun() -> httpdtest_server:logged(S, fun(_) -> Case(Ctx) end) end}}
     end}.

%% More than the default 50 messages a second: one client sends them all.
start() -> httpdtest_inbox:chat_start(["--client-rate", "1000"], ?T).

%% chat_room with rooms of 5 members at most, the other bounds as shipped.
start_small() ->
    httpdtest_inbox:app_start({?INBOX, chat_room, #{max_members => 5}, #{workers => 4}},
                              httpdtest_inbox:chat_args() ++ ["--client-rate", "1000"],
                              ?T).

stop(#{master := M, server := S}) ->
    httpdtest_server:stop_server(S),
    httpdtest_master:stop_master(M).

m(Node, Mod, F, A) -> erpc:call(Node, Mod, F, A, 30000).

%%% ---------------------------------------------------------------- ws+meta

open(S, Uid) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, httpdtest_server:port_of(S),
                                 [binary, {active, false}]),
    ?R:ws_meta_upgrade(Sock, "/ws/" ++ integer_to_list(Uid)).

%% The next frame: {Head, Body} (its header lines, then the rest).
next(W) ->
    {1, _, P} = ?R:recv_frame(W),
    [H, B] = binary:split(P, <<"\n\n">>),
    {H, B}.

%% A frame out (text; binary when not UTF-8), the next frame in.
roundtrip(W, Payload) ->
    Op = case unicode:characters_to_binary(Payload) of
             Payload -> 1;
             _ -> 2
         end,
    ok = gen_tcp:send(W, ?R:frame(Op, Payload)),
    next(W).

%% What the client is told of a join of Room: joined, or refused and why
%% (the rooms' lines before it passed over).
join(W, Room) ->
    ok = gen_tcp:send(W, ?R:frame(1, <<"event: join\n\nroom:", Room/binary>>)),
    case event(W) of
        {<<"event: joined">>, _} -> joined;
        {<<"event: refused">>, J} -> {refused, maps:get(<<"reason">>, httpdtest_json:json_decode(J))}
    end.

leave(W, Room) ->
    ok = gen_tcp:send(W, ?R:frame(1, <<"event: leave\n\nroom:", Room/binary>>)),
    {<<"event: left">>, _} = event(W),
    ok.

%% The next frame that is no message of a topic.
event(W) ->
    case next(W) of
        {<<"id: ", _/binary>>, _} -> event(W);
        E -> E
    end.

%% Frames of W until a message (topic or reply) is Want (at most 1000): Want.
until_line(W, Want) -> until_line(W, Want, 1000).

until_line(_W, Want, 0) -> erlang:error({line_never_came, Want});
until_line(W, Want, N) ->
    case next(W) of
        {_, Want} -> Want;
        _ -> until_line(W, Want, N - 1)
    end.

counts(MNode) ->
    {ok, C} = m(MNode, chat_room, stats, [?INBOX]),
    C.

count(MNode, Room) -> m(MNode, httpdcnode, topic_count, [<<"room:", Room/binary>>]).

wait_count(MNode, Room, N) ->
    httpdtest_wait:wait_until(fun() -> count(MNode, Room) =:= N end, ?T, {count, Room, N}).

wait_online(MNode, Uid) ->
    httpdtest_wait:wait_until(fun() -> m(MNode, httpdcnode, online, [Uid]) =/= [] end,
                              ?T, {online, Uid}).

%%% ---------------------------------------------------------------- bad input

bad_input(#{server := S, mnode := MNode}) ->
    Inbox = m(MNode, erlang, whereis, [?INBOX]),
    ?assert(is_pid(Inbox)),
    W = open(S, 301),
    wait_online(MNode, 301),
    Err = fun(Why) -> <<"chat-error ", Why/binary>> end,
    Unknown = Err(<<"unknown command: say ROOM TEXT (join and leave rooms as topics)">>),
    Room32 = binary:copy(<<"r">>, 32),
    Lines = [{<<"hello">>, Unknown},
             {<<"join lobby">>, Unknown},
             {<<"say lobby">>, Err(<<"say needs a room and a text: say ROOM TEXT">>)},
             {<<"say lobby hi">>, Err(<<"not in room lobby: join it first">>)},
             {<<"say a/b hi">>, Err(<<"bad room name: 1 to 32 of A-Z a-z 0-9 _ . -">>)},
             {<<0, 255, 1>>, Unknown}],
    [?assertEqual({In, Out}, {In, line_of(roundtrip(W, In))}) || {In, Out} <- Lines],
    %% Joins the handler refuses (a topic, but no room), told with why.
    [?assertEqual({Room, {refused, <<"bad_room">>}}, {Room, join(W, Room)})
     || Room <- [<<"a/b">>, <<Room32/binary, "r">>, <<"a:b">>]],
    {<<"event: refused">>, _} = roundtrip(W, <<"event: join\n\nnotaroom">>),
    ?assertEqual(joined, join(W, <<"lobby">>)),
    ?assertEqual(joined, join(W, Room32)),
    Text1000 = binary:copy(<<"x">>, 1000),
    TextBad = [{<<"say lobby ">>, Err(<<"empty text">>)},
               {<<"say lobby ", Text1000/binary, "x">>, Err(<<"text too long (1000 bytes at most)">>)},
               {<<"say lobby caf", 16#e9>>, Err(<<"text not UTF-8">>)},
               {<<"say lobby ", 16#c3>>, Err(<<"text not UTF-8">>)}],
    [?assertEqual({In, Out}, {In, line_of(roundtrip(W, In))}) || {In, Out} <- TextBad],
    ?assertEqual(<<"chat lobby 301 ", Text1000/binary>>,
                 line_of(roundtrip(W, <<"say lobby ", Text1000/binary>>))),
    ?assertEqual(<<"chat lobby 301 two\nlines, caf", 16#c3, 16#a9>>,
                 line_of(roundtrip(W, <<"say lobby two\nlines, caf", 16#c3, 16#a9>>))),
    %% 16 rooms at most: lobby, rrr...r and 14 more; the 17th refused until one is left.
    [?assertEqual(joined, join(W, <<"r", (integer_to_binary(I))/binary>>)) || I <- lists:seq(1, 14)],
    ?assertEqual({refused, <<"too_many_rooms">>}, join(W, <<"r15">>)),
    leave(W, <<"lobby">>),
    ?assertEqual(joined, join(W, <<"r15">>)),
    ?assertEqual(Err(<<"not in room lobby: join it first">>), line_of(roundtrip(W, <<"say lobby bye">>))),
    %% One inbox all along, its counts: every refusal counted as bad.
    ?assertEqual(Inbox, m(MNode, erlang, whereis, [?INBOX])),
    Bad = length(Lines) + 4 + length(TextBad) + 2,
    ?assertEqual({ok, #{joined => 17, left => 1, said => 2, bad => Bad, room_full => 0,
                        too_fast => 0, room_busy => 0, freed => 0}},
                 m(MNode, chat_room, stats, [?INBOX])),
    gen_tcp:close(W).

line_of({<<"id: room:", _/binary>>, B}) -> B;
line_of({<<"event: conn">>, B}) -> B.

%%% ---------------------------------------------------------------- bounds

bounds(#{server := S, mnode := MNode}) ->
    %% Room size 5: five join, the sixth is refused until one leaves.
    Ws = [{U, open(S, U)} || U <- lists:seq(401, 406)],
    [wait_online(MNode, U) || {U, _} <- Ws],
    [{_U6, W6} | Five] = lists:reverse(Ws),
    [begin
         ?assertEqual(joined, join(W, <<"small">>)),
         wait_count(MNode, <<"small">>, I)
     end || {I, {_, W}} <- lists:zip(lists:seq(1, 5), lists:reverse(Five))],
    ?assertEqual({refused, <<"room_full">>}, join(W6, <<"small">>)),
    {U1, W1} = lists:last(Five),
    leave(W1, <<"small">>),
    wait_count(MNode, <<"small">>, 4),
    ?assertEqual(joined, join(W6, <<"small">>)),
    %% the members were told of both
    W2 = element(2, lists:nth(4, Five)),
    until_line(W2, <<"chat-left small ", (integer_to_binary(U1))/binary>>),
    [gen_tcp:close(W) || {_, W} <- Ws],
    %% Joins of one uid: 20 at once, then 2 a second. Each join is left
    %% again (16 rooms at most).
    J = open(S, 410),
    T0 = erlang:monotonic_time(millisecond),
    Joins = join_until_refused(J, 0, 200),
    Secs = (erlang:monotonic_time(millisecond) - T0) / 1000,
    io:format(user, "~n  one uid: ~b joins before one was refused, in ~.2f s~n", [Joins, Secs]),
    ?assert(Joins >= 20),
    ?assert(Joins =< 20 + 2 * Secs + 1),
    gen_tcp:close(J),
    %% Lines of one room: 20 a second (the join was one).
    L = open(S, 411),
    ?assertEqual(joined, join(L, <<"talk">>)),
    T1 = erlang:monotonic_time(millisecond),
    N = 100,
    ok = gen_tcp:send(L, [?R:frame(1, <<"say talk ", (integer_to_binary(I))/binary>>)
                          || I <- lists:seq(1, N)]),
    Answers = [line_of(next(L)) || _ <- lists:seq(1, N)],
    Secs1 = (erlang:monotonic_time(millisecond) - T1) / 1000,
    Said = length([A || <<"chat talk 411 ", _/binary>> = A <- Answers]),
    Busy = length([A || A <- Answers,
                        A =:= <<"chat-error room talk is busy: try again in a moment">>]),
    io:format(user, "  one room: ~b lines said, ~b refused, in ~.2f s~n", [Said, Busy, Secs1]),
    ?assertEqual(N, Said + Busy),
    ?assert(Said >= 1 andalso Busy >= 1),
    ?assert(Said + 1 =< 20 * (trunc(Secs1) + 2)),
    gen_tcp:close(L),
    C = counts(MNode),
    ?assertMatch(#{room_full := 1, too_fast := 1}, C),
    ?assertEqual(Busy, maps:get(room_busy, C)).

%% Joins (each left again) until one is refused as too fast: how many went.
join_until_refused(_W, N, 0) -> erlang:error({never_refused, N});
join_until_refused(W, N, Left) ->
    Room = <<"j", (integer_to_binary(N))/binary>>,
    case join(W, Room) of
        {refused, <<"too_fast">>} -> N;
        joined ->
            leave(W, Room),
            join_until_refused(W, N + 1, Left - 1)
    end.

%%% ---------------------------------------------------------------- the flood

flood(#{server := S, mnode := MNode}) ->
    H = open(S, 500),
    wait_online(MNode, 500),
    ?assertEqual(joined, join(H, <<"quiet">>)),
    Done = counters:new(1, [atomics]),
    Start = erlang:monotonic_time(millisecond),
    Deadline = Start + httpdtest_os:scaled(120000),
    Self = self(),
    [spawn_link(fun() ->
                        attack(S, A, Done, Deadline),
                        Self ! {attacked, A, erlang:monotonic_time(millisecond)}
                end) || A <- lists:seq(1, ?ATTACKERS)],
    During = [begin
                  At = K * ?FLOOD div 10,
                  httpdtest_wait:wait_until(fun() -> counters:get(Done, 1) >= At end,
                                            60000, {flood_at, At}),
                  probe(H, MNode, K, Done)
              end || K <- lists:seq(1, ?PROBES)],
    Ends = [receive {attacked, A, T} -> T after 120000 -> erlang:error({attacker_stuck, A}) end
            || A <- lists:seq(1, ?ATTACKERS)],
    Took = lists:max(Ends) - Start,
    After = probe(H, MNode, ?PROBES + 1, Done),
    io:format(user, "~n  ~b short WebSockets in ~b ms; ~p~n",
              [counters:get(Done, 1), Took, counts(MNode)]),
    ?assertEqual(?FLOOD, counters:get(Done, 1)),
    %% Each answered in less time than the whole flood took: nobody's line
    %% waits for the flood to be worked off.
    [?assert(Ms < Took) || {Ms, _} <- [After | During]],
    [?assert(Lobby =< ?MAX_MEMBERS) || {_, Lobby} <- [After | During]],
    %% The flood's connections are gone: their memberships freed (each
    %% WebSocket's conn_down), 500's kept.
    httpdtest_wait:wait_until(fun() -> m(MNode, ets, info, [?MEMBERS, size]) =:= 1 end,
                              60000, flood_memberships_freed),
    ?assertMatch([{{500, _, <<"quiet">>}}], m(MNode, ets, tab2list, [?MEMBERS])),
    ?assertEqual(<<"chat quiet 500 still here">>, line_of(roundtrip(H, <<"say quiet still here">>))),
    gen_tcp:close(H).

%% Line K of uid 500 in quiet, until it comes back: {ms it took, lobby size}.
probe(H, MNode, K, Done) ->
    Sent = counters:get(Done, 1),
    Line = <<"p", (integer_to_binary(K))/binary>>,
    T0 = erlang:monotonic_time(millisecond),
    ok = gen_tcp:send(H, ?R:frame(1, <<"say quiet ", Line/binary>>)),
    until_line(H, <<"chat quiet 500 ", Line/binary>>),
    Ms = erlang:monotonic_time(millisecond) - T0,
    Lobby = count(MNode, <<"lobby">>),
    io:format(user, "~n  line ~b sent after ~b short WebSockets, answered in ~b ms (after ~b); "
              "lobby has ~b streams", [K, Sent, Ms, counters:get(Done, 1), Lobby]),
    {Ms, Lobby}.

%% Attacker A's share of the flood: uids ?FLOOD_UID + I for I = A, A +
%% ?ATTACKERS, ... below ?FLOOD, until Deadline: each a WebSocket that
%% joins the lobby and another room, says a line, and closes at once.
attack(S, A, Done, Deadline) ->
    lists:foreach(
      fun(I) ->
              erlang:monotonic_time(millisecond) < Deadline orelse erlang:error(flood_too_slow),
              W = open(S, ?FLOOD_UID + I),
              Room = integer_to_binary(I rem ?FLOOD_ROOMS),
              ok = gen_tcp:send(W, [?R:frame(1, <<"event: join\n\nroom:lobby">>),
                                    ?R:frame(1, <<"event: join\n\nroom:r", Room/binary>>),
                                    ?R:frame(1, <<"say lobby flood">>)]),
              gen_tcp:close(W),
              counters:add(Done, 1, 1)
      end, lists:seq(A - 1, ?FLOOD - 1, ?ATTACKERS)).
