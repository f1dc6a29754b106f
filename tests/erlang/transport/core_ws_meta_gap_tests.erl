%% SPDX-License-Identifier: Apache-2.0
%% A gap a master tells ({httpdcnode_gap, Last, Uids} in its numbered stream)
%% reaches a live WebSocket client with ids (ws+meta.httpdcnode) at once,
%% whether or not the stream agreed permessage-deflate (--ws-deflate): both
%% see the message before, the gap, then the next message. A real C-node
%% with this node as its --master, raw sockets.
-module(core_ws_meta_gap_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [start_server/1, logged/2, send/2, wait_stat/4]).
-import(httpdtest_os, [scaled/1]).

-define(META, "Sec-WebSocket-Protocol: ws+meta.httpdcnode").
-define(OFFER, "Sec-WebSocket-Extensions: permessage-deflate").

gap_test_() ->
    {setup,
     fun() -> start_server(#{master => node(), extra_args => ["--ws-deflate"]}) end,
     fun httpdtest_server:stop_server/1,
     fun(S) ->
             [{"a master's gap told live to ws+meta streams, with and without deflate",
               {timeout, scaled(60), fun() -> logged(S, fun(_) -> live_gap(S) end) end}}]
     end}.

live_gap(S) ->
    Inc = erlang:system_time(microsecond),
    send(S, {httpdcnode_seq_base, node(), Inc, 0, core_ws_meta_gap_acks}),
    Deflate = open(S, 31, [?META, ?OFFER]),
    Plain = open(S, 32, [?META]),
    wait_stat(S, streams_open, fun(N) -> N >= 2 end, scaled(10000)),
    Seq = fun(N, Inner) -> send(S, {httpdcnode_seq, node(), Inc, N, Inner}) end,
    Seq(1, {[31, 32], <<"x">>}),
    Seq(2, {httpdcnode_gap, 3, [31, 32]}),
    Seq(4, {[31, 32], <<"y">>}),
    [?assertMatch({Sock, [{message, <<"x">>}, gap, {message, <<"y">>}]},
                  {Sock, [event(Sock) || _ <- [1, 2, 3]]})
     || Sock <- [Deflate, Plain]],
    [gen_tcp:close(Sock) || Sock <- [Deflate, Plain]].

open(S, Uid, Headers) ->
    element(1, httpdtest_raw:ws_upgrade(S, "/ws/" ++ integer_to_list(Uid), Headers)).

%% The next frame as a message or a gap (short frames: never compressed).
event(Sock) ->
    case httpdtest_raw:recv_frame(Sock) of
        {1, 1, <<"event: gap\n\n", _/binary>>} -> gap;
        {1, _, <<"id: ", Rest/binary>>} ->
            [_, Payload] = binary:split(Rest, <<"\n\n">>),
            {message, Payload}
    end.
