%% SPDX-License-Identifier: Apache-2.0
%% The old module names (router, subsmanager, subsmanager_heal; beside the
%% application, friends_graph and friends_loader, checked when built: not
%% under rebar3), kept for one release, have every function of the modules
%% they now call, and call them:
%% a function added to httpdcnode_subs and not to subsmanager would be
%% missing on a node of the release before calling this one. Pure: no
%% server, no distribution; run by `make test` and by `rebar3 eunit` in
%% tools/erlang.
-module(httpdcnode_old_names_tests).
-include_lib("eunit/include/eunit.hrl").

-define(PAIRS, [{router, httpdcnode_router}, {subsmanager, httpdcnode_subs},
                {subsmanager_heal, httpdcnode_subs_heal}]
               ++ [P || {Old, _} = P <- [{friends_graph, httpdcnode_friends_graph},
                                         {friends_loader, httpdcnode_friends_loader}],
                        code:which(Old) =/= non_existing]).
%% A gen_server's callbacks are called by the process, never by name.
-define(NOT_API, [{module_info, 0}, {module_info, 1}, {init, 1}, {handle_call, 3},
                  {handle_cast, 2}, {handle_info, 2}]).

api(Module) ->
    lists:sort(Module:module_info(exports) -- ?NOT_API).

same_functions_test_() ->
    [{atom_to_list(Old), ?_assertEqual(api(New), api(Old))} || {Old, New} <- ?PAIRS].

%% Each function of an old name is one call of the new module's function of
%% the same name and arity (read from the compiled code).
calls_the_new_module_test_() ->
    [{atom_to_list(Old), ?_assertEqual([{F, A, [{New, F, A}]} || {F, A} <- api(Old)],
                                       [{F, A, calls(Old, F, A)} || {F, A} <- api(Old)])}
     || {Old, New} <- ?PAIRS].

%% The functions Module:F/A calls.
calls(Module, F, A) ->
    {beam_file, Module, _, _, _, Code} = beam_disasm:file(code:which(Module)),
    [Instrs] = [I || {function, Name, Arity, _, I} <- Code, Name =:= F, Arity =:= A],
    [{M, G, N} || I <- Instrs, {extfunc, M, G, N} <- [ext(I)]].

ext({call_ext_only, _, E}) -> E;
ext({call_ext_last, _, E, _}) -> E;
ext({call_ext, _, E}) -> E;
ext(_) -> none.
