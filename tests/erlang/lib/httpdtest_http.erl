%% SPDX-License-Identifier: Apache-2.0
%% A raw HTTP/1.x client for the black-box tests: each connection is a
%% process that parses the response incrementally and hands over one event at
%% a time ({hc, Conn, Event}): the head, each chunk, the terminating chunk,
%% plain bytes, the close. Streams on GET /test/N checked up to their welcome.
-module(httpdtest_http).

%% requests and connections
-export([get_request/1, request_bytes/3, request_bytes/4, open/2, open/3, http_request/2,
         next_event/2, close/1, collected/1, header/2]).
%% expectations, each failing with what came instead
-export([expect_head/2, expect_chunk/2, expect_chunks/3, expect_last_chunk/2, expect_closed/2,
         expect_end/2, expect_bytes/3]).
%% streams on GET /test/N
-export([open_stream/2, open_stream/3, open_streams/4, welcome/1]).

-import(httpdtest_os, [now_ms/0, scaled/1, settled_status/1]).
-import(httpdtest_wait, [summarize/1]).

-define(LOCAL, {127, 0, 0, 1}).

%% open/2,3 returns Conn (a process); events arrive as {hc, Conn, Event}:
%%   {connect_error, R} | {send_error, R}
%%   {head, #{version, status, reason, headers}}   headers: [{LowerName, Value}]
%%   {chunk, Bin}            one chunk of a chunked body
%%   last_chunk              the terminating chunk, exactly "0\r\n\r\n"
%%   {odd_last_chunk, SizeLine, Trailers}   a terminating chunk of another form
%%   {body, Bin}             a Content-Length body, whole
%%   {data, Bin}             bytes of a body without length or chunking,
%%                           of a HEAD response, or after the end of a body
%%   {bad_response, Why, Bytes}
%%   closed | {tcp_error, R}
%% Options: head => true (HEAD: no body expected), forward => N (forward
%% only the first N chunks, keep the rest for collected/1), sentinel =>
%% Bin (when a kept chunk equals it, send {hc, Conn, sentinel}).

-record(rd, {owner, sock, buf = <<>>, phase = status, head = false,
             version, status, reason, hdrs = [],
             forward = infinity, sentinel, kept = [], nkept = 0}).

get_request(Path) -> request_bytes("GET", Path, "HTTP/1.1").

request_bytes(Method, Path, Version) -> request_bytes(Method, Path, Version, []).

request_bytes(Method, Path, Version, Extra) ->
    iolist_to_binary([Method, " ", Path, " ", Version, "\r\nHost: x\r\n",
                      [[H, "\r\n"] || H <- Extra], "\r\n"]).

open(Port, Request) -> open(Port, Request, #{}).

open(Port, Request, Opts) ->
    Owner = self(),
    spawn(fun() -> reader_init(Owner, Port, Request, Opts) end).

reader_init(Owner, Port, Request, Opts) ->
    erlang:monitor(process, Owner),
    case gen_tcp:connect(?LOCAL, Port, [binary, {active, once}, {nodelay, true}], 10000) of
        {ok, Sock} ->
            R = #rd{owner = Owner, sock = Sock,
                    head = maps:get(head, Opts, false),
                    forward = maps:get(forward, Opts, infinity),
                    sentinel = maps:get(sentinel, Opts, undefined)},
            case gen_tcp:send(Sock, Request) of
                ok -> ok;
                {error, E} -> Owner ! {hc, self(), {send_error, E}}
            end,
            reader_loop(R);
        {error, E} ->
            Owner ! {hc, self(), {connect_error, E}},
            reader_wait(Owner, #rd{owner = Owner})
    end.

reader_loop(R = #rd{sock = Sock, owner = Owner}) ->
    receive
        {tcp, Sock, Data} ->
            R2 = parse(R#rd{buf = <<(R#rd.buf)/binary, Data/binary>>}),
            ok = inet:setopts(Sock, [{active, once}]),
            reader_loop(R2);
        {tcp_closed, Sock} ->
            emit_leftover(R),
            emit(R, closed),
            reader_wait(Owner, R);
        {tcp_error, Sock, E} ->
            emit_leftover(R),
            emit(R, {tcp_error, E}),
            reader_wait(Owner, R);
        {kept, From, Ref} ->
            From ! {Ref, lists:reverse(R#rd.kept)},
            reader_loop(R);
        {stop, From, Ref} ->
            gen_tcp:close(Sock),
            From ! {Ref, stopped};
        {'DOWN', _, process, Owner, _} ->
            gen_tcp:close(Sock)
    end.

%% After the close: still answers for what it kept.
reader_wait(Owner, R) ->
    receive
        {kept, From, Ref} -> From ! {Ref, lists:reverse(R#rd.kept)}, reader_wait(Owner, R);
        {stop, From, Ref} -> From ! {Ref, stopped};
        {'DOWN', _, process, Owner, _} -> ok
    end.

emit(#rd{owner = O}, Ev) -> O ! {hc, self(), Ev}.

emit_leftover(#rd{buf = <<>>}) -> ok;
emit_leftover(R = #rd{buf = B, phase = Ph}) -> emit(R, {bad_response, {truncated, Ph}, B}).

parse(R = #rd{phase = status, buf = B}) ->
    case binary:split(B, <<"\r\n">>) of
        [Line, Rest] ->
            case re:run(Line, "^(HTTP/\\d\\.\\d) (\\d\\d\\d)(?: (.*))?$",
                        [{capture, all_but_first, binary}]) of
                {match, [V, C | Reason]} ->
                    parse(R#rd{phase = headers, buf = Rest, version = V,
                               status = binary_to_integer(C),
                               reason = case Reason of [Rs] -> Rs; [] -> <<>> end});
                nomatch -> bad(R, bad_status_line)
            end;
        [_] -> R
    end;
parse(R = #rd{phase = headers, buf = B}) ->
    case binary:split(B, <<"\r\n">>) of
        [<<>>, Rest] ->
            Hdrs = lists:reverse(R#rd.hdrs),
            emit(R, {head, #{version => R#rd.version, status => R#rd.status,
                             reason => R#rd.reason, headers => Hdrs}}),
            parse(R#rd{phase = body_phase(R, Hdrs), buf = Rest});
        [Line, Rest] ->
            case binary:split(Line, <<":">>) of
                [N, V] ->
                    H = {string:lowercase(string:trim(N)), string:trim(V)},
                    parse(R#rd{buf = Rest, hdrs = [H | R#rd.hdrs]});
                [_] -> bad(R, bad_header_line)
            end;
        [_] -> R
    end;
parse(R = #rd{phase = chunk_size, buf = B}) ->
    case binary:split(B, <<"\r\n">>) of
        [Line, Rest] ->
            [Hex | _] = binary:split(Line, <<";">>),
            try binary_to_integer(string:trim(Hex), 16) of
                0 -> parse(R#rd{phase = {trailers, Line, <<>>}, buf = Rest});
                N when N > 0 -> parse(R#rd{phase = {chunk_data, N}, buf = Rest})
            catch _:_ -> bad(R, {bad_chunk_size, Line})
            end;
        [_] -> R
    end;
parse(R = #rd{phase = {chunk_data, N}, buf = B}) when byte_size(B) >= N + 2 ->
    case B of
        <<Data:N/binary, "\r\n", Rest/binary>> ->
            R2 = deliver_chunk(R, Data),
            parse(R2#rd{phase = chunk_size, buf = Rest});
        _ -> bad(R, chunk_not_followed_by_crlf)
    end;
parse(R = #rd{phase = {trailers, SizeLine, Acc}, buf = B}) ->
    case binary:split(B, <<"\r\n">>) of
        [<<>>, Rest] ->
            case {SizeLine, Acc} of
                {<<"0">>, <<>>} -> emit(R, last_chunk);
                _ -> emit(R, {odd_last_chunk, SizeLine, Acc})
            end,
            parse(R#rd{phase = raw, buf = Rest});
        [Line, Rest] ->
            parse(R#rd{phase = {trailers, SizeLine, <<Acc/binary, Line/binary, "\r\n">>},
                       buf = Rest});
        [_] -> R
    end;
parse(R = #rd{phase = {length, N}, buf = B}) when byte_size(B) >= N ->
    <<Body:N/binary, Rest/binary>> = B,
    emit(R, {body, Body}),
    parse(R#rd{phase = raw, buf = Rest});
parse(R = #rd{phase = raw, buf = B}) when B =/= <<>> ->
    emit(R, {data, B}),
    R#rd{buf = <<>>};
parse(R) -> R.

body_phase(#rd{head = true}, _) -> raw;
body_phase(#rd{status = St}, _) when St =:= 204; St =:= 304; St < 200 -> raw;
body_phase(_, Hdrs) ->
    TE = string:lowercase(header(Hdrs, <<"transfer-encoding">>, <<>>)),
    case binary:match(TE, <<"chunked">>) of
        nomatch ->
            case header(Hdrs, <<"content-length">>, undefined) of
                undefined -> raw;
                L -> {length, binary_to_integer(L)}
            end;
        _ -> chunk_size
    end.

deliver_chunk(R = #rd{forward = F}, Data) when F =:= infinity; F > 0 ->
    emit(R, {chunk, Data}),
    R#rd{forward = case F of infinity -> infinity; _ -> F - 1 end};
deliver_chunk(R = #rd{sentinel = Sent, kept = K, nkept = N}, Data) ->
    case Data =:= Sent of
        true -> emit(R, sentinel);
        false -> ok
    end,
    R#rd{kept = [Data | K], nkept = N + 1}.

bad(R, Why) ->
    emit(R, {bad_response, Why, R#rd.buf}),
    R#rd{phase = raw, buf = <<>>}.

%% GET /test/Uid; checks the 200 chunked head and the exact welcome chunk.
open_stream(S, Uid) -> open_stream(S, Uid, #{}).

open_stream(S, Uid, Opts) ->
    C = open(maps:get(port, S), get_request("/test/" ++ integer_to_list(Uid)), Opts),
    case expect_head(C, 5000) of
        #{status := 200, headers := H} ->
            case header(H, <<"transfer-encoding">>) of
                <<"chunked">> -> ok;
                TE -> erlang:error({stream_not_chunked, Uid, TE})
            end;
        Other -> erlang:error({stream_not_200, Uid, Other})
    end,
    W = welcome(Uid),
    case expect_chunk(C, 5000) of
        W -> C;
        Got -> erlang:error({bad_welcome, Uid, W, summarize(Got)})
    end.

%% Opens a stream for each of Uids, at most InFlight being opened at
%% once, each checked up to its welcome chunk; ConnOpts go to open/3.
%% Returns [{Uid, Conn}].
open_streams(S, Uids, InFlight, ConnOpts) ->
    open_streams_loop(S, Uids, InFlight, ConnOpts, #{}, [], now_ms() + 60000).

open_streams_loop(_S, [], _InFlight, _ConnOpts, Pending, Done, _Deadline)
  when map_size(Pending) =:= 0 ->
    lists:reverse(Done);
open_streams_loop(S, [Uid | Uids], InFlight, ConnOpts, Pending, Done, Deadline)
  when map_size(Pending) < InFlight ->
    C = open(maps:get(port, S), get_request("/test/" ++ integer_to_list(Uid)), ConnOpts),
    open_streams_loop(S, Uids, InFlight, ConnOpts, Pending#{C => Uid}, Done, Deadline);
open_streams_loop(S, Uids, InFlight, ConnOpts, Pending, Done, Deadline) ->
    receive
        {hc, C, Ev} when is_map_key(C, Pending) ->
            Uid = maps:get(C, Pending),
            W = welcome(Uid),
            case Ev of
                {head, #{status := 200}} ->
                    open_streams_loop(S, Uids, InFlight, ConnOpts, Pending, Done, Deadline);
                {chunk, W} ->
                    open_streams_loop(S, Uids, InFlight, ConnOpts, maps:remove(C, Pending),
                                      [{Uid, C} | Done], Deadline);
                Other ->
                    Status = settled_status(S),
                    erlang:error({opening_stream, Uid, {open_so_far, length(Done)},
                                  summarize(Other), {server, Status}})
            end
    after max(0, Deadline - now_ms()) ->
            erlang:error({streams_not_open_in_time, {open, length(Done)},
                          {pending, map_size(Pending)}})
    end.

welcome(Uid) ->
    N = integer_to_list(Uid),
    iolist_to_binary(["Welcome, Url: '/test/", N, "' Id: ", N, "\n"]).

%% One request, the whole response: the head map plus body (for a
%% Content-Length, chunked or close-delimited body).
http_request(Port, Request) ->
    C = open(Port, Request),
    try
        H = expect_head(C, 5000),
        Body = read_body(C, [], now_ms() + 5000),
        H#{body => Body}
    after
        close(C)
    end.

read_body(C, Acc, Deadline) ->
    case next_event(C, max(0, Deadline - now_ms())) of
        {body, B} -> B;
        {chunk, B} -> read_body(C, [B | Acc], Deadline);
        {data, B} -> read_body(C, [B | Acc], Deadline);
        last_chunk -> iolist_to_binary(lists:reverse(Acc));
        closed -> iolist_to_binary(lists:reverse(Acc));
        Other -> erlang:error({reading_body, summarize(Other),
                               summarize(iolist_to_binary(lists:reverse(Acc)))})
    end.

next_event(C, Timeout) ->
    receive {hc, C, Ev} -> Ev after scaled(Timeout) -> timeout end.

expect_head(C, T) ->
    case next_event(C, T) of
        {head, H} -> H;
        Other -> erlang:error({expected_head, summarize(Other)})
    end.

expect_chunk(C, T) ->
    case next_event(C, T) of
        {chunk, B} -> B;
        Other -> erlang:error({expected_chunk, summarize(Other)})
    end.

%% Expects exactly the chunks Bins in order; reports the first mismatch.
expect_chunks(C, Bins, T) -> expect_chunks(C, Bins, T, 1).

expect_chunks(_C, [], _T, _I) -> ok;
expect_chunks(C, [B | Bs], T, I) ->
    case next_event(C, T) of
        {chunk, B} -> expect_chunks(C, Bs, T, I + 1);
        {chunk, Other} ->
            erlang:error({chunk_mismatch, {index, I}, {expected, summarize(B)},
                          {got, summarize(Other)}});
        Other -> erlang:error({expected_chunk, {index, I}, {expected, summarize(B)},
                               {got, summarize(Other)}})
    end.

expect_last_chunk(C, T) ->
    case next_event(C, T) of
        last_chunk -> ok;
        Other -> erlang:error({expected_last_chunk, summarize(Other)})
    end.

expect_closed(C, T) ->
    case next_event(C, T) of
        closed -> ok;
        Other -> erlang:error({expected_close, summarize(Other)})
    end.

%% The terminating chunk, then the close.
expect_end(C, T) ->
    expect_last_chunk(C, T),
    expect_closed(C, T).

%% Plain (unchunked) body bytes: collects {data, _} until Bytes came.
expect_bytes(C, Bytes, T) -> expect_bytes(C, Bytes, <<>>, now_ms() + T).

expect_bytes(C, Bytes, Acc, Deadline) ->
    Size = byte_size(Acc),
    IsPrefix = Size < byte_size(Bytes) andalso Acc =:= binary:part(Bytes, 0, Size),
    case Acc of
        Bytes -> ok;
        _ when IsPrefix ->
            case next_event(C, max(0, Deadline - now_ms())) of
                {data, B} -> expect_bytes(C, Bytes, <<Acc/binary, B/binary>>, Deadline);
                Other -> erlang:error({expected_bytes, summarize(Bytes),
                                       {so_far, summarize(Acc)}, summarize(Other)})
            end;
        _ -> erlang:error({bytes_mismatch, {expected, summarize(Bytes)}, {got, summarize(Acc)}})
    end.

%% The chunks kept by a connection opened with the forward option.
collected(C) ->
    Ref = make_ref(),
    M = erlang:monitor(process, C),
    C ! {kept, self(), Ref},
    receive
        {Ref, L} -> erlang:demonitor(M, [flush]), L;
        {'DOWN', M, _, _, R} -> erlang:error({conn_gone, R})
    after 10000 -> erlang:error(conn_not_answering)
    end.

%% Closes the client side and drops its pending events.
close(C) ->
    Ref = make_ref(),
    M = erlang:monitor(process, C),
    C ! {stop, self(), Ref},
    receive
        {Ref, stopped} -> ok;
        {'DOWN', M, _, _, _} -> ok
    after 10000 -> exit(C, kill)
    end,
    erlang:demonitor(M, [flush]),
    flush_events(C).

flush_events(C) ->
    receive {hc, C, _} -> flush_events(C) after 0 -> ok end.

header(Hdrs, Name) -> header(Hdrs, Name, undefined).

header(Hdrs, Name, Default) ->
    case lists:keyfind(Name, 1, Hdrs) of
        {_, V} -> V;
        false -> Default
    end.
