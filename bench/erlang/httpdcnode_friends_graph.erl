%% SPDX-License-Identifier: Apache-2.0
%% Friends graph generator: Barabasi-Albert preferential attachment.
%%
%% Users are 1..N. Users 1..M start without edges; user M+1 befriends all of
%% them; every later user V befriends M distinct earlier users, each picked
%% with probability proportional to its current degree. That gives
%% M*(N-M) edges, no self loops, no duplicates, and a heavy-tailed degree
%% distribution (a few users with very many friends), like a social network.
%%
%% Degree-proportional picking is O(1): every edge appends both endpoints to
%% a flat array (atomics), and a uniform index into it is a pick weighted by
%% degree. The whole graph is O(N*M) time and 16*M*N bytes of array.
%%
%% The random stream is rand's exsss seeded with Seed, so a seed always gives
%% the same graph. The file format is one edge per line: "A B\n", A the newer
%% user.
-module(httpdcnode_friends_graph).

-export([fold/5, edges/3, write/4, main/1]).

-define(FLUSH_BYTES, 65536).

-type seed() :: integer() | {integer(), integer(), integer()}.

%% Calls Fun({A, B}, Acc) for every edge, in generation order.
-spec fold(fun(({pos_integer(), pos_integer()}, Acc) -> Acc), Acc,
           pos_integer(), pos_integer(), seed()) -> Acc.
fold(Fun, Acc0, N, M, Seed) when is_integer(N), is_integer(M), M >= 1, N > M ->
    Ends = atomics:new(2 * M * (N - M), [{signed, false}]),
    %% User M+1 links to every starting user.
    First = M + 1,
    Acc1 = lists:foldl(fun(T, A) -> Fun({First, T}, A) end, Acc0, lists:seq(1, M)),
    Count1 = append(Ends, 0, [{First, T} || T <- lists:seq(1, M)]),
    grow(First + 1, N, M, Ends, Count1, rand:seed_s(exsss, Seed), Fun, Acc1);
fold(Fun, Acc0, N, M, Seed) ->
    error(badarg, [Fun, Acc0, N, M, Seed]).

grow(V, N, _M, _Ends, _Count, _Rand, _Fun, Acc) when V > N ->
    Acc;
grow(V, N, M, Ends, Count, Rand0, Fun, Acc0) ->
    {Targets, Rand1} = pick(M, Ends, Count, #{}, [], Rand0),
    Edges = [{V, T} || T <- Targets],
    Acc1 = lists:foldl(Fun, Acc0, Edges),
    grow(V + 1, N, M, Ends, append(Ends, Count, Edges), Rand1, Fun, Acc1).

%% M distinct users, each drawn proportionally to degree; repeats are redrawn
%% (rare once the graph has grown past its first few users).
pick(0, _Ends, _Count, _Seen, Picked, Rand) ->
    {lists:reverse(Picked), Rand};
pick(K, Ends, Count, Seen, Picked, Rand0) ->
    {I, Rand1} = rand:uniform_s(Count, Rand0),
    T = atomics:get(Ends, I),
    case is_map_key(T, Seen) of
        true -> pick(K, Ends, Count, Seen, Picked, Rand1);
        false -> pick(K - 1, Ends, Count, Seen#{T => true}, [T | Picked], Rand1)
    end.

append(Ends, Count, Edges) ->
    lists:foldl(fun({A, B}, C) ->
                        atomics:put(Ends, C + 1, A),
                        atomics:put(Ends, C + 2, B),
                        C + 2
                end, Count, Edges).

%% All edges as a list (for small graphs and tests).
-spec edges(pos_integer(), pos_integer(), seed()) -> [{pos_integer(), pos_integer()}].
edges(N, M, Seed) ->
    lists:reverse(fold(fun(E, Acc) -> [E | Acc] end, [], N, M, Seed)).

%% Writes the edge list to File. Returns {ok, NumEdges}.
-spec write(file:filename(), pos_integer(), pos_integer(), seed()) ->
          {ok, non_neg_integer()} | {error, term()}.
write(File, N, M, Seed) ->
    case file:open(File, [write, raw, binary]) of
        {ok, Fd} ->
            try
                {Edges, Buf, _} = fold(fun(E, Acc) -> add_line(Fd, E, Acc) end,
                                       {0, [], 0}, N, M, Seed),
                ok = file:write(Fd, Buf),
                {ok, Edges}
            after
                file:close(Fd)
            end;
        Error ->
            Error
    end.

add_line(Fd, {A, B}, {Edges, Buf, Size}) ->
    BA = integer_to_binary(A),
    BB = integer_to_binary(B),
    Line = [BA, $\s, BB, $\n],
    case Size >= ?FLUSH_BYTES of
        true ->
            ok = file:write(Fd, [Buf | Line]),
            {Edges + 1, [], 0};
        false ->
            {Edges + 1, [Buf | Line], Size + byte_size(BA) + byte_size(BB) + 2}
    end.

%% Command line: erl -noshell -pa tools/erlang/ebin \
%%                   -run httpdcnode_friends_graph main FILE USERS EDGES_PER_USER SEED
main([File, N, M, Seed]) ->
    case write(File, list_to_integer(N), list_to_integer(M), list_to_integer(Seed)) of
        {ok, E} ->
            io:format("~s: ~s users, ~b edges~n", [File, N, E]),
            halt(0);
        {error, Reason} ->
            io:format(standard_error, "~s: ~p~n", [File, Reason]),
            halt(1)
    end;
main(_) ->
    io:format(standard_error,
              "usage: -run httpdcnode_friends_graph main FILE USERS EDGES_PER_USER SEED~n", []),
    halt(2).
