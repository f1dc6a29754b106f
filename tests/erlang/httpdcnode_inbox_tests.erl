%% The application's inbox against a real server and a real master: a
%% reply sent with httpdcnode:send/2 by the handler of a WebSocket's first
%% message reaches it, also when the message went the moment the socket
%% opened (the master hears of the uid before that message); an
%% application's send right after a stream opens arrives.
%%
%% Each trial takes a uid the master never heard of: a uid it knew would be
%% routed to its last C-node anyway (httpdcnode_presence, last seen).
-module(httpdcnode_inbox_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdcnode_inbox_lib, [ws_open/2, recv_frame/1, frame/1]).

-define(T, 10000).
-define(INBOX, httpdcnode_inbox).
-define(TRIALS, 50).

inbox_test_() ->
    {setup,
     fun() ->
             httpdcnode_inbox_lib:app_start(
               {?INBOX, send_back_handler, {?MODULE, node()}},
               ["--client-rate", "100000"], ?T)
     end,
     fun(#{master := M, server := S}) ->
             httpdcnode_test_lib:stop_server(S),
             httpdcnode_test_lib:stop_master(M)
     end,
     fun(Ctx = #{server := S}) ->
             Case = fun(Label, Fun) ->
                            {timeout, httpdcnode_test_lib:scaled(120),
                             {Label, fun() -> httpdcnode_test_lib:logged(
                                                S, fun(_) -> Fun(Ctx) end) end}}
                    end,
             [Case("a WebSocket's first message, sent the moment it opens: the handler's "
                   "send back reaches it, 50 times of 50", fun first_message/1),
              Case("an application's send right after a stream opens arrives, 50 times of 50",
                   fun send_after_open/1)]
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
