%% SPDX-License-Identifier: Apache-2.0
%% The Erlang side of the "client -> Erlang" section of `make bench'
%% (bench/lib/inbox.sh).
%%
%% On the master (-eval 'inbox_bench:master_cli()' -extra NAME): the
%% application's inbox (httpdcnode_inbox, which acknowledges to the C-node)
%% registered as NAME, calling this module as its httpdcnode_handler. The
%% load client (httpclient --send-rate, --request-rate) sends
%% "q=SEQ;t=NS;" and "r=SEQ;t=NS;", SEQ counting each connection's messages
%% from 0. Per (Uid, Conn) the handler keeps the next SEQ expected: a SEQ
%% past it counts the ones skipped as lost, one before it as out of order.
%% A request is answered to its one connection with httpdcnode:reply/2
%% ({conn, Conn, <<"t=NS;">>}): the client times the round trip.
%%
%% From a one-shot node (-eval 'inbox_bench:cli()' -extra CMD --master M
%% --name NAME), printing one JSON line:
%%   counts                 the counts now
%%   settle --expect N --ms T
%%       waits (polling every 50 ms, at most T ms) until N messages came,
%%       or none came for 2 s; then the counts
%%   reset                  forgets every count and connection
%%   linked --cnode C --ms T
%%       waits (at most T ms) until the master is linked to the C-node C
%%   post --port P --conns K --rate R --seconds S --uid-base U
%%       K keep-alive connections, connection I from 127.0.16.I (the
%%       server's rate bucket for a POST without ?conn= is its peer
%%       address's) for uid U + I, each sending POST /send/(U + I) with the
%%       text/plain body "p=SEQ;t=NS;" (SEQ from 0), R / K a second each,
%%       one request waiting for its answer before the next; prints the
%%       requests sent, the 202s (accepted), the other codes, the errors
-module(inbox_bench).
%% An httpdcnode_handler (not declared: erlc here has no path to it).

-export([master_cli/0, cli/0]).
-export([init/1, handle_in/4, handle_info/2]).

-define(POLL_MS, 50).
-define(QUIET_MS, 2000).

%%% ------------------------------------------------------------ master ----

master_cli() ->
    [Name] = init:get_plain_arguments(),
    {ok, _} = httpdcnode_inbox:start(list_to_atom(Name), ?MODULE, []),
    io:format("inbox master up~n").

%%% ----------------------------------------------------------- handler ----

%% next: {Uid, Conn} => the SEQ expected next. The counters are apart from
%% it so that `counts' does not copy 10,000 entries.
init([]) ->
    {ok, fresh()}.

fresh() ->
    #{next => #{}, msgs => 0, requests => 0, lost => 0, out_of_order => 0, bad => 0,
      first_ms => 0, last_ms => 0}.

%% A POST (p=) has Conn {CNode, 0}: each poster has its own uid.
handle_in(Uid, Conn, <<Kind, "=", Rest/binary>>, S) when Kind =:= $q; Kind =:= $r; Kind =:= $p ->
    case binary:split(Rest, <<";">>) of
        [SeqB, Stamp] ->
            case catch binary_to_integer(SeqB) of
                Seq when is_integer(Seq) ->
                    Kind =:= $r andalso httpdcnode:reply(Conn, Stamp),
                    {ok, count(Uid, Conn, Seq, Kind =:= $r, S)};
                _ -> {ok, bad(S)}
            end;
        _ -> {ok, bad(S)}
    end;
handle_in(_Uid, _Conn, _Data, S) ->
    {ok, bad(S)}.

count(Uid, Conn, Seq, Request, S = #{next := Next, msgs := M, requests := R}) ->
    Key = {Uid, Conn},
    Want = maps:get(Key, Next, 0),
    Now = erlang:system_time(millisecond),
    S1 = S#{next := Next#{Key => max(Want, Seq + 1)}, msgs := M + 1,
            requests := R + (case Request of true -> 1; false -> 0 end),
            last_ms := Now},
    S2 = case S of #{first_ms := 0} -> S1#{first_ms := Now}; _ -> S1 end,
    if Seq =:= Want -> S2;
       Seq > Want -> S2#{lost := maps:get(lost, S2) + Seq - Want};
       true -> S2#{out_of_order := maps:get(out_of_order, S2) + 1}
    end.

bad(S = #{bad := B}) -> S#{bad := B + 1}.

handle_info({Pid, Ref, counts}, S) ->
    Pid ! {Ref, summary(S)},
    {ok, S};
handle_info({Pid, Ref, reset}, _) ->
    Pid ! {Ref, ok},
    {ok, fresh()};
handle_info(_, S) ->
    {ok, S}.

summary(S = #{next := Next}) ->
    (maps:remove(next, S))#{conns => map_size(Next)}.

%%% ---------------------------------------------------------------- cli ----

cli() ->
    [Cmd | Args] = init:get_plain_arguments(),
    Opts = opts(Args, #{}),
    Master = list_to_atom(maps:get("master", Opts)),
    Dest = {list_to_atom(maps:get("name", Opts)), Master},
    Code = try run(Cmd, Dest, Opts) of
               Map ->
                   io:format("~s~n", [json(Map)]),
                   0
           catch C:E ->
                   io:format(standard_error, "inbox_bench ~s: ~p:~p~n", [Cmd, C, E]),
                   1
           end,
    erlang:halt(Code).

opts(["--" ++ K, V | T], M) -> opts(T, M#{K => V});
opts([], M) -> M.

run("counts", Dest, _) -> ask(Dest, counts);
run("reset", Dest, _) -> #{reset => ask(Dest, reset)};
run("linked", {_, Master}, Opts) ->
    CNode = list_to_atom(maps:get("cnode", Opts)),
    End = now_ms() + list_to_integer(maps:get("ms", Opts, "15000")),
    #{linked => linked(Master, CNode, End)};
run("post", _, Opts) ->
    I = fun(K) -> list_to_integer(maps:get(K, Opts)) end,
    post(I("port"), I("conns"), I("rate"), I("seconds"), I("uid-base"));
run("settle", Dest, Opts) ->
    Expect = list_to_integer(maps:get("expect", Opts)),
    End = now_ms() + list_to_integer(maps:get("ms", Opts, "30000")),
    settle(Dest, Expect, End, -1, now_ms()).

%% Until Expect messages came, none came for ?QUIET_MS, or End.
settle(Dest, Expect, End, Last, Since) ->
    C = #{msgs := N} = ask(Dest, counts),
    Now = now_ms(),
    Quiet = N =:= Last andalso Now - Since >= ?QUIET_MS,
    if N >= Expect; Quiet; Now >= End -> C#{settle_ms_left => max(0, End - Now)};
       true ->
           timer:sleep(?POLL_MS),
           {Last1, Since1} = case N =:= Last of true -> {Last, Since}; false -> {N, Now} end,
           settle(Dest, Expect, End, Last1, Since1)
    end.

linked(Master, CNode, End) ->
    case lists:member(CNode, rpc:call(Master, erlang, nodes, [hidden], 3000)) of
        true -> true;
        false ->
            now_ms() < End orelse erlang:error({not_linked, CNode}),
            timer:sleep(?POLL_MS),
            linked(Master, CNode, End)
    end.

%%% --------------------------------------------------------------- POST ----

post(Port, K, Rate, Secs, UidBase) when K >= 1, K =< 250 ->
    Self = self(),
    T0 = now_ms(),
    End = T0 + Secs * 1000,
    Gap = K * 1000 / Rate,
    Pids = [spawn_link(fun() -> Self ! {posted, self(), poster(Port, I, UidBase + I, T0, End, Gap)} end)
            || I <- lists:seq(1, K)],
    Rs = [receive {posted, P, R} -> R end || P <- Pids],
    Elapsed = max(1, now_ms() - T0),
    Sum = fun(F) -> lists:sum([maps:get(F, R) || R <- Rs]) end,
    Codes = lists:foldl(fun(R, A) -> maps:fold(fun(C, N, B) -> B#{C => maps:get(C, B, 0) + N} end,
                                               A, maps:get(codes, R)) end, #{}, Rs),
    #{post_sent => Sum(sent), post_accepted => Sum(accepted), post_errors => Sum(errors),
      post_refused => Sum(sent) - Sum(accepted) - Sum(errors),
      post_codes => lists:flatten(lists:join(" ", [io_lib:format("~b:~b", [C, N])
                                                   || {C, N} <- lists:sort(maps:to_list(Codes))]
                                       ++ [io_lib:format("none", []) || map_size(Codes) =:= 0])),
      post_per_s => Sum(accepted) * 1000 div Elapsed}.

poster(Port, I, Uid, T0, End, Gap) ->
    R0 = #{sent => 0, accepted => 0, errors => 0, codes => #{}},
    case gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}, {packet, http_bin},
                                               {nodelay, true}, {ip, {127, 0, 16, I}}], 5000) of
        {ok, S} ->
            R = post_loop(S, Uid, 0, T0, End, Gap, R0),
            gen_tcp:close(S),
            R;
        {error, _} -> R0#{errors := 1}
    end.

%% Request Seq is due at T0 + Seq * Gap ms; none starts after End.
post_loop(S, Uid, Seq, T0, End, Gap, R = #{sent := N, accepted := A, codes := C}) ->
    Due = T0 + round(Seq * Gap),
    case Due >= End of
        true -> R;
        false ->
            timer:sleep(max(0, Due - now_ms())),
            Body = iolist_to_binary(["p=", integer_to_list(Seq), ";t=",
                                     integer_to_list(os:system_time(nanosecond)), ";"]),
            Req = ["POST /send/", integer_to_list(Uid), " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   "Content-Type: text/plain\r\nContent-Length: ", integer_to_list(byte_size(Body)),
                   "\r\n\r\n", Body],
            case gen_tcp:send(S, Req) =:= ok andalso response(S) of
                202 -> post_loop(S, Uid, Seq + 1, T0, End, Gap, R#{sent := N + 1, accepted := A + 1});
                Code when is_integer(Code) ->
                    %% Refused, not delivered: the same SEQ goes again.
                    post_loop(S, Uid, Seq, T0 + round(Gap), End, Gap,
                              R#{sent := N + 1, codes := C#{Code => maps:get(Code, C, 0) + 1}});
                _ -> R#{sent := N + 1, errors := 1}
            end
    end.

%% The status of one answer, its body read past; error when the socket
%% breaks or 5 s pass.
response(S) ->
    case gen_tcp:recv(S, 0, 5000) of
        {ok, {http_response, _, Code, _}} -> headers(S, Code, 0);
        _ -> error
    end.

headers(S, Code, Len) ->
    case gen_tcp:recv(S, 0, 5000) of
        {ok, {http_header, _, 'Content-Length', _, V}} -> headers(S, Code, binary_to_integer(V));
        {ok, {http_header, _, _, _, _}} -> headers(S, Code, Len);
        {ok, http_eoh} when Len =:= 0 -> Code;
        {ok, http_eoh} ->
            ok = inet:setopts(S, [{packet, raw}]),
            R = gen_tcp:recv(S, Len, 5000),
            ok = inet:setopts(S, [{packet, http_bin}]),
            case R of {ok, _} -> Code; _ -> error end;
        _ -> error
    end.

ask(Dest, What) ->
    Ref = make_ref(),
    Dest ! {self(), Ref, What},
    receive {Ref, R} -> R
    after 10000 -> erlang:error({no_answer, Dest})
    end.

now_ms() -> erlang:monotonic_time(millisecond).

json(M) ->
    ["{", lists:join(",", [io_lib:format("\"~s\":~p", [K, V])
                           || {K, V} <- lists:sort(maps:to_list(M))]), "}"].
