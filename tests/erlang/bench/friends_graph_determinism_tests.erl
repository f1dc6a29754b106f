%% SPDX-License-Identifier: Apache-2.0
%% A seed always gives the same friends graph: on every run, every machine
%% and every OTP release (rand's exsss and erlang:phash2 are both fixed), and
%% the file written holds exactly the edges generated. Pure: no server, no
%% distribution; run by `make test` (friends_graph is in bench/erlang, not in
%% the application).
-module(friends_graph_determinism_tests).
-include_lib("eunit/include/eunit.hrl").

%% Recorded once; a change means seeded graphs are no longer reproducible.
first_edges_are_pinned_test() ->
    ?assertEqual([{4, 1}, {4, 2}, {4, 3}, {5, 1}, {5, 4}, {5, 3},
                  {6, 5}, {6, 1}, {6, 2}, {7, 3}, {7, 4}, {7, 1}],
                 lists:sublist(friends_graph:edges(100, 3, 42), 12)).

whole_graph_hash_is_pinned_test() ->
    ?assertEqual(50427459, erlang:phash2(friends_graph:edges(1000, 3, 42))).

file_holds_the_same_edges_every_time_test() ->
    Dir = filename:join(os:getenv("TMPDIR", "/tmp"),
                        "friends_graph_" ++ os:getpid() ++ "_" ++
                            integer_to_list(erlang:unique_integer([positive]))),
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    [A, B] = Files = [filename:join(Dir, F) || F <- ["a.txt", "b.txt"]],
    try
        [?assertEqual({ok, 3 * (2000 - 3)}, friends_graph:write(F, 2000, 3, 7)) || F <- Files],
        {ok, BinA} = file:read_file(A),
        ?assertEqual({ok, BinA}, file:read_file(B)),
        Expected = iolist_to_binary([io_lib:format("~b ~b~n", [X, Y])
                                     || {X, Y} <- friends_graph:edges(2000, 3, 7)]),
        ?assertEqual(Expected, BinA)
    after
        [file:delete(F) || F <- Files],
        file:del_dir(Dir)
    end.
