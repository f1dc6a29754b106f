%% The Erlang side of the "client -> Erlang" section of `make bench'
%% (scripts/bench/inbox.sh).
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

handle_in(Uid, Conn, <<Kind, "=", Rest/binary>>, S) when Kind =:= $q; Kind =:= $r ->
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
