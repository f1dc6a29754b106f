%% SPDX-License-Identifier: Apache-2.0
%% Client role: a node of the cluster that runs the httpdcnode application
%% without presence of its own (application env `{role, client}') and
%% forwards every routing call to a master (env `masters', tried in order:
%% the first one connected, else the first that answers). The master routes
%% with its own presence, so the client needs no table, no mnesia and no
%% link to the C-nodes. Async calls are one erpc:cast (one Erlang message to
%% the master); sync calls one erpc:call, waiting at most their timeout plus
%% a second.
-module(httpdcnode_client).

-export([is_client/0, masters/0, cast/3, call/4]).

%% Margin over a sync call's own timeout for the hop to the master.
-define(HOP_MS, 1000).

-spec is_client() -> boolean().
is_client() ->
    application:get_env(httpdcnode, role, master) =:= client.

%% The masters of env `masters' other than this node.
-spec masters() -> [node()].
masters() ->
    [N || N <- application:get_env(httpdcnode, masters, []), N =/= node()].

%% Fire and forget on a master; ok even when none is up (like a send to a
%% C-node that is gone).
-spec cast(module(), atom(), list()) -> ok.
cast(M, F, A) ->
    case pick() of
        none -> ok;
        Master -> erpc:cast(Master, M, F, A)
    end.

%% M:F(A) on a master; the next master when one is down. Raises
%% {httpdcnode_client, no_master} when none answers.
-spec call(module(), atom(), list(), timeout()) -> term().
call(M, F, A, Timeout) ->
    call(ordered(), M, F, A, hop(Timeout)).

call([], _M, _F, _A, _T) ->
    error({httpdcnode_client, no_master});
call([Master | Rest], M, F, A, T) ->
    try erpc:call(Master, M, F, A, T)
    catch error:{erpc, noconnection} -> call(Rest, M, F, A, T)
    end.

hop(infinity) -> infinity;
hop(T) -> T + ?HOP_MS.

%% Connected masters first, in the order configured.
ordered() ->
    Ms = masters(),
    Up = erlang:nodes(),
    [N || N <- Ms, lists:member(N, Up)] ++ [N || N <- Ms, not lists:member(N, Up)].

pick() ->
    case ordered() of
        [] -> none;
        [First | _] = Ms ->
            case lists:member(First, erlang:nodes()) of
                true -> First;
                false -> first_reachable(Ms)
            end
    end.

first_reachable([]) -> none;
first_reachable([N | Rest]) ->
    case net_kernel:connect_node(N) of
        true -> N;
        _ -> first_reachable(Rest)
    end.
