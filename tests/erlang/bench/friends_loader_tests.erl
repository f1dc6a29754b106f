%% SPDX-License-Identifier: Apache-2.0
%% Loading an edge list into subsmanager (mnesia in RAM on this node).
-module(friends_loader_tests).
-include_lib("eunit/include/eunit.hrl").

parse_line_test_() ->
    P = fun friends_loader:parse_line/1,
    [?_assertEqual({1, 2}, P(<<"1 2\n">>)),
     ?_assertEqual({10, 20}, P(<<"  10\t 20 \r\n">>)),
     ?_assertEqual({3, 4}, P(<<"3 4">>)),
     ?_assertEqual(skip, P(<<"\n">>)),
     ?_assertEqual(skip, P(<<"   \r\n">>)),
     ?_assertEqual(skip, P(<<"# users 1000\n">>)),
     ?_assertEqual(error, P(<<"1\n">>)),
     ?_assertEqual(error, P(<<"1 2 3\n">>)),
     ?_assertEqual(error, P(<<"a b\n">>)),
     ?_assertEqual(error, P(<<"0 5\n">>)),
     ?_assertEqual(error, P(<<"-1 5\n">>))].

loader_test_() ->
    {setup, fun setup/0, fun cleanup/1,
     fun(_) ->
             [{"mutual edges", fun mutual/0},
              {"one direction", fun one_direction/0},
              {"small batches give the same table", fun small_batches/0},
              {"bad line stops with its number", fun bad_line/0},
              {"missing file", fun missing_file/0},
              {"remove subscriptions", fun remove/0},
              {"router recipients", fun recipients/0}]
     end}.

setup() ->
    WasRunning = lists:keymember(mnesia, 1, application:which_applications()),
    ok = httpdcnode_app:start_mnesia(),
    ok = subsmanager:ensure_table(),
    ok = subsmanager:clear(),
    WasRunning.

cleanup(WasRunning) ->
    _ = mnesia:delete_table(subscription),
    case WasRunning of
        true -> ok;
        false -> stopped = mnesia:stop()
    end.

with_file(Lines, Fun) ->
    File = filename:join(os:getenv("TMPDIR", "/tmp"),
                         "friends_" ++ os:getpid() ++ "_" ++
                             integer_to_list(erlang:unique_integer([positive])) ++ ".txt"),
    ok = file:write_file(File, Lines),
    try
        ok = subsmanager:clear(),
        Fun(File)
    after
        file:delete(File)
    end.

mutual() ->
    with_file(["# comment\n", "1 2\n", "\n", "3 1\n", "4 2"],
              fun(F) ->
                      ?assertEqual({ok, 3}, friends_loader:load(F)),
                      ?assertEqual(6, subsmanager:count()),
                      ?assertEqual([2, 3], lists:sort(subsmanager:get_subscribers(1))),
                      ?assertEqual([1, 4], lists:sort(subsmanager:get_subscribers(2))),
                      ?assertEqual([1], subsmanager:get_subscribers(3)),
                      ?assertEqual([2, 3], lists:sort(subsmanager:get_subscriptions(1))),
                      ?assertEqual([], subsmanager:get_subscribers(5))
              end).

one_direction() ->
    with_file(["1 2\n", "3 1\n"],
              fun(F) ->
                      ?assertEqual({ok, 2}, friends_loader:load(F, #{mutual => false})),
                      ?assertEqual(2, subsmanager:count()),
                      %% "1 2": 1 subscribes to 2, so 2's events reach 1
                      ?assertEqual([1], subsmanager:get_subscribers(2)),
                      ?assertEqual([3], subsmanager:get_subscribers(1))
              end).

small_batches() ->
    with_file([],
              fun(F) ->
                      {ok, E} = friends_graph:write(F, 300, 3, 5),
                      ?assertEqual({ok, E}, friends_loader:load(F, #{batch => 7})),
                      Small = lists:sort(ets_rows()),
                      ok = subsmanager:clear(),
                      ?assertEqual({ok, E}, friends_loader:load(F)),
                      ?assertEqual(Small, lists:sort(ets_rows())),
                      ?assertEqual(2 * E, length(Small)),
                      %% each user's subscribers are exactly its graph neighbours
                      Edges = friends_graph:edges(300, 3, 5),
                      [?assertEqual(lists:usort([B || {A, B} <- Edges, A =:= U] ++
                                                    [A || {A, B} <- Edges, B =:= U]),
                                    lists:sort(subsmanager:get_subscribers(U)))
                       || U <- [1, 2, 50, 300]]
              end).

bad_line() ->
    with_file(["1 2\n", "2 3\n", "oops\n", "4 5\n"],
              fun(F) -> ?assertEqual({error, {3, bad_line}}, friends_loader:load(F)) end).

missing_file() ->
    ?assertEqual({error, enoent}, friends_loader:load("/nonexistent/friends.txt")).

remove() ->
    with_file(["1 2\n", "1 3\n"],
              fun(F) ->
                      {ok, 2} = friends_loader:load(F),
                      ok = subsmanager:remove_subscriptions([{subscription, 2, 1}]),
                      ?assertEqual([3], subsmanager:get_subscribers(1)),
                      ?assertEqual([1], subsmanager:get_subscribers(2))
              end).

recipients() ->
    with_file(["1 2\n", "1 3\n", "4 5\n"],
              fun(F) ->
                      {ok, 3} = friends_loader:load(F),
                      ?assertEqual([1, 2, 3], router:recipients(1)),
                      ?assertEqual([1, 2], router:recipients(2)),
                      ?assertEqual([9], router:recipients(9))
              end).

%% The (subscriber, subscribee) pairs in the table (rows also carry the
%% clock of their add, which differs between two loads).
ets_rows() ->
    [{S, E} || {subscription, S, E, _} <- mnesia:dirty_match_object({subscription, '_', '_', '_'})].
