%% Pubsub publish: router:send(Id, Msg) reaches Id and everyone subscribed to
%% Id who is online, with one Erlang message per C-node carrying the fan-out.
-module(router).

-export([send/2, send/3, send_async/2, recipients/1]).

-define(TIMEOUT, 5000).

%% Returns {ok, NumDelivered}: the connections the C-nodes acknowledged
%% writing to (a user with two open streams counts twice; an offline
%% subscriber counts zero).
-spec send(term(), httpdcnode:msg()) -> {ok, non_neg_integer()}.
send(Id, Msg) ->
    send(Id, Msg, ?TIMEOUT).

send(Id, Msg, Timeout) ->
    httpdcnode:multicast_sync(recipients(Id), Msg, Timeout).

%% Fire and forget: no acknowledgement, returns ok.
-spec send_async(term(), httpdcnode:msg()) -> ok.
send_async(Id, Msg) ->
    httpdcnode:multicast(recipients(Id), Msg).

%% Id and its subscribers, each once, online or not.
-spec recipients(term()) -> [term()].
recipients(Id) ->
    lists:usort([Id | subsmanager:get_subscribers(Id)]).
