%% The example handler chat_room (examples/erlang) against hostile
%% and odd input: a real master running the application with chat_room as
%% its inbox (a pool of 4, as `make run` has it), a real server with
%% --inbox, WebSocket clients on raw sockets. Every refused command is
%% answered on that connection with chat-error and counted, and the handler
%% keeps going (same inbox process, state kept); the bounds (room name,
%% text size, UTF-8, 16 rooms, room size, joins of a uid a second, lines of
%% a room a second) hold at their edges. One client opening thousands of
%% short WebSockets, each joining rooms and talking as fast as it can, stalls
%% nobody: another user's join and lines are answered while it goes on, the
%% room size bound holds, and the memberships of the uids gone are freed.
-module(chat_room_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdcnode_inbox_lib, [recv_frame/1, frame/2]).

-define(T, 10000).
-define(INBOX, httpdcnode_inbox).
%% The flood: short WebSockets opened by ?ATTACKERS processes, ?FLOOD in
%% all, each sending ?PER_CONN commands; uids from ?FLOOD_UID on.
-define(ATTACKERS, 8).
-define(FLOOD, 6000).
-define(FLOOD_UID, 100001).
-define(FLOOD_ROOMS, 20).
-define(PROBES, 4).
%% chat_room's defaults
-define(MAX_MEMBERS, 1000).
-define(GRACE_MS, 10000).

chat_room_test_() ->
    [fixture(fun start/0, 60, "chat_room: bad input answered with chat-error on its connection, "
             "counted, the handler unharmed; the bounds at their edges", fun bad_input/1),
     fixture(fun start_small/0, 60, "chat_room: a room at its size refuses the next join until "
             "one leaves; a uid's joins past its burst and rate, a room's lines past its rate "
             "are refused; each answered with chat-error and counted", fun bounds/1),
     fixture(fun start/0, 240, "chat_room: one client's thousands of short WebSockets joining "
             "and talking as fast as they can; another user's join and lines answered "
             "meanwhile; the room size bound holds; the gone uids' memberships are freed",
             fun flood/1)].

%% A master and a server of their own (Start) for Case(Ctx), Secs (scaled)
%% to run.
fixture(Start, Secs, Label, Case) ->
    {setup, Start, fun stop/1,
     fun(Ctx = #{server := S}) ->
             {timeout, httpdcnode_test_lib:scaled(Secs),
              {Label, fun() -> httpdcnode_test_lib:logged(S, fun(_) -> Case(Ctx) end) end}}
     end}.

%% More than the default 50 messages a second: one client sends them all.
start() -> httpdcnode_inbox_lib:chat_start(["--client-rate", "1000"], ?T).

%% chat_room with rooms of 5 members at most, the other bounds as shipped.
start_small() ->
    httpdcnode_inbox_lib:app_start({?INBOX, chat_room, #{max_members => 5}, #{workers => 4}},
                                   ["--client-rate", "1000"], ?T).

stop(#{master := M, server := S}) ->
    httpdcnode_test_lib:stop_server(S),
    httpdcnode_test_lib:stop_master(M).

m(Node, Mod, F, A) -> erpc:call(Node, Mod, F, A, 30000).

bad_input(#{server := S, mnode := MNode}) ->
    Inbox = m(MNode, erlang, whereis, [?INBOX]),
    ?assert(is_pid(Inbox)),
    W = open(S, 301),
    httpdcnode_test_lib:wait_until(fun() -> m(MNode, httpdcnode, online, [301]) =/= [] end,
                                   ?T, {online, 301}),
    Err = fun(Why) -> <<"chat-error ", Why/binary>> end,
    BadRoom = Err(<<"bad room name: 1 to 32 of A-Z a-z 0-9 _ . -">>),
    Room32 = binary:copy(<<"r">>, 32),
    Refused =
        [{<<"hello">>, Err(<<"unknown command: join ROOM, leave ROOM or say ROOM TEXT">>)},
         {<<"JOIN lobby">>, Err(<<"unknown command: join ROOM, leave ROOM or say ROOM TEXT">>)},
         {<<"join">>, Err(<<"unknown command: join ROOM, leave ROOM or say ROOM TEXT">>)},
         {<<"join ">>, BadRoom},
         {<<"join lobby\n">>, BadRoom},
         {<<"join a b">>, BadRoom},
         {<<"join ", Room32/binary, "r">>, BadRoom},
         {<<"join caf", 16#c3, 16#a9>>, BadRoom},
         {<<"say lobby">>, Err(<<"say needs a room and a text: say ROOM TEXT">>)},
         {<<"say lobby hi">>, Err(<<"not in room lobby: join it first">>)},
         {<<"leave lobby">>, Err(<<"not in room lobby">>)},
         {<<0, 255, 1>>, Err(<<"unknown command: join ROOM, leave ROOM or say ROOM TEXT">>)}],
    [?assertEqual({In, Out}, {In, roundtrip(W, In)}) || {In, Out} <- Refused],
    %% Joined: the room tells its members (this uid); again: this connection only.
    ?assertEqual(<<"chat-joined lobby 301">>, roundtrip(W, <<"join lobby">>)),
    ?assertEqual(<<"chat-joined lobby 301">>, roundtrip(W, <<"join lobby">>)),
    ?assertEqual(<<"chat-joined ", Room32/binary, " 301">>, roundtrip(W, <<"join ", Room32/binary>>)),
    Text1000 = binary:copy(<<"x">>, 1000),
    TextBad = [{<<"say lobby ">>, Err(<<"empty text">>)},
               {<<"say lobby ", Text1000/binary, "x">>, Err(<<"text too long (1000 bytes at most)">>)},
               {<<"say lobby caf", 16#e9>>, Err(<<"text not UTF-8">>)},
               {<<"say lobby ", 16#c3>>, Err(<<"text not UTF-8">>)}],
    [?assertEqual({In, Out}, {In, roundtrip(W, In)}) || {In, Out} <- TextBad],
    ?assertEqual(<<"chat lobby 301 ", Text1000/binary>>, roundtrip(W, <<"say lobby ", Text1000/binary>>)),
    ?assertEqual(<<"chat lobby 301 two\nlines, caf", 16#c3, 16#a9>>,
                 roundtrip(W, <<"say lobby two\nlines, caf", 16#c3, 16#a9>>)),
    %% 16 rooms at most: lobby, rrr...r and 14 more; the 17th refused until one is left.
    [?assertEqual(<<"chat-joined r", (integer_to_binary(I))/binary, " 301">>,
                  roundtrip(W, <<"join r", (integer_to_binary(I))/binary>>))
     || I <- lists:seq(1, 14)],
    ?assertEqual(Err(<<"in too many rooms (16): leave one first">>), roundtrip(W, <<"join r15">>)),
    ?assertEqual(<<"chat-left lobby 301">>, roundtrip(W, <<"leave lobby">>)),
    ?assertEqual(<<"chat-joined r15 301">>, roundtrip(W, <<"join r15">>)),
    ?assertEqual(Err(<<"not in room lobby: join it first">>), roundtrip(W, <<"say lobby bye">>)),
    %% One inbox all along, its counts: every refusal counted as bad.
    ?assertEqual(Inbox, m(MNode, erlang, whereis, [?INBOX])),
    Bad = length(Refused) + length(TextBad) + 2,
    ?assertEqual({ok, #{joined => 17, left => 1, said => 2, bad => Bad, room_full => 0,
                        too_fast => 0, room_busy => 0, freed => 0}},
                 m(MNode, chat_room, stats, [?INBOX])),
    gen_tcp:close(W).

%%% ---------------------------------------------------------------- WebSocket

%% A frame out (text; binary when not UTF-8, as a text frame must be), the
%% next frame in: its payload.
roundtrip(Sock, Payload) ->
    Op = case unicode:characters_to_binary(Payload) of
             Payload -> 1;
             _ -> 2
         end,
    ok = gen_tcp:send(Sock, frame(Op, Payload)),
    {1, _Op, Got} = recv_frame(Sock),
    Got.

open(S, Uid) -> httpdcnode_inbox_lib:ws_open(S, Uid).

%% Frames of Sock until one is Want (at most 1000 frames): Want.
until_frame(Sock, Want) -> until_frame(Sock, Want, 1000).

until_frame(_Sock, Want, 0) -> erlang:error({frame_never_came, Want});
until_frame(Sock, Want, N) ->
    case recv_frame(Sock) of
        {1, _, Want} -> Want;
        _ -> until_frame(Sock, Want, N - 1)
    end.

members(MNode, Room) ->
    length(m(MNode, subsmanager, get_subscribers, [{chat_room, Room}])).

counts(MNode) ->
    {ok, C} = m(MNode, chat_room, stats, [?INBOX]),
    C.

%%% ---------------------------------------------------------------- bounds

bounds(#{server := S, mnode := MNode}) ->
    Err = fun(Why) -> <<"chat-error ", Why/binary>> end,
    %% Room size 5: five join, the sixth is refused until one leaves.
    Ws = [{U, open(S, U)} || U <- lists:seq(401, 406)],
    [httpdcnode_test_lib:wait_until(fun() -> m(MNode, httpdcnode, online, [U]) =/= [] end,
                                    ?T, {online, U}) || {U, _} <- Ws],
    [{U6, W6} | Five] = lists:reverse(Ws),
    [?assertEqual(<<"chat-joined small ", (integer_to_binary(U))/binary>>,
                  roundtrip(W, <<"join small">>)) || {U, W} <- lists:reverse(Five)],
    Full = Err(<<"room small is full (5 members)">>),
    ?assertEqual(Full, roundtrip(W6, <<"join small">>)),
    ?assertEqual(5, members(MNode, <<"small">>)),
    {U1, W1} = lists:last(Five),
    ok = gen_tcp:send(W1, frame(1, <<"leave small">>)),
    until_frame(W1, <<"chat-left small ", (integer_to_binary(U1))/binary>>),
    %% the room is told before the leaver goes, by another worker than U6's
    httpdcnode_test_lib:wait_until(fun() -> members(MNode, <<"small">>) =:= 4 end, ?T, left),
    ?assertEqual(<<"chat-joined small ", (integer_to_binary(U6))/binary>>,
                 roundtrip(W6, <<"join small">>)),
    ?assertEqual(5, members(MNode, <<"small">>)),
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
    ?assertEqual(<<"chat-joined talk 411">>, roundtrip(L, <<"join talk">>)),
    T1 = erlang:monotonic_time(millisecond),
    N = 100,
    ok = gen_tcp:send(L, [frame(1, <<"say talk ", (integer_to_binary(I))/binary>>)
                          || I <- lists:seq(1, N)]),
    Answers = [recv_frame(L) || _ <- lists:seq(1, N)],
    Secs1 = (erlang:monotonic_time(millisecond) - T1) / 1000,
    Said = length([A || {1, _, <<"chat talk 411 ", _/binary>>} = A <- Answers]),
    Busy = length([A || {1, _, B} = A <- Answers,
                        B =:= Err(<<"room talk is busy: try again in a moment">>)]),
    io:format(user, "  one room: ~b lines said, ~b refused, in ~.2f s~n", [Said, Busy, Secs1]),
    ?assertEqual(N, Said + Busy),
    ?assert(Said >= 1 andalso Busy >= 1),
    %% at most 20 per second begun, the join's second included
    ?assert(Said + 1 =< 20 * (trunc(Secs1) + 2)),
    gen_tcp:close(L),
    C = counts(MNode),
    ?assertMatch(#{room_full := 1, too_fast := 1}, C),
    ?assertEqual(Busy, maps:get(room_busy, C)).

%% Joins (each left again) until one is refused as too many: how many went.
join_until_refused(_W, N, 0) -> erlang:error({never_refused, N});
join_until_refused(W, N, Left) ->
    Room = <<"j", (integer_to_binary(N))/binary>>,
    case roundtrip(W, <<"join ", Room/binary>>) of
        <<"chat-error too many joins: wait a moment">> -> N;
        <<"chat-joined ", _/binary>> ->
            ok = gen_tcp:send(W, frame(1, <<"leave ", Room/binary>>)),
            until_frame(W, <<"chat-left ", Room/binary, " 410">>),
            join_until_refused(W, N + 1, Left - 1)
    end.

%%% ---------------------------------------------------------------- the flood

flood(#{server := S, mnode := MNode}) ->
    %% 500 stays all along; 501 goes, is seen gone, and comes back.
    H = open(S, 500),
    httpdcnode_test_lib:wait_until(fun() -> m(MNode, httpdcnode, online, [500]) =/= [] end,
                                   ?T, {online, 500}),
    ?assertEqual(<<"chat-joined quiet 500">>, roundtrip(H, <<"join quiet">>)),
    B = open(S, 501),
    httpdcnode_test_lib:wait_until(fun() -> m(MNode, httpdcnode, online, [501]) =/= [] end,
                                   ?T, {online, 501}),
    ok = gen_tcp:send(B, frame(1, <<"join quiet">>)),
    until_frame(B, <<"chat-joined quiet 501">>),
    gen_tcp:close(B),
    httpdcnode_test_lib:wait_until(fun() -> m(MNode, httpdcnode, online, [501]) =:= [] end,
                                   ?T, {offline, 501}),
    B2 = open(S, 501),
    Done = counters:new(1, [atomics]),
    Start = erlang:monotonic_time(millisecond),
    Deadline = Start + httpdcnode_test_lib:scaled(120000),
    Self = self(),
    [spawn_link(fun() ->
                        attack(S, A, Done, Deadline),
                        Self ! {attacked, A, erlang:monotonic_time(millisecond)}
                end) || A <- lists:seq(1, ?ATTACKERS)],
    %% While the flood goes on, a line at 10, 20, 30 and 40 % of it; one
    %% more once it is over.
    During = [begin
                  At = K * ?FLOOD div 10,
                  httpdcnode_test_lib:wait_until(fun() -> counters:get(Done, 1) >= At end,
                                                 60000, {flood_at, At}),
                  probe(H, MNode, K, Done)
              end || K <- lists:seq(1, ?PROBES)],
    Ends = [receive {attacked, A, T} -> T after 120000 -> erlang:error({attacker_stuck, A}) end
            || A <- lists:seq(1, ?ATTACKERS)],
    Took = lists:max(Ends) - Start,
    After = probe(H, MNode, ?PROBES + 1, Done),
    io:format(user, "~n  ~b short WebSockets in ~b ms; lobby has ~b members; ~p~n",
              [counters:get(Done, 1), Took, members(MNode, <<"lobby">>), counts(MNode)]),
    ?assertEqual(?FLOOD, counters:get(Done, 1)),
    %% Each answered in less time than the whole flood took: nobody's line
    %% waits for the flood to be worked off (on a single inbox with no
    %% bounds, the second line got no answer in 10 s).
    [?assert(Ms < Took) || {Ms, _} <- [After | During]],
    [?assert(Lobby =< ?MAX_MEMBERS) || {_, Lobby} <- [After | During]],
    ?assert(maps:get(room_busy, counts(MNode)) > 0),
    %% The flood's uids are gone: their memberships are freed once the
    %% grace time passed; 500 and 501 (back within it) keep theirs.
    httpdcnode_test_lib:wait_until(fun() -> m(MNode, subsmanager, count, []) =:= 2 end,
                                   ?GRACE_MS + 60000, flood_memberships_freed),
    ?assertEqual([{chat_room, <<"quiet">>}],
                 m(MNode, subsmanager, get_subscriptions, [501])),
    ?assert(maps:get(freed, counts(MNode)) > 0),
    ?assertEqual(<<"chat quiet 500 still here">>, roundtrip(H, <<"say quiet still here">>)),
    [gen_tcp:close(W) || W <- [H, B2]].

%% Line K of uid 500 in quiet, until it comes back: {ms it took, lobby size}.
probe(H, MNode, K, Done) ->
    Sent = counters:get(Done, 1),
    Line = <<"p", (integer_to_binary(K))/binary>>,
    T0 = erlang:monotonic_time(millisecond),
    ok = gen_tcp:send(H, frame(1, <<"say quiet ", Line/binary>>)),
    until_frame(H, <<"chat quiet 500 ", Line/binary>>),
    Ms = erlang:monotonic_time(millisecond) - T0,
    Lobby = members(MNode, <<"lobby">>),
    io:format(user, "~n  line ~b sent after ~b short WebSockets, answered in ~b ms (after ~b); "
              "lobby has ~b members", [K, Sent, Ms, counters:get(Done, 1), Lobby]),
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
              ok = gen_tcp:send(W, [frame(1, <<"join lobby">>), frame(1, <<"join r", Room/binary>>),
                                    frame(1, <<"say lobby flood">>)]),
              gen_tcp:close(W),
              counters:add(Done, 1, 1)
      end, lists:seq(A - 1, ?FLOOD - 1, ?ATTACKERS)).

