%% SPDX-License-Identifier: Apache-2.0
%% Barabasi-Albert friends graph: shape, invariants, reproducibility.
-module(friends_graph_tests).
-include_lib("eunit/include/eunit.hrl").

-define(N, 5000).
-define(M, 3).

graph() -> friends_graph:edges(?N, ?M, 42).

edge_count_test() ->
    ?assertEqual(?M * (?N - ?M), length(graph())).

every_user_has_an_edge_test() ->
    Users = lists:usort(lists:append([[A, B] || {A, B} <- graph()])),
    ?assertEqual(lists:seq(1, ?N), Users).

no_self_loops_test() ->
    ?assertEqual([], [E || {A, A} = E <- graph()]).

no_duplicate_edges_test() ->
    Undirected = [{min(A, B), max(A, B)} || {A, B} <- graph()],
    ?assertEqual(length(Undirected), length(lists:usort(Undirected))).

newer_user_links_to_m_older_ones_test() ->
    Edges = graph(),
    ?assertEqual([], [E || {A, B} = E <- Edges, A =< B]),
    PerUser = lists:foldl(fun({A, _}, M) -> maps:update_with(A, fun(C) -> C + 1 end, 1, M) end,
                          #{}, Edges),
    ?assertEqual(lists:seq(?M + 1, ?N), lists:sort(maps:keys(PerUser))),
    ?assertEqual([?M], lists:usort(maps:values(PerUser))).

heavy_tailed_degrees_test() ->
    Degrees = lists:sort(maps:values(degrees(graph()))),
    Max = lists:last(Degrees),
    Median = lists:nth(length(Degrees) div 2, Degrees),
    %% Preferential attachment: hubs far above the typical user (for a
    %% uniform random graph of the same size the maximum is about 4*M).
    ?assert(Max > 15 * ?M),
    ?assert(Median =< 2 * ?M),
    %% and a tail, not a single outlier
    ?assert(length([D || D <- Degrees, D >= 10 * ?M]) >= 5).

same_seed_same_graph_test() ->
    ?assertEqual(friends_graph:edges(500, 4, 7), friends_graph:edges(500, 4, 7)).

other_seed_other_graph_test() ->
    ?assertNotEqual(friends_graph:edges(500, 4, 7), friends_graph:edges(500, 4, 8)).

does_not_touch_process_rng_test() ->
    rand:seed(exsss, 1),
    A = rand:uniform(1000000),
    rand:seed(exsss, 1),
    _ = friends_graph:edges(100, 2, 3),
    ?assertEqual(A, rand:uniform(1000000)).

smallest_graph_test() ->
    ?assertEqual([{2, 1}], friends_graph:edges(2, 1, 1)),
    ?assertEqual([{3, 1}, {3, 2}], friends_graph:edges(3, 2, 1)).

bad_arguments_test_() ->
    [?_assertError(badarg, friends_graph:edges(3, 3, 1)),
     ?_assertError(badarg, friends_graph:edges(10, 0, 1))].

write_matches_edges_test() ->
    File = tmp_file("graph"),
    try
        ?assertEqual({ok, 1000 * 5 - 25}, friends_graph:write(File, 1000, 5, 99)),
        {ok, Bin} = file:read_file(File),
        Lines = binary:split(Bin, <<"\n">>, [global, trim]),
        Parsed = [list_to_tuple([binary_to_integer(X) || X <- binary:split(L, <<" ">>)])
                  || L <- Lines],
        ?assertEqual(friends_graph:edges(1000, 5, 99), Parsed)
    after
        file:delete(File)
    end.

%% A quadratic generator would not finish 200k users in a minute; this one
%% takes about a second. (Bounded by the timeout, not asserted as a timing.)
large_graph_is_linear_test_() ->
    {timeout, 120,
     fun() ->
             N = 200000,
             Count = friends_graph:fold(fun(_, C) -> C + 1 end, 0, N, 5, 1),
             ?assertEqual(5 * (N - 5), Count)
     end}.

degrees(Edges) ->
    lists:foldl(fun({A, B}, M) ->
                        Inc = fun(C) -> C + 1 end,
                        maps:update_with(B, Inc, 1, maps:update_with(A, Inc, 1, M))
                end, #{}, Edges).

tmp_file(Tag) ->
    filename:join(os:getenv("TMPDIR", "/tmp"),
                  Tag ++ "_" ++ os:getpid() ++ "_" ++
                      integer_to_list(erlang:unique_integer([positive])) ++ ".txt").
