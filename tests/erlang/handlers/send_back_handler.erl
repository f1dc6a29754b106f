%% SPDX-License-Identifier: Apache-2.0
%% An httpdcnode_handler for the tests, run by the application's inbox: a
%% client message comes back to its uid through httpdcnode:send/2 (the
%% presence of the master routes it), as "back DATA"; "hold TAG" holds its
%% process until the test sends {release, TAG} (10 s at most), telling the
%% test (the name or pid init/1 got) {holding, Uid, TAG, Pid}; {Pid, Ref, handled} answers how many messages
%% this process handled.
-module(send_back_handler).
%% (-behaviour(httpdcnode_handler): not declared, the tests compile apart from the application.)

-export([init/1, handle_in/4, handle_info/2]).

init(Test) -> {ok, #{test => Test, handled => 0}}.

handle_in(Uid, _Conn, <<"hold ", Tag/binary>>, S = #{test := Test}) ->
    Test ! {holding, Uid, Tag, self()},
    receive {release, Tag} -> ok after 10000 -> ok end,
    handled(S);
handle_in(Uid, _Conn, Data, S) ->
    httpdcnode:send(Uid, <<"back ", Data/binary>>),
    handled(S).

handle_info({Pid, Ref, handled}, S = #{handled := N}) ->
    Pid ! {Ref, N},
    {ok, S};
handle_info(_, S) ->
    {ok, S}.

handled(S = #{handled := N}) -> {ok, S#{handled := N + 1}}.
