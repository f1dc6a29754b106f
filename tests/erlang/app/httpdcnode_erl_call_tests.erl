%% SPDX-License-Identifier: Apache-2.0
%% erl_call driving a real master that runs httpdcnode, with a real C-node
%% connected to it. erl_call is a hidden node that takes the first message
%% it gets for the answer it waits for: the presence server must not send
%% it a snapshot request when it starts, is resynced or restarts, and must
%% still find the C-node, which connected (and sent its snapshot to a name
%% nobody held) before the application started.
-module(httpdcnode_erl_call_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [logged/2, start_server/1, stop_server/1, node_of/1, wait_stat/4]).
-import(httpdtest_master, [start_master/0, master_node/1, stop_master/1, wait_master_sees/3]).
-import(httpdtest_http, [open_stream/2]).
-import(httpdtest_wait, [wait_until/3]).
-import(httpdtest_os, [cookie/0]).

-define(WAIT, 15000).
-define(UID, 77).

erl_call_test_() ->
    {setup, fun setup/0, fun cleanup/1,
     fun(Ctx = {_, S}) ->
             {timeout, 120,
              {"erl_call starts, resyncs and restarts presence; the C-node stays known",
               fun() -> logged(S, fun(_) -> erl_call_on_master(Ctx) end) end}}
     end}.

setup() ->
    M = start_master(),
    {M, start_server(#{master => master_node(M), presence => httpdcnode_presence})}.

cleanup({M, S}) ->
    stop_server(S),
    stop_master(M).

erl_call_on_master(Ctx = {M, S}) ->
    MNode = master_node(M),
    CNode = node_of(S),
    _C = open_stream(S, ?UID),
    wait_stat(S, uids_online, fun(N) -> N =:= 1 end, ?WAIT),
    wait_master_sees(M, CNode, ?WAIT),
    %% the master has the application's beams on its path, as with -pa
    Ebin = filename:absname(filename:dirname(code:which(httpdcnode))),
    true = erpc:call(MNode, code, add_patha, [Ebin]),

    Started = erl_call(Ctx, "application:ensure_all_started(httpdcnode)."),
    ?assertMatch({ok, {ok, _}}, Started),
    {ok, {ok, Apps}} = Started,
    ?assert(lists:member(httpdcnode, Apps)),
    wait_known(MNode, CNode),
    %% kept where it outlives the presence server
    ?assertEqual([{CNode}], erpc:call(MNode, ets, tab2list, [httpdcnode_presence_learned])),

    ?assertEqual({ok, ok}, erl_call(Ctx, "httpdcnode_presence:resync().")),
    wait_known(MNode, CNode),

    %% The restarted server asks for snapshots while erl_call still waits.
    Restart = "P = whereis(httpdcnode_presence), exit(P, kill),"
        " Wait = fun Loop(0) -> timeout;"
        "            Loop(K) -> case whereis(httpdcnode_presence) of"
        "                           Q when is_pid(Q), Q =/= P -> httpdcnode_presence:sync();"
        "                           _ -> receive after 10 -> Loop(K - 1) end"
        "                       end"
        "        end,"
        " Wait(1000).",
    ?assertEqual({ok, ok}, erl_call(Ctx, Restart)),
    %% the new server started empty: the uid comes back from a snapshot
    wait_known(MNode, CNode).

%% Runs `echo Expr | erl_call -sname Master -c Cookie -e` (bounded in
%% time): {ok, Value} when erl_call printed {ok, Value}, else {failed, Output}.
erl_call({M, S}, Expr) ->
    MNode = master_node(M),
    %% erl_call always connects as the same node: the last one must be gone
    Expected = [node(), node_of(S)],
    wait_until(fun() -> erpc:call(MNode, erlang, nodes, [hidden]) -- Expected =:= [] end,
               ?WAIT, erl_call_gone),
    Cmd = lists:flatten(io_lib:format("echo '~s' | timeout 60 ~s -sname ~s -c ~s -e 2>&1",
                                      [Expr, erl_call_exe(), MNode, cookie()])),
    Out = os:cmd(Cmd),
    case parse(Out) of
        {ok, {ok, Value}} -> {ok, Value};
        _ -> {failed, Out}
    end.

parse(Out) ->
    case erl_scan:string(Out ++ ".") of
        {ok, Tokens, _} ->
            case erl_parse:parse_term(Tokens) of
                {ok, Term} -> {ok, Term};
                Err -> Err
            end;
        Err -> Err
    end.

erl_call_exe() ->
    case os:find_executable("erl_call") of
        false ->
            case filelib:wildcard(filename:join([code:root_dir(), "lib", "erl_interface-*",
                                                 "bin", "erl_call"])) of
                [Exe | _] -> Exe;
                [] -> erlang:error("erl_call not found: install erl_interface (erlang-dev)")
            end;
        Exe -> Exe
    end.

wait_known(MNode, CNode) ->
    wait_until(fun() ->
                       case {erpc:call(MNode, httpdcnode, nodes, []),
                             erpc:call(MNode, httpdcnode, online, [?UID])} of
                           {[CNode], [CNode]} -> true;
                           Other -> {false, Other}
                       end
               end, ?WAIT, {known, CNode}).
