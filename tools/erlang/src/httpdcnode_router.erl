%% SPDX-License-Identifier: Apache-2.0
%% Pubsub publish: httpdcnode_router:send(Id, Msg) reaches Id and everyone subscribed to
%% Id who is online, with one Erlang message per C-node carrying the fan-out.
%% A subscriber offline for a moment gets it on resume, as with
%% httpdcnode:multicast_sync/2 (counted 0 in the reply). On a node of role
%% client (httpdcnode_client) the whole call runs on a master, where the
%% subscriptions are.
-module(httpdcnode_router).

-export([send/2, send/3, send_async/2, recipients/1]).

-define(TIMEOUT, 5000).
%% A client node calls its master by the name both this release and the one
%% before have (router, an alias here), so that either may run the master.
-define(ON_MASTER, router).

%% Returns {ok, NumDelivered}: the connections the C-nodes acknowledged
%% writing to (a user with two open streams counts twice; an offline
%% subscriber counts zero).
-spec send(term(), httpdcnode:msg()) -> {ok, non_neg_integer()}.
send(Id, Msg) ->
    send(Id, Msg, ?TIMEOUT).

send(Id, Msg, Timeout) ->
    case httpdcnode_client:is_client() of
        true -> httpdcnode_client:call(?ON_MASTER, send, [Id, Msg, Timeout], Timeout);
        false -> httpdcnode:multicast_sync(recipients(Id), Msg, Timeout)
    end.

%% Fire and forget: no acknowledgement, returns ok.
-spec send_async(term(), httpdcnode:msg()) -> ok.
send_async(Id, Msg) ->
    case httpdcnode_client:is_client() of
        true -> httpdcnode_client:cast(?ON_MASTER, send_async, [Id, Msg]);
        false -> httpdcnode:multicast(recipients(Id), Msg)
    end.

%% Id and its subscribers, each once, online or not.
-spec recipients(term()) -> [term()].
recipients(Id) ->
    lists:usort([Id | httpdcnode_subs:get_subscribers(Id)]).
