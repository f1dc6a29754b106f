%% SPDX-License-Identifier: Apache-2.0
%% WebSocket conformance (RFC 6455) of GET /ws/N, grouped as the RFC is:
%% the opening handshake (4.1, 4.2), framing (5.2), fragmentation (5.4),
%% pings and pongs (5.5.2, 5.5.3), the close handshake and its codes
%% (5.5.1, 7.4), UTF-8 (5.6, 8.1) and our limits (10.4), after the cases of
%% the Autobahn|Testsuite. The server
%% runs the example handler ws_echo (examples/erlang) as its inbox
%% through the application, as `make ws-echo` does for an outside suite,
%% so each message comes back to its connection. Raw sockets: each case
%% asserts the exact frames the server sends (never masked, no RSV bit, its
%% length in the shortest form: httpdtest_raw:recv_frame/1) and, when it
%% fails the connection, its close code and then the end of the TCP stream.
%% One server for all; each case on connections of its own.
-module(ws_conformance_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_raw, [recv_frame/1, frame/2, frame/3, mask/2]).

-define(T, 10000).
%% --max-client-message: the 64-bit length's smallest size, 65536, fits.
-define(MAX, 65536).
-define(ARGS, ["--max-client-message", integer_to_list(?MAX), "--client-rate", "1000",
               "--heartbeat", "0"]).

%% Close codes (7.4.1).
-define(PROTOCOL, 1002).
-define(INVALID_DATA, 1007).
-define(POLICY, 1008).
-define(TOO_BIG, 1009).


conformance_test_() ->
    {setup, fun start/0, fun stop/1,
     fun(Ctx = #{server := S}) ->
             Run = fun(Case) -> httpdtest_server:logged(S, fun(_) -> Case(Ctx) end) end,
             [{Group, [{Label, {timeout, httpdtest_os:scaled(60), fun() -> Run(Case) end}}
                       || {Label, Case} <- Cases]}
              || {Group, Cases} <- groups()]
     end}.

start() -> httpdtest_inbox:app_start(ws_echo, ?ARGS, ?T).

stop(#{master := M, server := S}) ->
    httpdtest_server:stop_server(S),
    httpdtest_master:stop_master(M).

groups() ->
    [{"opening handshake (RFC 6455 4.1, 4.2)", handshake()},
     {"framing (5.2)", framing()},
     {"fragmentation (5.4)", fragmentation()},
     {"pings and pongs (5.5.2, 5.5.3)", pings()},
     {"close (5.5.1, 7.4)", close()},
     {"UTF-8 (5.6, 8.1)", utf8()},
     {"limits (10.4)", limits()}]
        ++ [{"reply kinds: empty messages, binary of valid UTF-8", reply_kinds()}]
        ++ [{"after all", [{"every connection ended, the server still serving",
                            fun all_ended/1}]}].

%%% ---------------------------------------------------------------- handshake

-define(KEY, "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==").

handshake() ->
    [{"an upgrade over HTTP/1.0, an upgrade without Host: 400, counted in ws_refused",
      fun(C = #{server := S}) ->
              #{ws_refused := R0} = httpdtest_server:stats(S),
              Upgrade = ["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13",
                         ?KEY],
              ?assertMatch(#{status := 400}, request(C, httpdtest_http:request_bytes(
                                                           "GET", "/ws/1", "HTTP/1.0", Upgrade))),
              ?assertMatch(#{status := 400},
                           request(C, iolist_to_binary(["GET /ws/1 HTTP/1.1\r\n",
                                                        [[H, "\r\n"] || H <- Upgrade], "\r\n"]))),
              ?assertMatch(#{ws_refused := R} when R =:= R0 + 2, httpdtest_server:stats(S))
      end},
     {"Upgrade and Connection as browsers send them (any case, Connection a list), a "
      "subprotocol the server does not speak: 101 without Sec-WebSocket-Protocol, then echoes",
      fun(#{server := S}) ->
              {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, httpdtest_server:port_of(S),
                                           [binary, {active, false}]),
              ok = gen_tcp:send(Sock, httpdtest_http:request_bytes(
                                        "GET", "/ws/1", "HTTP/1.1",
                                        ["Upgrade: WebSocket", "Connection: keep-alive, Upgrade",
                                         "Sec-WebSocket-Version: 13", ?KEY,
                                         "Sec-WebSocket-Protocol: chat, superchat"])),
              {Head, Rest} = httpdtest_inbox:split_recv(Sock, <<"\r\n\r\n">>, <<>>),
              ?assertMatch(<<"HTTP/1.1 101 ", _/binary>>, Head),
              ?assertEqual(nomatch, binary:match(Head, <<"Sec-WebSocket-Protocol">>)),
              put({buf, Sock}, Rest),
              ok = gen_tcp:send(Sock, frame(1, <<"hello">>)),
              ?assertEqual({1, 1, <<"hello">>}, recv_frame(Sock)),
              gen_tcp:close(Sock)
      end}].

%%% ---------------------------------------------------------------- framing

framing() ->
    [{"text of 1, 125, 126, 65535 and 65536 bytes (7, 16 and 64-bit lengths): echoed as "
      "one text frame each",
      fun(C) -> [echo(C, 1, text(N)) || N <- [1, 125, 126, 65535, ?MAX]] end},
     {"binary of 1, 125, 126, 65535 and 65536 bytes, not UTF-8: echoed as binary",
      fun(C) -> [echo(C, 2, bin(N)) || N <- [1, 125, 126, 65535, ?MAX]] end},
     {"a frame a byte at a time (header and payload in 9 reads): echoed",
      fun(C) -> talk(C, [{bytewise, frame(1, <<"slowly">>)}, {recv, {1, 1, <<"slowly">>}}]) end},
     {"an unmasked text, binary, ping or close: 1002",
      fun(C) -> [fails(C, frame(Op, P, #{mask => false}), ?PROTOCOL)
                 || {Op, P} <- [{1, <<"text">>}, {2, <<0, 255>>}, {9, <<>>}, {8, <<1000:16>>}]]
      end},
     {"RSV bits 1 to 7 on a text; on a binary, a ping, a close: 1002",
      fun(C) ->
              [fails(C, frame(1, <<"rsv">>, #{rsv => R}), ?PROTOCOL) || R <- lists:seq(1, 7)],
              [fails(C, frame(Op, P, #{rsv => R}), ?PROTOCOL)
               || {Op, P, R} <- [{2, <<0, 255>>, 5}, {9, <<"p">>, 6}, {8, <<1000:16>>, 7}]]
      end},
     {"a text echoed, then one with RSV 2 and a ping: 1002 and no pong",
      fun(C) ->
              talk(C, [{send, frame(1, <<"first">>)}, {recv, {1, 1, <<"first">>}},
                       {send, [frame(1, <<"second">>, #{rsv => 2}), frame(9, <<"p">>)]},
                       {closed, ?PROTOCOL}])
      end},
     {"reserved opcodes 3-7 (data) and 11-15 (control), with and without payload: 1002",
      fun(C) -> [fails(C, frame(Op, P), ?PROTOCOL)
                 || Op <- [3, 4, 5, 6, 7, 11, 12, 13, 14, 15], P <- [<<>>, <<"reserved">>]]
      end},
     {"a reserved opcode after a text echoed: 1002",
      fun(C) ->
              talk(C, [{send, frame(1, <<"fine">>)}, {recv, {1, 1, <<"fine">>}},
                       {send, frame(5, <<"reserved">>)}, {closed, ?PROTOCOL}])
      end},
     {"lengths not in their shortest form (16 bits for 125, 64 for 65535), a 64-bit length "
      "with its top bit set: 1002",
      fun(C) ->
              fails(C, header(1, <<126:7, 125:16>>, text(125)), ?PROTOCOL),
              fails(C, header(2, <<127:7, 65535:64>>, bin(65535)), ?PROTOCOL),
              fails(C, header(2, <<127:7, (1 bsl 63 + 1):64>>, <<0>>), ?PROTOCOL)
      end}].

%%% ---------------------------------------------------------------- fragmentation

fragmentation() ->
    [{"a text in 2 fragments, a binary in 3: one message each",
      fun(C) ->
              talk(C, [{send, fragments(1, [<<"Hello, ">>, <<"world">>])},
                       {recv, {1, 1, <<"Hello, world">>}},
                       {send, fragments(2, [<<0>>, <<255, 254>>, <<1, 2, 3>>])},
                       {recv, {1, 2, <<0, 255, 254, 1, 2, 3>>}}])
      end},
     {"a text in 10 fragments, each in a send of its own: one message",
      fun(C) ->
              Parts = [<<"fragment ", (integer_to_binary(I))/binary, ";">>
                       || I <- lists:seq(1, 10)],
              talk(C, [{send, F} || F <- fragments(1, Parts)]
                       ++ [{recv, {1, 1, iolist_to_binary(Parts)}}])
      end},
     {"empty fragments first, between and last: the message of the others",
      fun(C) ->
              talk(C, [{send, fragments(1, [<<>>, <<"ab">>, <<>>, <<"cd">>, <<>>])},
                       {recv, {1, 1, <<"abcd">>}}])
      end},
     {"a ping between fragments, the pong awaited: pong with its payload, then the message",
      fun(C) ->
              talk(C, [{send, frame(1, <<"frag">>, #{fin => 0})},
                       {send, frame(9, <<"ping payload">>)}, {recv, {1, 10, <<"ping payload">>}},
                       {send, frame(0, <<"ment">>)}, {recv, {1, 1, <<"fragment">>}}])
      end},
     {"a ping between fragments, all in one send: the pong first, then the message",
      fun(C) ->
              talk(C, [{send, [frame(2, <<1, 2>>, #{fin => 0}), frame(9, <<"p">>),
                               frame(0, <<3, 255>>)]},
                       {recv, {1, 10, <<"p">>}}, {recv, {1, 2, <<1, 2, 3, 255>>}}])
      end},
     {"pongs (unsolicited) between fragments: ignored, the message whole",
      fun(C) ->
              talk(C, [{send, [frame(1, <<"a">>, #{fin => 0}), frame(10, <<>>),
                               frame(0, <<"b">>, #{fin => 0}), frame(10, <<"pong">>),
                               frame(0, <<"c">>)]},
                       {recv, {1, 1, <<"abc">>}}])
      end},
     {"a close between fragments: answered, the unfinished message dropped",
      fun(C) -> fails(C, [frame(1, <<"never ">>, #{fin => 0}), frame(8, <<1000:16>>)], 1000) end},
     {"a continuation with nothing to continue (final or not, first frame or after a "
      "message): 1002",
      fun(C) ->
              fails(C, frame(0, <<"nothing">>), ?PROTOCOL),
              fails(C, frame(0, <<"nothing">>, #{fin => 0}), ?PROTOCOL),
              talk(C, [{send, frame(1, <<"done">>)}, {recv, {1, 1, <<"done">>}},
                       {send, frame(0, <<"more">>)}, {closed, ?PROTOCOL}])
      end},
     {"a new text or binary before the fragmented message is finished: 1002",
      fun(C) ->
              [fails(C, [frame(First, <<"a">>, #{fin => 0}), frame(Next, <<"b">>)], ?PROTOCOL)
               || First <- [1, 2], Next <- [1, 2]]
      end},
     {"a fragmented ping, pong or close (FIN clear), alone or within a message: 1002",
      fun(C) ->
              [fails(C, frame(Op, P, #{fin => 0}), ?PROTOCOL)
               || {Op, P} <- [{9, <<"p">>}, {10, <<"p">>}, {8, <<1000:16>>}]],
              fails(C, [frame(1, <<"a">>, #{fin => 0}), frame(9, <<"p">>, #{fin => 0})],
                    ?PROTOCOL)
      end}].

%%% ---------------------------------------------------------------- pings

pings() ->
    [{"a ping with no payload, 125 bytes, every byte value: pong with the same payload",
      fun(C) ->
              talk(C, lists:append([[{send, frame(9, P)}, {recv, {1, 10, P}}]
                                    || P <- [<<>>, binary:copy(<<"*">>, 125),
                                             list_to_binary(lists:seq(0, 124)),
                                             list_to_binary(lists:seq(131, 255))]]))
      end},
     {"ten pings one after the other, each awaited: ten pongs in order",
      fun(C) ->
              talk(C, lists:append([[{send, frame(9, P)}, {recv, {1, 10, P}}]
                                    || I <- lists:seq(1, 10),
                                       P <- [<<"ping ", (integer_to_binary(I))/binary>>]]))
      end},
     {"a ping whose frame comes in two sends: one pong",
      fun(C) ->
              <<A:7/binary, B/binary>> = frame(9, <<"in two parts">>),
              talk(C, [nodelay, {send, A}, sync, {send, B},
                       {recv, {1, 10, <<"in two parts">>}}])
      end},
     {"unsolicited pongs, empty and with a payload: nothing answered, the next text echoed",
      fun(C) ->
              talk(C, [{send, [frame(10, <<>>), frame(10, <<"unasked">>),
                               frame(1, <<"after the pongs">>)]},
                       {recv, {1, 1, <<"after the pongs">>}}])
      end},
     {"a ping of 126 bytes (declared with the 16-bit length): 1002, no pong",
      fun(C) -> fails(C, frame(9, binary:copy(<<"p">>, 126)), ?PROTOCOL) end},
     {"a ping, then a close, in one send: the pong, then the close answered",
      fun(C) ->
              talk(C, [{send, [frame(9, <<"before">>), frame(8, <<1000:16>>)]},
                       {recv, {1, 10, <<"before">>}}, {closed, 1000}])
      end},
     {"a close, then a ping: the close answered, no pong",
      fun(C) -> fails(C, [frame(8, <<1000:16>>), frame(9, <<"too late">>)], 1000) end}].

%%% ---------------------------------------------------------------- close

close() ->
    [{"an empty close: answered with an empty close, then the TCP stream ends",
      fun(C) -> talk(C, [{send, frame(8, <<>>)}, {recv, {1, 8, <<>>}}, ended]) end},
     {"valid codes (1000-1003, 1007-1014, 3000, 3999, 4000, 4999), with and without a "
      "reason: the code echoed",
      fun(C) -> [closes(C, <<Code:16, Reason/binary>>, Code)
                 || Code <- [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012,
                             1013, 1014, 3000, 3999, 4000, 4999],
                    Reason <- [<<>>, <<"a reason, κόσμε"/utf8>>]]
      end},
     {"a close of 125 bytes (a code and 123 bytes of reason): the code echoed",
      fun(C) -> closes(C, <<1000:16, (text(123))/binary>>, 1000) end},
     {"codes no endpoint may send (0, 999, 1004-1006, 1015, 1016, 1100, 2000, 2999, 5000, "
      "65535): 1002",
      fun(C) -> [closes(C, <<Code:16>>, ?PROTOCOL)
                 || Code <- [0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000,
                             65535]]
      end},
     {"a close of 1 byte: 1002",
      fun(C) -> closes(C, <<3>>, ?PROTOCOL) end},
     {"a close of 126 bytes: 1002",
      fun(C) -> closes(C, <<1000:16, (text(124))/binary>>, ?PROTOCOL) end},
     {"a close whose reason is not UTF-8: 1007",
      fun(C) ->
              [closes(C, <<1000:16, R/binary>>, ?INVALID_DATA)
               || R <- [<<"κόσμε"/utf8, 16#ed, 16#a0, 16#80, "edited">>, <<255>>,
                        <<"caf", 16#c3>>]]
      end},
     {"a text after the close: the close answered, nothing echoed",
      fun(C) -> fails(C, [frame(8, <<1000:16>>), frame(1, <<"too late">>)], 1000) end},
     {"a text echoed, then a close: answered after the echo",
      fun(C) ->
              talk(C, [{send, frame(1, <<"last words">>)}, {recv, {1, 1, <<"last words">>}},
                       {send, frame(8, <<1001:16>>)}, {closed, 1001}])
      end}].

%%% ---------------------------------------------------------------- UTF-8

%% Valid multi-byte texts: Autobahn's, and the first, last and other
%% boundary code points of each length (Markus Kuhn's UTF-8 test, 2.1-2.3).
valid_texts() ->
    [<<"Hello-µ@ßöäüàá-UTF-8!!"/utf8>>, <<"κόσμε"/utf8>>,
     <<0>>, <<16#c2, 16#80>>, <<16#e0, 16#a0, 16#80>>, <<16#f0, 16#90, 16#80, 16#80>>,
     <<16#7f>>, <<16#df, 16#bf>>, <<16#ef, 16#bf, 16#bf>>, <<16#f4, 16#8f, 16#bf, 16#bf>>,
     <<16#ed, 16#9f, 16#bf>>, <<16#ee, 16#80, 16#80>>, <<16#ef, 16#bf, 16#bd>>].

%% Not UTF-8 (Kuhn 3-5): lone and unexpected continuation bytes, sequences
%% cut short or broken by an ASCII byte, impossible bytes, overlong forms,
%% surrogates (alone and paired), code points past U+10FFFF.
invalid_texts() ->
    [<<16#80>>, <<16#bf>>, <<"κόσμε"/utf8, 16#80>>, <<16#80, 16#bf, 16#80>>,
     <<16#ce>>, <<16#e0, 16#a0>>, <<16#f0, 16#90, 16#80>>, <<"κόσμ"/utf8, 16#ce>>,
     <<16#c2, $A>>, <<16#e1, 16#80, $A>>, <<16#f1, 16#80, 16#80, $A>>,
     <<16#fe>>, <<16#ff>>, <<16#fe, 16#fe, 16#ff, 16#ff>>,
     <<16#c0, 16#af>>, <<16#c1, 16#bf>>, <<16#e0, 16#80, 16#af>>, <<16#e0, 16#9f, 16#bf>>,
     <<16#f0, 16#80, 16#80, 16#af>>, <<16#f0, 16#8f, 16#bf, 16#bf>>,
     <<16#f8, 16#88, 16#80, 16#80, 16#80>>, <<16#fc, 16#84, 16#80, 16#80, 16#80, 16#80>>,
     <<16#ed, 16#a0, 16#80>>, <<16#ed, 16#ad, 16#bf>>, <<16#ed, 16#b0, 16#80>>,
     <<16#ed, 16#bf, 16#bf>>, <<16#ed, 16#a0, 16#80, 16#ed, 16#b0, 16#80>>,
     <<16#f4, 16#90, 16#80, 16#80>>, <<16#f5, 16#80, 16#80, 16#80>>,
     <<16#f7, 16#bf, 16#bf, 16#bf>>].

%% Bytes to split at every position: code points of 1 to 4 bytes.
-define(SPLIT, <<"κόσμε-"/utf8, 16#f0, 16#90, 16#80, 16#80, 16#f4, 16#8f, 16#bf, 16#bf,
                 "€"/utf8, 16#c2, 16#80>>).

utf8() ->
    [{"valid texts (multi-byte, the boundary code points of each length): echoed as text",
      fun(C) ->
              talk(C, lists:append([[{send, frame(1, T)}, {recv, {1, 1, T}}]
                                    || T <- valid_texts()]))
      end},
     {"valid text split in two fragments at every byte position: echoed whole",
      fun(C) ->
              talk(C, lists:append([[{send, fragments(1, [A, B])}, {recv, {1, 1, ?SPLIT}}]
                                    || I <- lists:seq(1, byte_size(?SPLIT) - 1),
                                       <<A:I/binary, B/binary>> <- [?SPLIT]]))
      end},
     {"valid text in fragments of one byte, and a frame's payload a byte a send: echoed whole",
      fun(C) ->
              talk(C, [{send, fragments(1, [<<B>> || <<B>> <= ?SPLIT])}, {recv, {1, 1, ?SPLIT}},
                       {bytewise, frame(1, ?SPLIT)}, {recv, {1, 1, ?SPLIT}}])
      end},
     {"not UTF-8 (unexpected continuations, cut short, impossible bytes, overlong, "
      "surrogates, past U+10FFFF), in one frame: 1007",
      fun(C) -> [fails(C, frame(1, T), ?INVALID_DATA) || T <- invalid_texts()] end},
     {"the same within a fragmented text (valid first fragment, the bad bytes then the "
      "rest after): 1007",
      fun(C) ->
              [fails(C, fragments(1, [<<"ok ">>, T, <<" rest">>]), ?INVALID_DATA)
               || T <- invalid_texts()]
      end},
     {"binary messages are not UTF-8-checked: echoed as binary",
      fun(C) -> [echo(C, 2, <<0, B/binary>>) || B <- invalid_texts()] end},
     {"fail fast: the first fragment is bad, no other sent: 1007 at once",
      fun(C) ->
              fails(C, frame(1, <<"κόσμε"/utf8, 16#ed, 16#a0, 16#80, "edited">>, #{fin => 0}),
                    ?INVALID_DATA)
      end},
     {"fail fast: a good fragment, then a bad one, the last never sent: 1007 at once",
      fun(C) ->
              fails(C, [frame(1, <<"κόσμε"/utf8>>, #{fin => 0}),
                        frame(0, <<16#ed, 16#a0, 16#80, "edited">>, #{fin => 0})], ?INVALID_DATA)
      end},
     {"fail fast: in a frame whose payload has come in part (a good part, a bad byte, then "
      "nothing): 1007 at once",
      fun(C) ->
              Bad = <<"κόσμε"/utf8, 16#ed, 16#a0, 16#80>>,
              Full = <<Bad/binary, (text(100))/binary>>,
              fails(C, binary:part(frame(1, Full), 0, 6 + byte_size(Bad)), ?INVALID_DATA)
      end},
     {"fail fast: a code point past U+10FFFF told at its second byte (F4 90), the fragment "
      "ending there: 1007 at once",
      fun(C) -> fails(C, frame(1, <<"abc", 16#f4, 16#90>>, #{fin => 0}), ?INVALID_DATA) end},
     {"a sequence cut short by the end of the message (its fragments valid so far): 1007",
      fun(C) -> fails(C, fragments(1, [<<"abc">>, <<16#f0, 16#90>>, <<16#80>>]), ?INVALID_DATA)
      end}].

%%% ---------------------------------------------------------------- limits

limits() ->
    [{"a message of --max-client-message bytes in 2 fragments: echoed",
      fun(C) ->
              Half = text(?MAX div 2),
              talk(C, [{send, fragments(1, [Half, Half])},
                       {recv, {1, 1, <<Half/binary, Half/binary>>}}])
      end},
     {"a byte past --max-client-message, in one frame: 1009",
      fun(C) -> fails(C, frame(2, bin(?MAX + 1)), ?TOO_BIG) end},
     {"a byte past it over fragments (the limit reached, then one more): 1009",
      fun(C) -> fails(C, fragments(2, [bin(?MAX), <<0>>]), ?TOO_BIG) end},
     {"a frame that declares 2^40 bytes: 1009 at its first byte, the rest never sent",
      fun(C) -> fails(C, header(2, <<127:7, (1 bsl 40):64>>, <<0>>), ?TOO_BIG) end},
     {"a message in 64 frames: echoed; in 65: 1008",
      fun(C) ->
              Parts = [<<I>> || I <- lists:seq($0, $0 + 63)],
              talk(C, [{send, fragments(1, Parts)}, {recv, {1, 1, iolist_to_binary(Parts)}}]),
              fails(C, fragments(1, [<<"x">> || _ <- lists:seq(1, 65)]), ?POLICY)
      end}].

%%% ---------------------------------------------------------------- reply kinds

reply_kinds() ->
    [{"an empty text, an empty binary, an empty message in fragments: echoed as sent",
      fun(C) ->
              echo(C, 1, <<>>),
              echo(C, 2, <<>>),
              talk(C, [{send, fragments(1, [<<>>, <<>>, <<>>])}, {recv, {1, 1, <<>>}}])
      end},
     {"a binary message of valid UTF-8 (5, 125, 126, 65535, 65536 bytes): echoed as binary",
      fun(C) -> [echo(C, 2, text(N)) || N <- [5, 125, 126, 65535, ?MAX]] end}].

%%% ---------------------------------------------------------------- after all

all_ended(#{server := S}) ->
    httpdtest_server:wait_stat(S, streams_open, fun(V) -> V =:= 0 end, ?T),
    echo(#{server => S}, 1, <<"still serving">>),
    ?assertEqual(running, httpdtest_os:proc_status(S)).

%%% ---------------------------------------------------------------- helpers

%% Request (bytes) on a connection of its own: the response map.
request(#{server := S}, Request) ->
    httpdtest_http:http_request(httpdtest_server:port_of(S), Request).

open(#{server := S}) ->
    httpdtest_inbox:ws_open(S, erlang:unique_integer([positive])).

%% On a connection of its own, in order: {send, Bytes}; nodelay, no Nagle
%% from now on (each send may be a read of its own); {bytewise, Bytes}, a
%% byte a send, without Nagle; sync, every command sent to the C-node
%% before applied (the loop has gone round since); {recv, Frame}, the next
%% frame the server sends is Frame; {closed, Code}, its close frame with
%% Code alone, then the end of the stream; ended, the end of the stream
%% with nothing more.
talk(C, Steps) ->
    Sock = open(C),
    try [step(C, Sock, Step) || Step <- Steps]
    after gen_tcp:close(Sock)
    end.

step(_, Sock, {send, Bytes}) -> ok = gen_tcp:send(Sock, Bytes);
step(_, Sock, nodelay) -> ok = inet:setopts(Sock, [{nodelay, true}]);
step(_, Sock, {bytewise, Bytes}) ->
    step(none, Sock, nodelay),
    [ok = gen_tcp:send(Sock, [B]) || <<B>> <= Bytes];
step(#{server := S}, _, sync) -> httpdtest_raw:sync(S);
step(_, Sock, {recv, Frame}) -> ?assertEqual(Frame, recv_frame(Sock));
step(_, Sock, {closed, Code}) ->
    ?assertEqual({1, 8, <<Code:16>>}, recv_frame(Sock)),
    step(none, Sock, ended);
step(_, Sock, ended) ->
    ?assertEqual(<<>>, get({buf, Sock})),
    ?assertEqual({error, closed}, gen_tcp:recv(Sock, 0, ?T)).

%% Payload sent as a frame of opcode Op comes back as one frame of the
%% same opcode.
echo(C, Op, Payload) -> talk(C, [{send, frame(Op, Payload)}, {recv, {1, Op, Payload}}]).

%% Bytes sent: the server closes with Code and sends nothing before it.
fails(C, Bytes, Code) -> talk(C, [{send, Bytes}, {closed, Code}]).

%% A close frame of payload Payload: answered with Code.
closes(C, Payload, Code) -> fails(C, frame(8, Payload), Code).

%% A message of opcode Op in one frame per part.
fragments(Op, [Last]) -> [frame(Op, Last)];
fragments(Op, [First | Rest]) ->
    [frame(Op, First, #{fin => 0}) | [frame(0, P, #{fin => 0}) || P <- lists:droplast(Rest)]]
        ++ [frame(0, lists:last(Rest))].

%% A final masked frame of opcode Op with the length field LenBits (7
%% bits, then 16 or 64 when they say so) as given, then Payload.
header(Op, LenBits, Payload) ->
    Key = <<9, 8, 7, 6>>,
    <<1:1, 0:3, Op:4, 1:1, LenBits/bits, Key/binary, (mask(Payload, Key))/binary>>.

%% N bytes of ASCII; N bytes that are not UTF-8 (0xFF first).
text(N) -> binary:part(binary:copy(<<"0123456789abcdef">>, N div 16 + 1), 0, N).

bin(N) -> binary:part(<<255, (binary:copy(<<0, 1, 2, 254>>, N div 4 + 1))/binary>>, 0, N).
