%% SPDX-License-Identifier: Apache-2.0
%% A C-node with two masters (--master a@localhost,b@localhost): each gets
%% the hello and a snapshot of its own, every change, and a new hello and
%% snapshot when it comes back, while the other goes on undisturbed; a
%% reconnect storm costs each a handful of messages; a large snapshot comes
%% in pieces (snapshot, then snapshot_more) that add up.
%%
%% On each master a process registered as the --presence name forwards what
%% it gets to a sink here; a relay per sink tags it with the master's letter.
-module(core_masters_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_http, [open_stream/2, close/1, expect_chunk/2]).
-import(httpdtest_server, [send/2, stats/1, wait_stat/4, node_of/1]).
-import(httpdtest_wait, [wait_until/3]).

-define(T, 10000).
-define(LINK_WAIT, 30000).
-define(TTL, 77).               % --history-ttl, to be found in the hello
-define(STORM, 2000).
-define(BIG, 10000).
-define(PIECE, 4096).           % uids per snapshot piece at most

%% Bad --master lists: exit status 2, one line naming --master.
cli_test_() ->
    Port = integer_to_list(httpdtest_os:free_port()),
    Base = ["--listen", "127.0.0.1:" ++ Port, "--admin-listen", "",
            "--name", httpdtest_os:unique("c1cli") ++ "@localhost", "--cookie", "x"],
    Nine = lists:join(",", ["m" ++ integer_to_list(I) ++ "@localhost" || I <- lists:seq(1, 9)]),
    Bad = [lists:flatten(Nine), "a@localhost,", ",a@localhost", "a@localhost,,b@localhost",
           "a@localhost,nohost", "a@localhost,a@localhost", "a@b@c",
           lists:duplicate(300, $a) ++ "@localhost"],
    [{"bad --master " ++ lists:sublist(B, 40),
      {timeout, 15, fun() ->
                            {St, Out} = httpdtest_server:run_cli(Base ++ ["--master", B], 5000),
                            Lines = [L || L <- binary:split(Out, <<"\n">>, [global, trim]),
                                          L =/= <<>>],
                            ?assertEqual({exit_status, 2}, {exit_status, St}),
                            ?assertMatch({one_line, [_]}, {one_line, Lines}),
                            ?assertMatch({_, _}, binary:match(hd(Lines), <<"--master">>))
                    end}} || B <- Bad].

masters_test_() ->
    {setup,
     fun() ->
             Sinks = [{L, list_to_atom(httpdtest_os:unique("msink_" ++ [L]))}
                      || L <- "ab"],
             [httpdtest_master:start_sink(Sink) || {_, Sink} <- Sinks],
             Ms = [{L, httpdtest_master:start_master(
                         httpdtest_master:new_master_name(),
                         #{forwarder => {presence, {Sink, node()}}})}
                   || {L, Sink} <- Sinks],
             %% a master that never comes, between the two, delays neither
             Absent = httpdtest_os:unique("httpdmaster_absent") ++ "@localhost",
             [NA, NB] = [atom_to_list(maps:get(node, M)) || {_, M} <- Ms],
             List = lists:join(",", [NA, Absent, NB]),
             S = httpdtest_server:start_server(
                   #{master => list_to_atom(lists:flatten(List)), presence => presence,
                     extra_args => ["--history-ttl", integer_to_list(?TTL)]}),
             {Sinks, Ms, S}
     end,
     fun({Sinks, Ms, S}) ->
             httpdtest_server:stop_server(S),
             [httpdtest_master:kill_master_by_name(maps:get(node, M)) || {_, M} <- Ms],
             [httpdtest_master:stop_sink(Sink) || {_, Sink} <- Sinks]
     end,
     fun(Ctx = {_, _, S}) ->
             {timeout, 300,
              fun() -> httpdtest_server:logged(S, fun(_) -> run(Ctx) end) end}
     end}.

run({Sinks, Ms, S}) ->
    Self = self(),
    [spawn(fun() ->
                   erlang:monitor(process, Self),
                   httpdtest_master:sink_subscribe(Sink),
                   relay(L, Self)
           end) || {L, Sink} <- Sinks],
    CNode = node_of(S),
    put(cnode, CNode),
    hello_and_snapshot_to_both(S),
    changes_reach_both(S),
    one_master_restarts(S, Ms),
    reconnect_storm(S),
    big_snapshot_in_pieces(S),
    slow_master(S, Ms),
    [exit(C, kill) || C <- get(open)],
    wait_stat(S, streams_open, fun(V) -> V =:= 0 end, ?T),
    ok.

%% Ends with the test process.
relay(L, To) ->
    receive
        {forwarded, presence, M} -> To ! {pres, L, M}, relay(L, To);
        {'DOWN', _, process, To, _} -> ok
    end.

%% The next presence message master L got, {What, Arg}; uid lists sorted.
next(L) ->
    CNode = get(cnode),
    receive
        {pres, L, {httpdcnode, CNode, What, Arg}} when is_list(Arg) -> {What, lists:sort(Arg)};
        {pres, L, {httpdcnode, CNode, What, Arg}} when is_integer(Arg) -> {What, [Arg]};
        {pres, L, {httpdcnode, CNode, What, Arg}} -> {What, Arg};
        {pres, L, Other} -> {unexpected, Other}
    after ?LINK_WAIT -> {no_presence_message, L}
    end.

%% Messages to L up to and including the first up or down whose uids hold
%% Marker.
until_marker(L, Marker) ->
    until_msg(L, fun(What, Uids) -> (What =:= up orelse What =:= down)
                                        andalso lists:member(Marker, Uids) end, []).

%% Messages to L up to and including the first that tells it Marker is
%% online: an up, or a snapshot piece (one that repairs L: an up goes at
%% once, and L may be waiting for its repair then).
until_told(L, Marker) ->
    until_msg(L, fun(What, Uids) -> What =/= down andalso is_list(Uids)
                                        andalso lists:member(Marker, Uids) end, []).

until_msg(L, Last, Acc) ->
    case next(L) of
        {no_presence_message, _} = E -> erlang:error({E, lists:reverse(Acc)});
        {What, Uids} = M ->
            case Last(What, Uids) of
                true -> lists:reverse([M | Acc]);
                false -> until_msg(L, Last, [M | Acc])
            end;
        M -> until_msg(L, Last, [M | Acc])
    end.

%% A view (set of uids) after messages.
apply_msgs(View, Msgs) -> lists:foldl(fun apply_msg/2, View, Msgs).

apply_msg({up, U}, V) -> sets:union(V, sets:from_list(U));
apply_msg({down, U}, V) -> sets:subtract(V, sets:from_list(U));
apply_msg({snapshot, U}, _) -> sets:from_list(U);
apply_msg({snapshot_more, U}, V) -> sets:union(V, sets:from_list(U));
apply_msg(M, _) -> erlang:error({not_presence, M}).

assert_hello({hello, Info}) ->
    ?assertMatch(#{history_ttl := ?TTL, history := 32, max_users := 1114112,
                   epoch := <<_:8/binary>>}, Info),
    #{epoch := E} = Info,
    ?assertMatch({ok, _}, catch {ok, binary_to_integer(E, 16)});
assert_hello(Other) -> erlang:error({expected_hello, Other}).

hello_and_snapshot_to_both(_S) ->
    [begin
         assert_hello(next(L)),
         ?assertEqual({snapshot, []}, next(L))
     end || L <- "ab"].

changes_reach_both(S) ->
    C = open_stream(S, 5),
    [?assertEqual({up, [5]}, next(L)) || L <- "ab"],
    close(C),
    [?assertEqual({down, [5]}, next(L)) || L <- "ab"].

%% Master a killed: b keeps getting changes and carrying messages; a, back,
%% gets hello and a snapshot of what is online now; b gets neither.
one_master_restarts(S, Ms) ->
    {_, MA} = lists:keyfind($a, 1, Ms),
    {_, MB} = lists:keyfind($b, 1, Ms),
    CNode = node_of(S),
    C10 = open_stream(S, 10),
    [?assertEqual({up, [10]}, next(L)) || L <- "ab"],
    httpdtest_master:kill_master(MA),
    wait_until(fun() -> not lists:member(maps:get(node, MA), nodes(connected)) end, ?T,
               master_a_gone),
    C11 = open_stream(S, 11),
    ?assertEqual({up, [11]}, next($b)),
    %% through master b, while a is down: every one arrives, in order
    Bs = [<<"via b ", (integer_to_binary(I))/binary>> || I <- lists:seq(1, 50)],
    [{10, B} = rpc:call(maps:get(node, MB), erlang, send, [{any, CNode}, {10, B}]) || B <- Bs],
    [?assertEqual(B, expect_chunk(C10, ?T)) || B <- Bs],
    close(C11),
    ?assertEqual({down, [11]}, next($b)),
    MA2 = httpdtest_master:restart_master(MA),
    assert_hello(next($a)),
    ?assertEqual({snapshot, [10]}, next($a)),
    ?assertMatch({true, _}, {httpdtest_master:master_sees(MA2, CNode), MA2}),
    %% b heard nothing of it: its next message is the next change
    close(C10),
    [?assertEqual({down, [10]}, next(L)) || L <- "ab"].

%% 2,000 streams go and come back at once: each master hears a handful
%% of messages that leave it with the right view.
reconnect_storm(S) ->
    Uids = lists:seq(1001, 1000 + ?STORM),
    Cs = open_all(S, Uids),
    Marker1 = 999,
    M1 = open_stream(S, Marker1),
    V1 = [{L, apply_msgs(sets:new(), until_marker(L, Marker1))} || L <- "ab"],
    Want = lists:sort([Marker1 | Uids]),
    [?assertEqual(Want, sorted(V)) || {_, V} <- V1],
    %% every stream ends, every uid comes back at once
    [exit(C, kill) || C <- Cs],
    wait_stat(S, streams_open, fun(V) -> V =:= 1 end, ?T),
    Cs2 = open_all(S, Uids),
    V2 = storm_seen(S, V1, 998, "ends and comes back", lists:sort([998 | Want])),
    %% every stream ends; once the masters know, every uid comes back
    [exit(C, kill) || C <- Cs2],
    wait_stat(S, streams_open, fun(V) -> V =:= 2 end, ?T),
    V3 = storm_seen(S, V2, 997, "ends", [997, 998, Marker1]),
    Cs3 = open_all(S, Uids),
    storm_seen(S, V3, 996, "comes back", lists:sort([996, 997, 998 | Want])),
    put(open, [M1 | Cs3] ++ get(markers)),
    put(online, [Marker1, 996, 997, 998 | Uids]).

%% Opens a stream of Marker: each master's messages up to the one that
%% tells it are fewer than 50 and leave its view at Want.
storm_seen(S, Views, Marker, What, Want) ->
    M = open_stream(S, Marker),
    put(markers, [M | case get(markers) of undefined -> []; Ms -> Ms end]),
    [begin
         Msgs = until_marker(L, Marker),
         io:format(user, "~n~b streams ~s: ~b presence messages to master ~c~n",
                   [?STORM, What, length(Msgs), L]),
         ?assert(length(Msgs) < 50),
         V1 = apply_msgs(V0, Msgs),
         ?assertEqual(Want, sorted(V1)),
         {L, V1}
     end || {L, V0} <- Views].

sorted(Set) -> lists:sort(sets:to_list(Set)).

open_all(S, Uids) ->
    [C || {_, C} <- httpdtest_http:open_streams(S, Uids, 50, #{})].

%% 10,000 uids online; a snapshot asked by this (non-master) node goes to
%% both masters, after a hello, in pieces of at most 4,096: snapshot, then
%% snapshot_more.
big_snapshot_in_pieces(S) ->
    More = lists:seq(20001, 20000 + ?BIG - length(get(online))),
    Cs = open_all(S, More),
    %% Above every uid of More: a window's changes go out sorted by uid, so
    %% a smaller marker could come in a piece before some of theirs.
    Marker = 20000 + ?BIG + 1,
    M = open_stream(S, Marker),
    [until_marker(L, Marker) || L <- "ab"],
    Online = lists:sort([Marker | More ++ get(online)]),
    ?assertEqual(?BIG + 1, length(Online)),
    Ref = make_ref(),
    send(S, {self(), Ref, snapshot}),
    receive {Ref, N} -> ?assertEqual(?BIG + 1, N)
    after ?T -> erlang:error(no_snapshot_ack)
    end,
    Pieces = (?BIG + 1 + ?PIECE - 1) div ?PIECE,
    [begin
         assert_hello(next(L)),
         {snapshot, First} = next(L),
         Rest = [next(L) || _ <- lists:seq(2, Pieces)],
         ?assert(length(First) =< ?PIECE),
         [?assertMatch({snapshot_more, U} when length(U) =< ?PIECE, P) || P <- Rest],
         All = lists:append([First | [U || {snapshot_more, U} <- Rest]]),
         ?assertEqual(Online, lists:sort(All))
     end || L <- "ab"],
    St = stats(S),
    ?assertEqual(0, maps:get(presence_dropped, St)),
    put(open, [M | Cs ++ get(open)]),
    put(online, Online).

%% Master b stops reading (SIGSTOP) while snapshots pile up for it: a
%% keeps getting everything at once, b's messages are dropped and
%% counted, and once b reads again a snapshot gives it the right view.
slow_master(S, Ms) ->
    {_, MB} = lists:keyfind($b, 1, Ms),
    ok = httpdtest_os:signal(MB, "STOP"),
    try
        fill_until_dropped(S, 400),
        %% a change reaches a while b still reads nothing: no send to b
        %% holds the C-node (the time it took is printed, not judged: a
        %% busy machine makes it what it likes)
        T0 = erlang:monotonic_time(millisecond),
        C = open_stream(S, 42),
        ?assertMatch([_ | _], until_told($a, 42)),
        Took = erlang:monotonic_time(millisecond) - T0,
        io:format(user, "~nwith master b stopped, an up reached master a in ~b ms~n", [Took]),
        put(open, [C | get(open)]),
        put(online, lists:sort([42 | get(online)]))
    after
        httpdtest_os:signal(MB, "CONT")
    end,
    Want = get(online),
    wait_until(fun() -> view_of_b(Want) end, ?LINK_WAIT, b_repaired).

%% Snapshots asked by this (non-master) node go to both masters.
fill_until_dropped(_S, 0) -> erlang:error(presence_to_stopped_master_never_dropped);
fill_until_dropped(S, N) ->
    Ref = make_ref(),
    send(S, {self(), Ref, snapshot}),
    receive {Ref, _} -> ok after ?T -> erlang:error(no_snapshot_ack) end,
    flush_a(),
    case maps:get(presence_dropped, stats(S)) of
        0 -> fill_until_dropped(S, N - 1);
        _ -> ok
    end.

flush_a() ->
    receive {pres, $a, _} -> flush_a() after 0 -> ok end.

%% Applies what b got so far to its view (kept in the process dictionary).
view_of_b(Want) ->
    V = apply_pending_b(case get(view_b) of undefined -> sets:new(); V0 -> V0 end),
    put(view_b, V),
    sorted(V) =:= Want.

apply_pending_b(V) ->
    receive
        {pres, $b, {httpdcnode, _, hello, _}} -> apply_pending_b(V);
        {pres, $b, {httpdcnode, _, What, Arg}} ->
            apply_pending_b(apply_msg({What, if is_list(Arg) -> Arg; true -> [Arg] end}, V))
    after 0 -> V
    end.
