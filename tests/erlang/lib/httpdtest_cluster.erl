%% SPDX-License-Identifier: Apache-2.0
%% Shared by the cluster test modules (cluster_tests, cluster_reliability_tests,
%% cluster_failure_tests, cluster_delivery_tests): masters started for a
%% set-up, the application started on a master node, the wait until a master
%% knows a set of C-nodes, and an EUnit case that prints the ends of the
%% cluster's logs when it fails.
-module(httpdtest_cluster).
-export([start_app/2, wait_known/3, test_case/5, start_masters/2]).

-import(httpdtest_master, [start_master/0, stop_master/1]).
-import(httpdtest_wait, [wait_until/3]).
-import(httpdtest_os, [log_tail/2]).

%% Starts N master nodes and returns Setup(Procs); they are stopped when
%% Setup fails.
start_masters(N, Setup) ->
    Procs = [start_master() || _ <- lists:seq(1, N)],
    try Setup(Procs)
    catch C:E:St ->
            [catch stop_master(P) || P <- Procs],
            erlang:raise(C, E, St)
    end.

%% Loads the application on Node (this build's beams, or those of
%% HTTPDTEST_APP_EBIN=DIR, to try an older application against the tests),
%% sets Env, starts it.
start_app(Node, Env) ->
    Ebin = case os:getenv("HTTPDTEST_APP_EBIN") of
               false -> filename:absname(filename:dirname(code:which(httpdcnode)));
               Dir -> filename:absname(Dir)
           end,
    true = erpc:call(Node, code, add_patha, [Ebin]),
    case erpc:call(Node, application, load, [httpdcnode]) of
        ok -> ok;
        {error, {already_loaded, httpdcnode}} -> ok
    end,
    [ok = erpc:call(Node, application, set_env, [httpdcnode, K, V]) || {K, V} <- Env],
    {ok, _} = erpc:call(Node, application, ensure_all_started, [httpdcnode], 30000),
    ok.

%% Until httpdcnode:nodes() on master MNode is Nodes (any order), at most Ms.
wait_known(MNode, Nodes, Ms) ->
    Want = lists:sort(Nodes),
    wait_until(fun() ->
                       case catch erpc:call(MNode, httpdcnode, nodes, [], 60000) of
                           Want -> true;
                           Other -> {false, Other}
                       end
               end, Ms, {known_cnodes, MNode, Want}).

%% The case Label: Run() within Timeout s. When it fails, the last 15 lines
%% of each log Logs() names are printed first; After() runs however it ends
%% (a test that failed half way leaves nothing open for the next one).
test_case(Label, Timeout, Run, Logs, After) ->
    {Label, {timeout, Timeout,
             fun() ->
                     try Run()
                     catch C:E:St ->
                             [io:format(user, "~n--- end of ~s ---~n~s~n",
                                        [Log, log_tail(Log, 15)]) || Log <- Logs()],
                             erlang:raise(C, E, St)
                     after
                         After()
                     end
             end}}.
