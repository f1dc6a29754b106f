%% SPDX-License-Identifier: Apache-2.0
%% Runs every EUnit module named *_tests found in the test beam directory
%% (scripts/run-tests.sh calls main/0) and counts the results with an
%% EUnit listener, so that the script gets exact numbers: a cancelled
%% test (timeout, failed setup) counts as failed, as does a skipped one.
-module(httpdtest_report).
-behaviour(eunit_listener).

-export([main/0, main/1]).
-export([start/1, init/1, handle_begin/3, handle_end/3, handle_cancel/3, terminate/2]).

-record(st, {notify, pass = 0, fail = 0, skip = 0, groups = #{},
             cancelled_tests = [], cancelled_groups = [], failures = []}).

main() -> main(["build/tests/ebin"]).

%% Prints "eunit-counts: PASSED FAILED" as its last line, then halts 0;
%% the caller treats a missing line as a crash.
%% $HTTPDTEST_MODULES (names, space-separated) runs only those.
main([Dir]) ->
    All = [filename:basename(F, ".beam")
           || F <- filelib:wildcard(filename:join(Dir, "*_tests.beam"))],
    Mods = case string:lexemes(os:getenv("HTTPDTEST_MODULES", ""), " ") of
               [] -> lists:sort([list_to_atom(M) || M <- All]);
               Only -> [list_to_atom(M) || M <- Only]
           end,
    io:format("EUnit modules: ~p~n", [Mods]),
    Res = eunit:test(Mods, [verbose, {report, {?MODULE, [{notify, self()}]}}]),
    receive
        {?MODULE, counts, Pass, Fail, Failures} ->
            [io:format("FAILED: ~s~n", [F]) || F <- Failures],
            io:format("eunit (~p): ~b passed, ~b failed~n", [Res, Pass, Fail]),
            io:format("eunit-counts: ~b ~b~n", [Pass, Fail]),
            erlang:halt(0)
    after 10000 ->
            io:format("eunit returned ~p without counts~n", [Res]),
            erlang:halt(1)
    end.

start(Options) -> eunit_listener:start(?MODULE, Options).

init(Options) ->
    St = #st{notify = proplists:get_value(notify, Options)},
    receive {start, _Ref} -> St end.

%% Group descriptions by id, to name a failed test by where it sits.
handle_begin(group, Data, St) ->
    case proplists:get_value(desc, Data) of
        undefined -> St;
        D -> St#st{groups = maps:put(proplists:get_value(id, Data), D, St#st.groups)}
    end;
handle_begin(_Kind, _Data, St) -> St.

handle_end(test, Data, St) ->
    case proplists:get_value(status, Data) of
        ok -> St#st{pass = St#st.pass + 1};
        {skipped, _} -> St#st{skip = St#st.skip + 1, failures = [name(Data, St) | St#st.failures]};
        _ -> St#st{fail = St#st.fail + 1, failures = [name(Data, St) | St#st.failures]}
    end;
handle_end(_Group, _Data, St) -> St.

handle_cancel(test, Data, St) ->
    St#st{cancelled_tests = [proplists:get_value(id, Data, []) | St#st.cancelled_tests],
          failures = [name(Data, St) ++ " (cancelled)" | St#st.failures]};
handle_cancel(group, Data, St) ->
    St#st{cancelled_groups = [proplists:get_value(id, Data, []) | St#st.cancelled_groups],
          failures = [name(Data, St) ++ " (group cancelled: " ++
                          lists:flatten(io_lib:format("~P", [proplists:get_value(reason, Data), 8]))
                      ++ ")" | St#st.failures]}.

terminate(Result, St = #st{notify = N}) ->
    Tests = St#st.cancelled_tests,
    %% a cancelled group counts once unless a test inside it was counted
    Groups = [G || G <- St#st.cancelled_groups,
                   not lists:any(fun(T) -> lists:prefix(G, T) end, Tests)],
    Fail = St#st.fail + St#st.skip + length(Tests) + length(Groups),
    Extra = case Result of {ok, _} -> 0; _ -> 1 end,
    N ! {?MODULE, counts, St#st.pass, Fail + Extra, lists:reverse(St#st.failures)},
    receive
        {stop, Ref, ReplyTo} ->
            ReplyTo ! {result, Ref, case Fail + Extra of 0 -> ok; _ -> error end},
            ok
    end.

name(Data, St) ->
    Id = proplists:get_value(id, Data, []),
    Path = [io_lib:format("~ts > ", [maps:get(lists:sublist(Id, N), St#st.groups)])
            || N <- lists:seq(1, max(0, length(Id) - 1)),
               maps:is_key(lists:sublist(Id, N), St#st.groups)],
    Src = case proplists:get_value(source, Data) of
              {M, F, A} -> io_lib:format("~s:~s/~b", [M, F, A]);
              _ -> ""
          end,
    Desc = case proplists:get_value(desc, Data) of
               undefined -> "";
               D -> io_lib:format(" \"~ts\"", [D])
           end,
    Line = case proplists:get_value(line, Data) of
               L when is_integer(L), L > 0 -> io_lib:format(":~b", [L]);
               _ -> ""
           end,
    case Desc of
        "" -> lists:flatten([Path, Src, Line]);
        _ -> lists:flatten([Path, string:trim(Desc)])
    end.
