%% SPDX-License-Identifier: Apache-2.0
%% Top supervisor: the presence server, httpdcnode_outq (what the C-nodes
%% did not acknowledge) and the subscriptions' merger (httpdcnode_subs_heal)
%% are the long-lived processes; the API and pubsub modules run in their
%% callers. The supervisor owns the table of learned C-nodes, the last-seen
%% tables (see httpdcnode_presence) and httpdcnode_outq's. On a node of
%% role client (application env) it
%% supervises nothing: that node has no presence, its calls go to a master
%% (httpdcnode_client).
-module(httpdcnode_sup).
-behaviour(supervisor).

-export([start_link/0, init/1]).

start_link() ->
    supervisor:start_link({local, ?MODULE}, ?MODULE, []).

init([]) ->
    case httpdcnode_client:is_client() of
        true -> {ok, {#{strategy => one_for_one, intensity => 5, period => 10}, []}};
        false -> master()
    end.

master() ->
    %% C-nodes the presence server learned, kept here so that they outlive
    %% a crash of that server: its successor asks them for snapshots.
    ets:new(httpdcnode_presence_learned, [set, public, named_table]),
    %% Where offline uids were last: a restarted presence server still
    %% routes their messages.
    httpdcnode_presence:create_tables(public),
    %% When each other master went down: a restarted merger still knows
    %% since when the sides of a partition differ.
    httpdcnode_subs_heal:create_table(),
    %% What each C-node did not acknowledge yet: a restarted httpdcnode_outq
    %% still has it.
    httpdcnode_outq:create_tables(public),
    %% The inbox for what clients send (--inbox NAME), when configured;
    %% Opts #{workers => N} makes it a pool (httpdcnode_inbox).
    Inbox = case application:get_env(httpdcnode, inbox) of
                {ok, {Name, Module, Args}} -> [httpdcnode_inbox:child_spec(Name, Module, Args)];
                {ok, {Name, Module, Args, Opts}} ->
                    [httpdcnode_inbox:child_spec(Name, Module, Args, Opts)];
                undefined -> []
            end,
    %% httpdcnode_subs_heal merges the subscription copies after a partition
    %% between masters; httpdcnode_outq comes first: the presence server
    %% passes it each hello.
    {ok, {#{strategy => one_for_one, intensity => 5, period => 10},
          [worker(httpdcnode_outq), worker(httpdcnode_presence), worker(httpdcnode_subs_heal)
           | Inbox]}}.

worker(M) ->
    #{id => M, start => {M, start_link, []}, restart => permanent, shutdown => 5000,
      type => worker, modules => [M]}.
