%% SPDX-License-Identifier: Apache-2.0
%% permessage-deflate (RFC 7692) on GET /ws/N with --ws-deflate: the
%% offers taken and declined, the answer (no context takeover either way);
%% a message compressed once for all its receivers (the same compressed
%% bytes on every stream, ws+meta's id ahead of them in a stored block),
%% short ones and replies sent plain; client messages compressed (whole,
%% fragmented, binary) inflated for the inbox; and hostile clients: a
%% decompression bomb, RSV1 where it may not be, data that is not deflate
%% or not UTF-8 once inflated, a client keeping its context. A topic's join
%% and leave sent compressed are read once inflated. The server runs
%% the example handler ws_echo as its inbox through the application, so
%% each message comes back to its connection (a reply: never compressed).
%% Raw sockets; compression on the test's side by Erlang's zlib.
-module(core_ws_deflate_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_raw, [take/2, frame/2, frame/3]).

-define(T, 10000).
-define(MAX, 65536).
-define(ARGS, ["--ws-deflate", "--max-client-message", integer_to_list(?MAX),
               "--client-rate", "1000", "--heartbeat", "0"]).
-define(RESPONSE, <<"permessage-deflate; server_no_context_takeover; client_no_context_takeover">>).
-define(OFFER, "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits").
-define(RSV1, 4).

deflate_test_() ->
    {setup, fun start/0, fun httpdtest_inbox:app_stop/1,
     fun(Ctx = #{server := S}) ->
             [{Label, {timeout, httpdtest_os:scaled(60),
                       fun() -> httpdtest_server:logged(S, fun(_) -> Case(Ctx) end) end}}
              || {Label, Case} <- cases()]
     end}.

start() -> httpdtest_inbox:app_start(ws_echo, ?ARGS, ?T).

cases() ->
    [{"negotiation: an offer taken is answered with no context takeover both ways; "
      "offers with a smaller server window, unknown or repeated parameters declined, the "
      "next one looked at", fun negotiation/1},
     {"a broadcast and a multicast compressed once for every receiver: the same "
      "compressed bytes on each stream (ws+meta's id in a stored block ahead), inflating "
      "to the message; short messages, replies and non-deflate streams plain", fun fan_out/1},
     {"client messages compressed: text, binary, fragmented (RSV1 on the first frame "
      "only), each compressed on its own, reach the inbox inflated", fun client_messages/1},
     {"a decompression bomb (1 MB of zeros in about 1 KB) is closed 1009 and counted; "
      "a message just at --max-client-message inflated passes", fun bomb/1},
     {"RSV1 on a control frame, on a continuation, without the extension agreed, RSV2: "
      "1002; data that is not deflate, inflated text that is not UTF-8, a message "
      "using the context of the one before: 1007", fun hostile/1},
     {"topics on --ws-deflate WebSockets: a join and a leave sent compressed are read "
      "inflated (the stream subscribed and unsubscribed, nothing passed to the inbox); a "
      "topic's messages come as whole frames, a ws+meta one told joined and with ids",
      fun compressed_join/1},
     {"without --ws-deflate: no extension agreed, RSV1 closes 1002", fun off/1}].

%%% ---------------------------------------------------------------- cases

negotiation(#{server := S}) ->
    ?assertEqual(?RESPONSE, extensions(S, [?OFFER])),
    ?assertEqual(?RESPONSE, extensions(S, ["Sec-WebSocket-Extensions: permessage-deflate"])),
    ?assertEqual(?RESPONSE, extensions(S, ["Sec-WebSocket-Extensions: permessage-deflate; "
                                           "server_no_context_takeover; "
                                           "client_max_window_bits=\"10\"; "
                                           "server_max_window_bits=15"])),
    %% The first acceptable of several offers, in one header or two.
    ?assertEqual(?RESPONSE, extensions(S, ["Sec-WebSocket-Extensions: x-webkit-deflate-frame, "
                                           "permessage-deflate; server_max_window_bits=10, "
                                           "permessage-deflate; client_no_context_takeover"])),
    ?assertEqual(?RESPONSE, extensions(S, ["Sec-WebSocket-Extensions: foo",
                                           "Sec-WebSocket-Extensions: permessage-deflate"])),
    [?assertEqual({Offer, undefined}, {Offer, extensions(S, ["Sec-WebSocket-Extensions: " ++ Offer])})
     || Offer <- ["permessage-deflate; server_max_window_bits=10",
                  "permessage-deflate; server_max_window_bits",
                  "permessage-deflate; client_max_window_bits=16",
                  "permessage-deflate; client_max_window_bits=7",
                  "permessage-deflate; server_no_context_takeover=1",
                  "permessage-deflate; mystery",
                  "permessage-deflate; client_no_context_takeover; client_no_context_takeover",
                  "x-webkit-deflate-frame"]],
    ?assertEqual(undefined, extensions(S, [])).

fan_out(#{server := S}) ->
    %% ws+meta and deflate on uids 11-13, deflate alone on 14, ws+meta
    %% alone on 15.
    Meta = "Sec-WebSocket-Protocol: ws+meta.httpdcnode",
    Socks = [{U, element(1, open(S, U, [?OFFER, Meta]))} || U <- [11, 12, 13]],
    {Plain, _} = open(S, 14, [?OFFER]),
    {NoDeflate, _} = open(S, 15, [Meta]),
    wait_open(S, 5),
    Text = iolist_to_binary([<<"line ", (integer_to_binary(I))/binary, " of the same text\n">>
                             || I <- lists:seq(1, 100)]),
    Before = httpdtest_server:stats(S),
    httpdtest_server:send(S, {broadcast, Text}),
    Got = [{U, recv(Sock)} || {U, Sock} <- Socks],
    Tails = [begin
                 {1, ?RSV1, 1, Payload} = F,
                 %% a stored block (BFINAL 0, type 00, LEN, NLEN) with the id
                 <<0, Len:16/little, NLen:16/little, Id:Len/binary, Tail/binary>> = Payload,
                 ?assertEqual(16#ffff, Len bxor NLen),
                 ?assertMatch(<<"id: ", _:8/binary, ":1\n\n">>, Id),
                 ?assertEqual(<<Id/binary, Text/binary>>, inflate(Payload)),
                 Tail
             end || {_, F} <- Got],
    ?assertMatch([_], lists:usort(Tails)),
    [Tail] = lists:usort(Tails),
    ?assert(byte_size(Tail) < byte_size(Text) div 4),
    ?assertEqual({1, ?RSV1, 1, Tail}, recv(Plain)),
    {1, 0, 1, <<"id: ", _:8/binary, ":1\n\n", Text/binary>>} = recv(NoDeflate),
    After = httpdtest_server:stats(S),
    ?assertEqual(1, delta(ws_deflated, Before, After)),
    ?assertEqual(byte_size(Text), delta(ws_deflate_in_bytes, Before, After)),
    ?assertEqual(byte_size(Tail), delta(ws_deflate_out_bytes, Before, After)),
    %% A multicast: once more, binary.
    Bin = binary:copy(<<0, 1, 2, 3, 255>>, 200),
    httpdtest_server:send(S, {[11, 12, 13, 14], {binary, Bin}}),
    [{1, ?RSV1, 2, P} | _] = Frames = [recv(Sock) || {_, Sock} <- Socks],
    ?assertMatch(<<_:5/binary, "id: ", _:8/binary, ":2\n\n", _/binary>>, P),
    [?assertMatch({_, Bin}, split_id(inflate(Pl))) || {1, ?RSV1, 2, Pl} <- Frames],
    {1, ?RSV1, 2, PlainBin} = recv(Plain),
    ?assertEqual(Bin, inflate(PlainBin)),
    ?assertEqual(2, delta(ws_deflated, Before, httpdtest_server:stats(S))),
    %% Short: plain (RSV1 clear), with its id.
    httpdtest_server:send(S, {11, <<"hi">>}),
    {1, 0, 1, <<"id: ", _:8/binary, ":3\n\nhi">>} = recv(element(2, hd(Socks))),
    %% A reply (the echo of what the client sent): plain however long.
    ok = gen_tcp:send(Plain, frame(1, Text)),
    ?assertEqual({1, 0, 1, Text}, recv(Plain)),
    ?assertEqual(2, delta(ws_deflated, Before, httpdtest_server:stats(S))),
    [gen_tcp:close(X) || X <- [Plain, NoDeflate | [Sk || {_, Sk} <- Socks]]].

client_messages(#{server := S}) ->
    {W, _} = open(S, 21, [?OFFER]),
    Before = httpdtest_server:stats(S),
    Text = binary:copy(<<"caf", 16#c3, 16#a9, " au lait, ">>, 300),
    ok = gen_tcp:send(W, frame(1, deflate(Text), #{rsv => ?RSV1})),
    ?assertEqual({1, 0, 1, Text}, recv(W)),
    Bin = binary:copy(<<255, 0, 7>>, 500),
    ok = gen_tcp:send(W, frame(2, deflate(Bin), #{rsv => ?RSV1})),
    ?assertEqual({1, 0, 2, Bin}, recv(W)),
    %% Fragmented: RSV1 on the first frame only; the UTF-8 of a character
    %% cut between them is checked once inflated.
    Z = deflate(Text),
    Half = byte_size(Z) div 2,
    <<Z1:Half/binary, Z2/binary>> = Z,
    ok = gen_tcp:send(W, [frame(1, Z1, #{rsv => ?RSV1, fin => 0}), frame(0, Z2)]),
    ?assertEqual({1, 0, 1, Text}, recv(W)),
    %% Plain messages on the same connection, and an empty compressed one.
    ok = gen_tcp:send(W, frame(1, <<"plain">>)),
    ?assertEqual({1, 0, 1, <<"plain">>}, recv(W)),
    ok = gen_tcp:send(W, frame(1, deflate(<<>>), #{rsv => ?RSV1})),
    ?assertEqual({1, 0, 1, <<>>}, recv(W)),
    ?assertEqual(4, delta(ws_inflated, Before, httpdtest_server:stats(S))),
    gen_tcp:close(W).

compressed_join(#{server := S, mnode := MNode}) ->
    Topic = <<"deflated.join">>,
    {M, <<"permessage-deflate", _/binary>>} =
        open(S, "/ws/32?topics=" ++ binary_to_list(Topic),
             [?OFFER, "Sec-WebSocket-Protocol: ws+meta.httpdcnode"]),
    {1, 0, 1, <<"event: joined\n\n{\"topic\":\"deflated.join\"", _/binary>>} = recv(M),
    {W, _} = open(S, 31, [?OFFER]),
    Count = fun() -> erpc:call(MNode, httpdcnode, topic_count, [Topic], ?T) end,
    Before = httpdtest_server:stats(S),
    ok = gen_tcp:send(W, frame(1, deflate(<<"event: join\n\n", Topic/binary>>), #{rsv => ?RSV1})),
    httpdtest_wait:wait_until(fun() -> Count() =:= 2 end, ?T, joined),
    {ok, 2} = erpc:call(MNode, httpdcnode, publish_sync, [Topic, <<"to the topic">>], ?T),
    ?assertEqual({1, 0, 1, <<"to the topic">>}, recv(W)),
    {1, 0, 1, <<"id: deflated.join@", MetaRest/binary>>} = recv(M),
    ?assertMatch([_, <<"to the topic">>], binary:split(MetaRest, <<"\n\n">>)),
    gen_tcp:close(M),
    ok = gen_tcp:send(W, frame(1, deflate(<<"event: leave\n\n", Topic/binary>>), #{rsv => ?RSV1})),
    httpdtest_server:wait_stat(S, topic_leaves,
                               fun(V) -> V > maps:get(topic_leaves, Before) end, ?T),
    After = httpdtest_server:stats(S),
    %% read as joins, not client messages: the inbox (an echo) got none
    ?assertEqual(0, delta(client_in, Before, After)),
    ?assertEqual(2, delta(ws_inflated, Before, After)),
    ?assertEqual(0, maps:get(topic_subscriptions, After)),
    gen_tcp:close(W).

bomb(#{server := S}) ->
    {W, _} = open(S, 31, [?OFFER]),
    Before = httpdtest_server:stats(S),
    Bomb = deflate(binary:copy(<<0>>, 1 bsl 20)),
    ?assert(byte_size(Bomb) < 2000),
    ok = gen_tcp:send(W, frame(2, Bomb, #{rsv => ?RSV1})),
    expect_close(W, 1009),
    After = httpdtest_server:stats(S),
    ?assertEqual(1, delta(ws_inflate_too_big, Before, After)),
    ?assertEqual(1, delta(ws_bad_frames, Before, After)),
    ?assertEqual(0, delta(ws_inflated, Before, After)),
    %% One just at the bound passes.
    {W2, _} = open(S, 32, [?OFFER]),
    Max = binary:copy(<<"a">>, ?MAX),
    ok = gen_tcp:send(W2, frame(1, deflate(Max), #{rsv => ?RSV1})),
    ?assertEqual({1, 0, 1, Max}, recv(W2)),
    ok = gen_tcp:send(W2, frame(1, deflate(<<Max/binary, "b">>), #{rsv => ?RSV1})),
    expect_close(W2, 1009),
    ?assertEqual(2, delta(ws_inflate_too_big, Before, httpdtest_server:stats(S))).

hostile(#{server := S}) ->
    Z = deflate(binary:copy(<<"x">>, 200)),
    Cases = [{"ping", [frame(9, <<"p">>, #{rsv => ?RSV1})], 1002},
             {"close", [frame(8, <<3, 232>>, #{rsv => ?RSV1})], 1002},
             {"continuation", [frame(1, Z, #{rsv => ?RSV1, fin => 0}),
                               frame(0, Z, #{rsv => ?RSV1})], 1002},
             {"rsv2", [frame(1, <<"x">>, #{rsv => 2})], 1002},
             {"rsv1+rsv2", [frame(1, Z, #{rsv => ?RSV1 bor 2})], 1002},
             {"not deflate", [frame(1, <<255, 255, 255, 255, 1, 2, 3>>, #{rsv => ?RSV1})], 1007},
             {"after a final block", [frame(1, <<(final(<<"ab">>))/binary, "zz">>, #{rsv => ?RSV1})], 1007},
             {"not UTF-8", [frame(1, deflate(<<"ok", 255, 254>>), #{rsv => ?RSV1})], 1007},
             {"over the compressed bound", [frame(2, binary:copy(<<0>>, ?MAX + ?MAX div 64 + 65),
                                                  #{rsv => ?RSV1})], 1009}],
    [begin
         {W, _} = open(S, 41, [?OFFER]),
         ok = gen_tcp:send(W, Frames),
         ?assertEqual({What, Code}, {What, close_code(W)})
     end || {What, Frames, Code} <- Cases],
    %% A client that keeps its context: its second message refers back
    %% into the first, which the server did not keep (it said
    %% client_no_context_takeover).
    {W, _} = open(S, 42, [?OFFER]),
    Text = binary:copy(<<"the same words again and again ">>, 20),
    [M1, M2] = deflate_keeping_context([Text, Text]),
    ok = gen_tcp:send(W, frame(1, M1, #{rsv => ?RSV1})),
    ?assertEqual({1, 0, 1, Text}, recv(W)),
    ok = gen_tcp:send(W, frame(1, M2, #{rsv => ?RSV1})),
    ?assertEqual(1007, close_code(W)),
    %% Without the offer, RSV1 is a protocol error.
    {P, undefined} = open(S, 43, []),
    ok = gen_tcp:send(P, frame(1, Z, #{rsv => ?RSV1})),
    ?assertEqual(1002, close_code(P)),
    %% and the server still serves.
    {Ok, _} = open(S, 44, [?OFFER]),
    ok = gen_tcp:send(Ok, frame(1, <<"still here">>)),
    ?assertEqual({1, 0, 1, <<"still here">>}, recv(Ok)),
    gen_tcp:close(Ok).

off(_) ->
    S = httpdtest_server:start_server(#{extra_args => ["--heartbeat", "0"]}),
    try
        {W, Ext} = open(S, 51, [?OFFER]),
        ?assertEqual(undefined, Ext),
        ok = gen_tcp:send(W, frame(1, deflate(<<"hello hello hello">>), #{rsv => ?RSV1})),
        ?assertEqual(1002, close_code(W)),
        ?assertMatch(#{ws_bad_frames := 1, ws_inflated := 0}, httpdtest_server:stats(S))
    after
        httpdtest_server:stop_server(S)
    end.

%%% ---------------------------------------------------------------- helpers

%% GET /ws/Uid with Headers: {Sock, its Sec-WebSocket-Extensions or undefined}.
open(S, Uid, Headers) when is_integer(Uid) ->
    open(S, "/ws/" ++ integer_to_list(Uid), Headers);
open(S, Path, Headers) ->
    {Sock, Head} = httpdtest_raw:ws_upgrade(S, Path, Headers),
    Ext = [V || L <- tl(binary:split(Head, <<"\r\n">>, [global])),
                [K, V] <- [binary:split(L, <<": ">>)],
                string:lowercase(K) =:= <<"sec-websocket-extensions">>],
    {Sock, case Ext of [E] -> E; [] -> undefined end}.

extensions(S, Headers) ->
    {Sock, Ext} = open(S, 1, Headers),
    gen_tcp:close(Sock),
    Ext.

%% The next server frame {Fin, Rsv, Opcode, Payload}; never masked.
recv(Sock) ->
    <<Fin:1, Rsv:3, Op:4, 0:1, Len0:7>> = take(Sock, 2),
    Len = case Len0 of
              126 -> <<L:16>> = take(Sock, 2), L;
              127 -> <<L:64>> = take(Sock, 8), L;
              _ -> Len0
          end,
    {Fin, Rsv, Op, take(Sock, Len)}.

%% The close the server sends (after any frames before it), then the end.
close_code(Sock) ->
    case recv(Sock) of
        {1, 0, 8, <<Code:16, _/binary>>} ->
            ?assertEqual({error, closed}, gen_tcp:recv(Sock, 0, ?T)),
            Code;
        {_, _, 8, _} = F -> erlang:error({bad_close, F});
        _ -> close_code(Sock)
    end.

expect_close(Sock, Code) -> ?assertEqual(Code, close_code(Sock)).

wait_open(S, N) ->
    httpdtest_server:wait_stat(S, streams_open, fun(V) -> V >= N end, ?T).

delta(K, Before, After) -> maps:get(K, After) - maps:get(K, Before).

split_id(B) ->
    [Id, Rest] = binary:split(B, <<"\n\n">>),
    {Id, Rest}.

%% A message as a client compresses it with no context takeover: raw
%% deflate, a sync flush, its 00 00 ff ff taken off (RFC 7692 7.2.1).
deflate(Data) -> hd(deflate_keeping_context([Data])).

%% Several messages through one deflater (the context kept between them).
deflate_keeping_context(Msgs) ->
    Z = zlib:open(),
    ok = zlib:deflateInit(Z, default, deflated, -15, 8, default),
    Out = [begin
               B = iolist_to_binary(zlib:deflate(Z, M, sync)),
               Size = byte_size(B) - 4,
               <<Body:Size/binary, 0, 0, 255, 255>> = B,
               Body
           end || M <- Msgs],
    zlib:close(Z),
    Out.

%% Data in one final block (BFINAL set): a whole deflate stream.
final(Data) ->
    Z = zlib:open(),
    ok = zlib:deflateInit(Z, default, deflated, -15, 8, default),
    B = iolist_to_binary(zlib:deflate(Z, Data, finish)),
    zlib:close(Z),
    B.

inflate(Payload) ->
    Z = zlib:open(),
    ok = zlib:inflateInit(Z, -15),
    Out = iolist_to_binary(zlib:inflate(Z, <<Payload/binary, 0, 0, 255, 255>>)),
    zlib:close(Z),
    Out.
