%% SPDX-License-Identifier: Apache-2.0
%% The Erlang side of scripts/cluster-sim.sh: what its controller node (a
%% hidden node on a host of its own) asks of the masters. One command per
%% run, from the shell:
%%   erl -name ctl_N@ADDR -hidden -setcookie C -noshell -pa tools/erlang/ebin \
%%       -eval 'simctl:cli()' -extra COMMAND ARGS...
%% prints one JSON line and halts (status 1 on an error, said on stderr).
%% Every wait is bounded.
%%
%%   start_app M1,M2 C1,C2 TIMEOUT_MS   the application on each master
%%       (env masters = both); waits until each knows both C-nodes
%%   online M1,M2 FIRST LAST TIMEOUT_MS   waits until every master has every
%%       uid of FIRST..LAST online: {"ms": ...} or {"timeout": true, ...}
%%   load M FIRST LAST RATE COUNT PROCS   msggen on master M through the
%%       application (httpdcnode:send/2), sequential uids, "n=N;" payloads
%%   subs M ACTION SUBSCRIBER SUBSCRIBEE   httpdcnode_subs add or remove on M
%%   subscribers M1,M2 SUBSCRIBEE WANT TIMEOUT_MS   waits until both masters
%%       answer get_subscribers the same, WANT (comma list); reports both
%%   route M SUBSCRIBEE N   httpdcnode_router:send N times on M: the connections reached
%%   app_stats M   the application's counters on M (httpdcnode:app_stats/0)
%%   sees M NODE   whether M is connected to NODE
-module(simctl).
-export([cli/0]).

-define(CALL_MS, 30000).

cli() ->
    Args = init:get_plain_arguments(),
    Code = try
               Result = run(Args),
               io:format("~s~n", [msggen:to_json(Result)]),
               0
           catch C:E:St ->
                   io:format(standard_error, "simctl ~p: ~p:~p~n~p~n", [Args, C, E, St]),
                   1
           end,
    halt(Code).

run(["start_app", Ms, Cs, Tmo]) ->
    Masters = nodes_of(Ms),
    CNodes = nodes_of(Cs),
    [start_app(M, Masters) || M <- Masters],
    T0 = now_ms(),
    [wait(fun() -> lists:sort(call(M, httpdcnode, nodes, [])) =:= lists:sort(CNodes) end,
          int(Tmo)) || M <- Masters],
    #{ms => now_ms() - T0};
run(["online", Ms, First, Last, Tmo]) ->
    Uids = lists:seq(int(First), int(Last)),
    timed(fun() ->
                  lists:all(fun(M) -> offline(M, Uids) =:= [] end, nodes_of(Ms))
          end, int(Tmo));
run(["load", M, First, Last, Rate, Count, Procs]) ->
    Opts = #{via => app, seq => true, order => sequential, uids => {int(First), int(Last)},
             rate => int(Rate), count => int(Count), procs => int(Procs)},
    erpc:call(list_to_atom(M), msggen, run, [Opts], infinity);
run(["subs", M, Action, Subscriber, Subscribee]) ->
    Rec = [{subscription, int(Subscriber), int(Subscribee)}],
    F = case Action of "add" -> add_subscriptions; "remove" -> remove_subscriptions end,
    #{result => term(call(list_to_atom(M), httpdcnode_subs, F, [Rec]))};
run(["subscribers", Ms, Subscribee, Want, Tmo]) ->
    [A, B] = nodes_of(Ms),
    S = int(Subscribee),
    W = lists:sort([int(X) || X <- string:lexemes(Want, ",")]),
    Get = fun(M) -> lists:sort(catch call(M, httpdcnode_subs, get_subscribers, [S])) end,
    R = timed(fun() -> Get(A) =:= Get(B) andalso Get(A) =:= W end, int(Tmo)),
    R#{a => uids(Get(A)), b => uids(Get(B)), want => uids(W)};
run(["route", M, Subscribee, N]) ->
    Got = [case call(list_to_atom(M), httpdcnode_router, send,
                     [int(Subscribee), <<"t=", (integer_to_binary(os:system_time(nanosecond)))/binary,
                                         ";router">>]) of
               {ok, K} -> K;
               _ -> 0
           end || _ <- lists:seq(1, int(N))],
    #{reached => lists:sum(Got), sends => int(N)};
run(["app_stats", M]) ->
    maps:map(fun(_, V) when is_integer(V) -> V; (_, V) -> term(V) end,
             call(list_to_atom(M), httpdcnode, app_stats, []));
run(["sees", M, Node]) ->
    #{sees => lists:member(list_to_atom(Node),
                           call(list_to_atom(M), erlang, nodes, [connected]))}.

start_app(M, Masters) ->
    case call(M, application, load, [httpdcnode]) of
        ok -> ok;
        {error, {already_loaded, httpdcnode}} -> ok
    end,
    ok = call(M, application, set_env, [httpdcnode, masters, Masters]),
    {ok, _} = call(M, application, ensure_all_started, [httpdcnode]).

offline(M, Uids) ->
    [U || U <- Uids, (catch call(M, httpdcnode, online, [U])) =:= []].

timed(F, Tmo) ->
    T0 = now_ms(),
    case catch wait(F, Tmo) of
        ok -> #{ms => now_ms() - T0, at_ms => os:system_time(millisecond)};
        _ -> #{timeout => true, ms => now_ms() - T0}
    end.

wait(F, Tmo) -> wait(F, now_ms() + Tmo, Tmo).

wait(F, Deadline, Tmo) ->
    case catch F() of
        true -> ok;
        _ ->
            case now_ms() > Deadline of
                true -> erlang:error({timeout, Tmo});
                false -> timer:sleep(20), wait(F, Deadline, Tmo)
            end
    end.

call(M, Mod, F, A) -> erpc:call(M, Mod, F, A, ?CALL_MS).

nodes_of(S) -> [list_to_atom(N) || N <- string:lexemes(S, ",")].

int(S) -> list_to_integer(S).

now_ms() -> erlang:monotonic_time(millisecond).

term(T) -> iolist_to_binary(io_lib:format("~0p", [T])).

uids(L) when is_list(L) -> iolist_to_binary(lists:join(",", [integer_to_list(U) || U <- L]));
uids(_) -> <<"error">>.
