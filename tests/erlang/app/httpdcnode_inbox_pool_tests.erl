%% SPDX-License-Identifier: Apache-2.0
%% The application's inbox against a real server and a real master: a
%% reply sent with httpdcnode:send/2 by the handler of a WebSocket's first
%% message reaches it, also when the message went the moment the socket
%% opened (the master hears of the uid before that message); an
%% application's send right after a stream opens arrives; the pool
%% (workers => N) keeps each uid's messages in order, lets the others go
%% on while one uid's handler is held, and answers for all its workers.
%%
%% Each trial takes a uid the master never heard of: a uid it knew would be
%% routed to its last C-node anyway (httpdcnode_presence, last seen).
-module(httpdcnode_inbox_pool_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_inbox, [ws_open/2, recv_frame/1, frame/1]).

-define(T, 10000).
-define(INBOX, httpdcnode_inbox).
-define(TRIALS, 50).
-define(WORKERS, 4).

inbox_test_() ->
    {setup,
     fun() ->
             httpdtest_inbox:app_start(
               {?INBOX, send_back_handler, {?MODULE, node()}, #{workers => ?WORKERS}},
               ["--client-rate", "100000"], ?T)
     end,
     fun(#{master := M, server := S}) ->
             httpdtest_server:stop_server(S),
             httpdtest_master:stop_master(M)
     end,
     fun(Ctx = #{server := S}) ->
             Case = fun(Label, Fun) ->
                            {timeout, httpdtest_os:scaled(120),
                             {Label, fun() -> httpdtest_server:logged(
                                                S, fun(_) -> Fun(Ctx) end) end}}
                    end,
             [Case("a WebSocket's first message, sent the moment it opens: the handler's "
                   "send back reaches it, 50 times of 50", fun first_message/1),
              Case("an application's send right after a stream opens arrives, 50 times of 50",
                   fun send_after_open/1),
              Case("pool: one uid's messages in order; another uid goes on while one "
                   "uid's handler is held; workers/1 and handle_info reach every worker",
                   fun pool/1)]
     end}.

m(Node, Mod, F, A) -> erpc:call(Node, Mod, F, A, 30000).

dropped_offline(MNode) ->
    maps:get(dropped_offline, m(MNode, httpdcnode, app_stats, [])).

%% Uids 1000 + 1..N, first used here.
first_message(#{server := S, mnode := MNode}) ->
    D0 = dropped_offline(MNode),
    trials(1001, fun(Uid) ->
                         W = ws_open(S, Uid),
                         ok = gen_tcp:send(W, frame(<<"hi">>)),
                         {W, <<"back hi">>}
                 end),
    ?assertEqual(D0, dropped_offline(MNode)).

%% Uids 2000 + 1..N: the 101 read, then httpdcnode:send/2 on the master.
send_after_open(#{server := S, mnode := MNode}) ->
    D0 = dropped_offline(MNode),
    trials(2001, fun(Uid) ->
                         W = ws_open(S, Uid),
                         ok = m(MNode, httpdcnode, send, [Uid, <<"at once">>]),
                         {W, <<"at once">>}
                 end),
    ?assertEqual(D0, dropped_offline(MNode)).

%% ?TRIALS of Trial(Uid) -> {Socket, Want} with uids From, From + 1, ...:
%% each socket's next frame is Want; the first that is not ends the test.
trials(From, Trial) ->
    lists:foreach(fun(I) ->
                          Uid = From + I - 1,
                          {W, Want} = Trial(Uid),
                          Got = next_text(W),
                          gen_tcp:close(W),
                          Got =:= Want orelse
                              erlang:error({lost, {uid, Uid}, {trial, I}, {got, Got}})
                  end, lists:seq(1, ?TRIALS)).

%% The next text frame's payload, or timeout.
next_text(W) ->
    try recv_frame(W) of
        {1, 1, Payload} -> Payload;
        Other -> {unexpected, Other}
    catch error:{recv, {error, timeout}, _, _} -> timeout
    end.

pool(#{server := S, mnode := MNode}) ->
    register(?MODULE, self()),              % where the handler tells of a hold
    {ok, Workers} = httpdcnode_inbox:workers({?INBOX, MNode}),
    ?assertEqual(?WORKERS, length(lists:usort(Workers))),
    %% Two uids handled by two workers (the pool picks by uid).
    [A, B | _] = uids_of_distinct_workers(3001, ?WORKERS),
    WA = ws_open(S, A),
    WB = ws_open(S, B),
    %% A's worker held: B is answered meanwhile.
    ok = gen_tcp:send(WA, frame(<<"hold a">>)),
    Held = receive {holding, A, <<"a">>, P} -> P after ?T -> erlang:error(not_holding) end,
    ok = gen_tcp:send(WB, frame(<<"while a waits">>)),
    ?assertEqual(<<"back while a waits">>, next_text(WB)),
    ok = gen_tcp:send(WA, frame(<<"after the hold">>)),
    Held ! {release, <<"a">>},
    ?assertEqual(<<"back after the hold">>, next_text(WA)),
    %% One uid's 300 messages, sent at once, come back in their order.
    N = 300,
    ok = gen_tcp:send(WA, [frame(integer_to_binary(I)) || I <- lists:seq(1, N)]),
    ?assertEqual([<<"back ", (integer_to_binary(I))/binary>> || I <- lists:seq(1, N)],
                 [next_text(WA) || _ <- lists:seq(1, N)]),
    [gen_tcp:close(W) || W <- [WA, WB]],
    %% Anything else sent to the name reaches every worker's handle_info:
    %% their counts add up to every message handled here.
    Handled = lists:sum([begin
                             Ref = make_ref(),
                             W ! {self(), Ref, handled},
                             receive {Ref, K} -> K after ?T -> erlang:error(no_count) end
                         end || W <- Workers]),
    ?assertEqual(?TRIALS + 3 + N, Handled).

%% Uids from From on, one for each worker: the first uid each worker takes.
uids_of_distinct_workers(From, N) ->
    uids_of_distinct_workers(From, N, #{}).

uids_of_distinct_workers(_U, N, Seen) when map_size(Seen) =:= N ->
    [U || {_, U} <- lists:keysort(2, maps:to_list(Seen))];
uids_of_distinct_workers(U, N, Seen) ->
    K = erlang:phash2(U, N),
    uids_of_distinct_workers(U + 1, N, case Seen of #{K := _} -> Seen; _ -> Seen#{K => U} end).

