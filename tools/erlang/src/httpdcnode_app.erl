%% SPDX-License-Identifier: Apache-2.0
%% Application callback: starts mnesia (with the bulk-load tuning below unless
%% configured otherwise), makes sure the subscription table exists, then the
%% supervision tree. A node of role client (httpdcnode_client) needs neither
%% mnesia nor presence: it starts an empty supervisor.
-module(httpdcnode_app).
-behaviour(application).

-export([start/2, stop/1, start_mnesia/0]).

%% Mnesia tuning for bulk loads of subscriptions: dump the transaction log
%% less often, and load disc tables from .DCD dumps more eagerly.
-define(MNESIA_DEFAULTS, [{dump_log_write_threshold, 50000},
                          {dc_dump_limit, 40}]).

start(_Type, _Args) ->
    case httpdcnode_client:is_client() of
        true -> httpdcnode_sup:start_link();
        false -> start_master()
    end.

start_master() ->
    ok = start_mnesia(),
    case httpdcnode_subs:ensure_table() of
        ok -> httpdcnode_sup:start_link();
        {error, Reason} -> {error, {subscription_table, Reason}}
    end.

stop(_State) ->
    ok.

%% Mnesia runs with RAM copies unless a disc schema exists in its dir
%% (mnesia:create_schema/1 before the first start gives disc_copies).
%% Values given with -mnesia on the command line or in sys.config win.
start_mnesia() ->
    case application:load(mnesia) of
        ok -> ok;
        {error, {already_loaded, mnesia}} -> ok
    end,
    [case application:get_env(mnesia, K) of
         undefined -> application:set_env(mnesia, K, V);
         {ok, _} -> ok
     end || {K, V} <- ?MNESIA_DEFAULTS],
    mnesia:start().
