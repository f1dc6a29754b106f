%% SPDX-License-Identifier: Apache-2.0
%% What the tests of client messages share: a raw WebSocket to /ws/N (the
%% upgrade sent, the 101 read), the masked frames a client sends and the
%% frames the server sends back, the {in, Uid, Conn, Data} an inbox passes
%% on to the test, and the masters that run an inbox for a server.
%%
%% Sockets are passive; what came past a head is kept in the process
%% dictionary under {buf, Sock}, as in httpdtest_raw. Every read and every
%% wait for the inbox is bounded by 10 s (not scaled); frame/1,2,3 mask with
%% the key 1, 2, 3, 4, and recv_frame/1 takes any frame as it comes.
-module(httpdtest_inbox).

-include_lib("eunit/include/eunit.hrl").

-export([ws_open/2, ws_open/3, split_recv/3, take/2, recv_frame/1, recv_frame_within/2,
         frame/1, frame/2, frame/3, collect/1, nothing_more/0,
         start_inbox/3, suspend/2, presence_master/1, stop_all/3, sink_test/4, inbox_server/2,
         chat_start/2, chat_args/0, app_start/3, app_start/4, app_test/5, app_case/5,
         app_stop/1]).

-define(T, 10000).
-define(INBOX, httpdcnode_inbox).
-define(UPGRADE, ["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13",
                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="]).

%%% ---------------------------------------------------------------- WebSocket

%% GET /ws/Uid with the upgrade and Headers: the 101 asserted, the bytes
%% past its head kept.
ws_open(S, Uid) -> ws_open(S, Uid, []).

ws_open(S, Uid, Headers) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, httpdtest_server:port_of(S),
                                 [binary, {active, false}]),
    ok = gen_tcp:send(Sock, httpdtest_http:request_bytes(
                              "GET", "/ws/" ++ integer_to_list(Uid), "HTTP/1.1",
                              ?UPGRADE ++ Headers)),
    {Head, Rest} = split_recv(Sock, <<"\r\n\r\n">>, <<>>),
    ?assertMatch(<<"HTTP/1.1 101 ", _/binary>>, Head),
    put({buf, Sock}, Rest),
    Sock.

%% {Before, After} of the first Sep in Acc and what comes on Sock after it.
split_recv(Sock, Sep, Acc) ->
    case binary:split(Acc, Sep) of
        [Before, After] -> {Before, After};
        [_] ->
            case gen_tcp:recv(Sock, 0, ?T) of
                {ok, More} -> split_recv(Sock, Sep, <<Acc/binary, More/binary>>);
                Err -> erlang:error({recv, Err, buffered, Acc})
            end
    end.

%% The next N bytes of the buffered stream.
take(Sock, N) -> take(Sock, N, ?T).

take(Sock, N, Timeout) ->
    case get({buf, Sock}) of
        <<Want:N/binary, Rest/binary>> ->
            put({buf, Sock}, Rest),
            Want;
        Buf ->
            case gen_tcp:recv(Sock, 0, Timeout) of
                {ok, More} -> put({buf, Sock}, <<Buf/binary, More/binary>>), take(Sock, N, Timeout);
                Err -> erlang:error({recv, Err, buffered, Buf})
            end
    end.

%% The next server frame {Fin, Opcode, Payload}.
recv_frame(Sock) -> recv_frame(Sock, ?T).

recv_frame(Sock, T) ->
    <<Fin:1, _:3, Op:4, _:1, Len0:7>> = take(Sock, 2, T),
    Len = case Len0 of
              126 -> <<L:16>> = take(Sock, 2, T), L;
              127 -> <<L:64>> = take(Sock, 8, T), L;
              _ -> Len0
          end,
    {Fin, Op, take(Sock, Len, T)}.

%% The same, or {error, Why} when no frame is whole within each read's
%% Timeout ms.
recv_frame_within(Sock, Timeout) ->
    try recv_frame(Sock, Timeout) catch error:{recv, Err, buffered, _} -> Err end.

%% A client frame, masked: a text frame of Payload; Op and Payload; with
%% Opts #{fin => 0} a fragment that is not the last.
frame(Payload) -> frame(1, Payload).

frame(Op, Payload) -> frame(Op, Payload, #{}).

frame(Op, Payload, Opts) ->
    Fin = maps:get(fin, Opts, 1),
    Len = byte_size(Payload),
    LenBits = if Len < 126 -> <<Len:7>>;
                 Len < 65536 -> <<126:7, Len:16>>;
                 true -> <<127:7, Len:64>>
              end,
    Key = <<1, 2, 3, 4>>,
    Pad = binary:copy(Key, Len div 4 + 1),
    <<Fin:1, 0:3, Op:4, 1:1, LenBits/bits, Key/binary,
      (crypto:exor(Payload, binary:part(Pad, 0, Len)))/binary>>.

%%% ---------------------------------------------------------------- inbox

%% N {Uid, Conn, Data} from the inbox, in the order they came.
collect(N) -> collect(N, []).

collect(0, Acc) -> lists:reverse(Acc);
collect(N, Acc) ->
    receive {in, Uid, Conn, Data} -> collect(N - 1, [{Uid, Conn, Data} | Acc])
    after ?T -> erlang:error({inbox_got_only, length(Acc), N})
    end.

%% No client message more within 200 ms.
nothing_more() ->
    receive {in, _, _, _} = M -> erlang:error({unexpected, M}) after 200 -> ok end.

%% On master node Node, an httpdcnode_inbox registered as 'inbox' with
%% Handler and its argument Arg (its code path added first): {ok, Pid}.
start_inbox(Node, Handler, Arg) ->
    AppEbin = filename:dirname(code:which(httpdcnode_inbox)),
    true = rpc:call(Node, code, add_patha, [AppEbin]),
    rpc:call(Node, httpdcnode_inbox, start, [inbox, Handler, Arg]).

%% A sink here named Prefix and a unique suffix, a master whose inbox (an
%% httpdcnode_inbox registered as 'inbox', calling inbox_test_handler)
%% passes each client message to it, and a server with --inbox inbox and
%% Args that counts the master as linked: {Master, Server, Sink}.
inbox_server(Prefix, Args) ->
    M = httpdtest_master:start_master(),
    Sink = list_to_atom(httpdtest_os:unique(Prefix)),
    httpdtest_master:start_sink(Sink),
    {ok, _} = start_inbox(httpdtest_master:master_node(M), inbox_test_handler, {Sink, node()}),
    S = httpdtest_server:start_server(#{master => M, extra_args => ["--inbox", "inbox" | Args]}),
    httpdtest_master:wait_master_sees(M, httpdtest_server:node_of(S), ?T),
    httpdtest_server:wait_stat(S, erl_masters, fun(V) -> V =:= 1 end, ?T),
    {M, S, Sink}.

%% A sink here named Prefix and a unique suffix, and a master whose
%% 'presence' forwards to it: {Sink, Master, its node}.
presence_master(Prefix) ->
    Sink = list_to_atom(httpdtest_os:unique(Prefix)),
    httpdtest_master:start_sink(Sink),
    M = httpdtest_master:start_master(httpdtest_master:new_master_name(),
                                      #{forwarder => {presence, {Sink, node()}}}),
    {Sink, M, httpdtest_master:master_node(M)}.

%% The server, the master and the sink stopped, in that order.
stop_all(M, S, Sink) ->
    httpdtest_server:stop_server(S),
    httpdtest_master:stop_master(M),
    httpdtest_master:stop_sink(Sink).

%% The EUnit test Fun() with Seconds (scaled) to run, subscribed to Sink
%% (the test runs in another process than its setup) and the server's log
%% shown if it fails.
sink_test(S, Sink, Seconds, Fun) ->
    {timeout, httpdtest_os:scaled(Seconds),
     fun() ->
             httpdtest_master:sink_subscribe(Sink),
             httpdtest_server:logged(S, fun(_) -> Fun() end)
     end}.

%% Pid (on node Node) suspended by a process there that stays, as a
%% suspension ends with the process that made it: that process, which
%% resumes Pid when sent 'resume'.
suspend(Node, Pid) ->
    Self = self(),
    Suspender = spawn(Node, fun() ->
                                    true = erlang:suspend_process(Pid),
                                    Self ! suspended,
                                    receive resume -> erlang:resume_process(Pid) end
                            end),
    receive suspended -> ok after ?T -> erlang:error(not_suspended) end,
    Suspender.

%% A master running the application as `make run` does (its env names the
%% inbox httpdcnode_inbox with the handler chat_room, a pool of 4), and a server with
%% presence and --inbox httpdcnode_inbox ExtraArgs that the master knows
%% within Timeout ms: #{master, mnode, server}. On a failure the master is
%% stopped.
chat_start(ExtraArgs, Timeout) ->
    app_start({?INBOX, chat_room, [], #{workers => 4}}, chat_args() ++ ExtraArgs, Timeout).

%% The server options `make run` gives the chat: its rooms are topics the
%% handler admits, and a WebSocket's end frees its memberships.
chat_args() -> ["--topic-auth", "handler", "--presence-conns"].

%% The same with the inbox's handler Handler (a module of tools/erlang/ebin,
%% as the examples are, or of the tests), init([]); or with the env inbox
%% InboxEnv ({httpdcnode_inbox, Handler, Args} or with Opts as a fourth
%% element).
app_start(Handler, ExtraArgs, Timeout) when is_atom(Handler) ->
    app_start(Handler, [], ExtraArgs, Timeout);
app_start(InboxEnv, ExtraArgs, Timeout) when is_tuple(InboxEnv) ->
    start_with_env(InboxEnv, ExtraArgs, Timeout).

%% The same with init(HandlerArgs).
app_start(Handler, HandlerArgs, ExtraArgs, Timeout) ->
    start_with_env({?INBOX, Handler, HandlerArgs}, ExtraArgs, Timeout).

start_with_env(InboxEnv, ExtraArgs, Timeout) ->
    M = httpdtest_master:start_master(),
    MNode = httpdtest_master:master_node(M),
    try
        Ebin = filename:absname(filename:dirname(code:which(httpdcnode))),
        TestEbin = filename:absname(filename:dirname(code:which(?MODULE))),
        true = m(MNode, code, add_patha, [Ebin]),
        true = m(MNode, code, add_pathz, [TestEbin]),
        ok = m(MNode, application, load, [httpdcnode]),
        ok = m(MNode, application, set_env, [httpdcnode, inbox, InboxEnv]),
        {ok, _} = m(MNode, application, ensure_all_started, [httpdcnode]),
        ?assert(is_pid(m(MNode, erlang, whereis, [?INBOX]))),
        S = httpdtest_server:start_server(#{master => M, presence => httpdcnode_presence,
                                            extra_args => ["--inbox", atom_to_list(?INBOX)
                                                           | ExtraArgs]}),
        CNode = httpdtest_server:node_of(S),
        httpdtest_wait:wait_until(
          fun() -> lists:member(CNode, m(MNode, httpdcnode, nodes, [])) end, Timeout,
          {master_knows, CNode}),
        #{master => M, mnode => MNode, server => S}
    catch C:E:St ->
            httpdtest_master:stop_master(M),
            erlang:raise(C, E, St)
    end.

%% The EUnit test Fun(Server) on app_start(Handler, Args), with Seconds
%% (scaled) to run and the server's log shown if it fails; the server and
%% the master stopped after.
app_case(Label, Handler, Args, Seconds, Fun) ->
    {Label,
     {setup, fun() -> app_start(Handler, Args, ?T) end, fun app_stop/1,
      fun(#{server := S}) ->
              {timeout, httpdtest_os:scaled(Seconds),
               fun() -> httpdtest_server:logged(S, fun(_) -> Fun(S) end) end}
      end}}.

%% What app_start started, stopped: the server, then the master.
app_stop(#{master := M, server := S}) ->
    httpdtest_server:stop_server(S),
    httpdtest_master:stop_master(M).

%% The EUnit test Fun(Ctx) on app_start(Handler, {Sink, node()}, Args): a
%% sink here named Prefix and a unique suffix takes what the handler
%% passes on. Ctx: app_start's map and sink; all stopped after.
app_test(Label, Handler, Prefix, Args, Fun) ->
    {Label,
     {setup,
      fun() ->
              Sink = list_to_atom(httpdtest_os:unique(Prefix)),
              httpdtest_master:start_sink(Sink),
              Ctx = app_start(Handler, {Sink, node()}, Args, ?T),
              Ctx#{sink => Sink}
      end,
      fun(#{master := M, server := S, sink := Sink}) -> stop_all(M, S, Sink) end,
      fun(Ctx = #{server := S, sink := Sink}) ->
              sink_test(S, Sink, 120, fun() -> Fun(Ctx) end)
      end}}.

m(Node, Mod, F, A) -> erpc:call(Node, Mod, F, A, 30000).
