%% SPDX-License-Identifier: Apache-2.0
%% Raw client pieces over gen_tcp for the black-box tests: the bytes up to a
%% separator, SSE events, WebSocket frames both ways, long polls.
%%
%% Sockets are passive. What a caller read past the head of a response is
%% kept in the process dictionary under {buf, Sock} (the caller puts it
%% there); take/2, read_event/1, recv_frame/1 and meta_frame/1 read from
%% that buffer first and leave what they did not use in it. Every read waits
%% up to 5 s (scaled by $HTTPDTEST_TIME_SCALE) and fails the test after.
-module(httpdtest_raw).

-include_lib("eunit/include/eunit.hrl").

-export([read_until/3, read_all/2, take/2, read_event/1, ws_upgrade/3, ws_meta_upgrade/2,
         recv_frame/1, meta_frame/1, frame/2, frame/3, mask/2,
         poll_raw/2, spawn_poll/2, sync/1]).

-define(T, 5000).

-import(httpdtest_http, [http_request/2, request_bytes/4]).
-import(httpdtest_server, [port_of/1]).
-import(httpdtest_json, [json_decode/1]).

%% {Before, After} of the first Sep in Acc and what comes on Sock after it.
read_until(Sock, Sep, Acc) ->
    case binary:split(Acc, Sep) of
        [Before, After] -> {Before, After};
        [_] ->
            case gen_tcp:recv(Sock, 0, timeout()) of
                {ok, More} -> read_until(Sock, Sep, <<Acc/binary, More/binary>>);
                Err -> erlang:error({recv, Err, {buffered, byte_size(Acc)}})
            end
    end.

%% Acc and every byte that comes until the peer closes.
read_all(Sock, Acc) ->
    case gen_tcp:recv(Sock, 0, timeout()) of
        {ok, B} -> read_all(Sock, <<Acc/binary, B/binary>>);
        {error, closed} -> Acc
    end.

%% The next N bytes of the buffered stream.
take(Sock, N) ->
    case get({buf, Sock}) of
        <<Want:N/binary, Rest/binary>> -> put({buf, Sock}, Rest), Want;
        Buf ->
            case gen_tcp:recv(Sock, 0, timeout()) of
                {ok, More} -> put({buf, Sock}, <<Buf/binary, More/binary>>), take(Sock, N);
                Err -> erlang:error({recv, Err, {buffered, Buf}})
            end
    end.

%% The next SSE event, up to and with its blank line.
read_event(Sock) ->
    {Event, Rest} = read_until(Sock, <<"\n\n">>, get({buf, Sock})),
    put({buf, Sock}, Rest),
    <<Event/binary, "\n\n">>.

%% A new connection to S, GET Path upgraded to a WebSocket with Headers
%% besides the handshake's own: {Sock, the 101's head}, the 101 asserted,
%% the bytes past its head kept.
ws_upgrade(S, Path, Headers) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, httpdtest_server:port_of(S),
                                 [binary, {active, false}]),
    ok = gen_tcp:send(Sock, httpdtest_http:request_bytes(
                              "GET", Path, "HTTP/1.1",
                              ["Upgrade: websocket", "Connection: Upgrade",
                               "Sec-WebSocket-Version: 13",
                               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==" | Headers])),
    {Head, Rest} = read_until(Sock, <<"\r\n\r\n">>, <<>>),
    ?assertMatch(<<"HTTP/1.1 101 ", _/binary>>, Head),
    put({buf, Sock}, Rest),
    {Sock, Head}.

%% GET Path on Sock upgraded to a WebSocket with the subprotocol that carries
%% ids (ws+meta.httpdcnode): the 101 asserted, the bytes past its head kept.
ws_meta_upgrade(Sock, Path) ->
    ok = gen_tcp:send(Sock, httpdtest_http:request_bytes(
                              "GET", Path, "HTTP/1.1",
                              ["Upgrade: websocket", "Connection: Upgrade",
                               "Sec-WebSocket-Version: 13",
                               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
                               "Sec-WebSocket-Protocol: ws+meta.httpdcnode"])),
    {Head, Rest} = read_until(Sock, <<"\r\n\r\n">>, <<>>),
    ?assertMatch(<<"HTTP/1.1 101 ", _/binary>>, Head),
    put({buf, Sock}, Rest),
    Sock.

%% The next server frame {Fin, Opcode, Payload}: never masked, no RSV bits,
%% its length in the shortest form.
recv_frame(Sock) ->
    <<Fin:1, Rsv:3, Op:4, Mask:1, Len0:7>> = take(Sock, 2),
    ?assertEqual({0, 0}, {Rsv, Mask}),
    Len = case Len0 of
              126 -> <<L:16>> = take(Sock, 2), ?assert(L >= 126), L;
              127 -> <<L:64>> = take(Sock, 8), ?assert(L >= 65536), L;
              _ -> Len0
          end,
    {Fin, Op, take(Sock, Len)}.

%% A ws+meta message frame as {Epoch, Seq, Payload}.
meta_frame(Sock) ->
    {1, _, <<"id: ", Epoch:8/binary, ":", Rest/binary>>} = recv_frame(Sock),
    [Seq, Payload] = binary:split(Rest, <<"\n\n">>),
    {Epoch, binary_to_integer(Seq), Payload}.

%% A client frame: masked unless told otherwise. Opts: fin, rsv (bits),
%% mask (boolean).
frame(Op, Payload) -> frame(Op, Payload, #{}).

frame(Op, Payload, Opts) ->
    Fin = maps:get(fin, Opts, 1),
    Rsv = maps:get(rsv, Opts, 0),
    Len = byte_size(Payload),
    LenBits = if Len < 126 -> <<Len:7>>;
                 Len < 65536 -> <<126:7, Len:16>>;
                 true -> <<127:7, Len:64>>
              end,
    case maps:get(mask, Opts, true) of
        true ->
            Key = rand:bytes(4),
            <<Fin:1, Rsv:3, Op:4, 1:1, LenBits/bits, Key/binary, (mask(Payload, Key))/binary>>;
        false ->
            <<Fin:1, Rsv:3, Op:4, 0:1, LenBits/bits, Payload/binary>>
    end.

%% Payload XOR the 4-byte Key repeated (RFC 6455 5.3).
mask(<<>>, _Key) -> <<>>;
mask(Payload, Key) ->
    Len = byte_size(Payload),
    Keys = binary:part(binary:copy(Key, Len div 4 + 1), 0, Len),
    <<(binary:decode_unsigned(Payload) bxor binary:decode_unsigned(Keys)):(Len * 8)>>.

%% GET Path answered at once (200): the body and its JSON.
poll_raw(S, Path) ->
    R = http_request(port_of(S), request_bytes("GET", Path, "HTTP/1.1",
                                               ["Connection: close"])),
    ?assertEqual(200, maps:get(status, R)),
    Body = maps:get(body, R),
    {Body, json_decode(Body)}.

%% GET Path in a process of its own, linked: it sends the caller
%% {poll_answer, ItsPid, Bytes}, every byte of the response until the close.
spawn_poll(S, Path) ->
    Self = self(),
    Port = httpdtest_server:port_of(S),
    Req = httpdtest_http:request_bytes("GET", Path, "HTTP/1.1", []),
    spawn_link(fun() ->
                       {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, Port,
                                                    [binary, {active, false}]),
                       ok = gen_tcp:send(Sock, Req),
                       Self ! {poll_answer, self(), read_all(Sock, <<>>)}
               end).

%% Every message sent to the server before is applied: a stats request is
%% answered in order, and is no message to any uid.
sync(S) ->
    Ref = make_ref(),
    httpdtest_server:send(S, {self(), Ref, stats}),
    receive {Ref, _} -> ok after ?T -> erlang:error(no_stats_reply) end.

timeout() -> httpdtest_os:scaled(?T).
