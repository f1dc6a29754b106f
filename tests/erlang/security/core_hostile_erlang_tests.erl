%% SPDX-License-Identifier: Apache-2.0
%% Erlang peers that are hostile or broken must not stop the C-node:
%% - a reply-form message as large as the decoder accepts, with a pid and a
%%   ref on a node named by 255 four-byte UTF-8 characters;
%% - TCP connections to the C-node's port that never say anything;
%% - an epmd that accepts connections and never answers;
%% - a message far over --max-message (its receive buffer is given back).
-module(core_hostile_erlang_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_server, [server_test/4, send/2, stats/1, wait_stat/4, node_of/1]).
-import(httpdtest_wait, [wait_until/3]).
-import(httpdtest_http, [open_stream/2, expect_chunk/2, close/1]).

-define(T, 5000).
%% src/main.c: a 32 MiB hand-off, whose largest record is half of it less
%% an 8-byte header; a record starts with a 32-byte struct cmd.
-define(MAX_RECORD, (16 * 1024 * 1024 - 8)).
-define(CMD_HEADER, 32).
-define(MAX_MESSAGE, 65536).

%%% ---------------------------------------------------------------- the largest reply

%% A pid and a ref of node name 255 x U+1F600 (1020 bytes): the largest ei decodes.
huge_pid_and_ref() ->
    A = unicode:characters_to_binary(lists:duplicate(255, 16#1F600)),
    Atom = <<118, (byte_size(A)):16, A/binary>>,
    Pid = binary_to_term(<<131, 88, Atom/binary, 1:32, 0:32, 7:32>>),
    Ref = binary_to_term(<<131, 90, 5:16, Atom/binary, 7:32, 1:32, 2:32, 3:32, 4:32, 5:32>>),
    {Pid, Ref}.

%% The uid list the decoder used to accept: what is left of a record once
%% the payload and 1024 bytes for {Pid, Ref} are in. With this pid and ref
%% (2086 bytes) the record did not fit, and the C-node thread waited for
%% room for it for ever.
old_max_uids() -> (?MAX_RECORD - ?CMD_HEADER - ?MAX_MESSAGE - 1024) div 4.
%% The real bound: room for the largest {Pid, Ref}.
max_uids() -> (?MAX_RECORD - ?CMD_HEADER - ?MAX_MESSAGE - 2086) div 4.

%% Answered within a bounded wait: {Pid, Ref, stats} and a message to a stream.
still_served(S, Uid) ->
    Ref = make_ref(),
    send(S, {self(), Ref, stats}),
    receive {Ref, Map} when is_map(Map) -> ok
    after ?T -> erlang:error(no_stats_reply)
    end,
    C = open_stream(S, Uid),
    send(S, {Uid, <<"still here">>}),
    <<"still here">> = expect_chunk(C, ?T),
    close(C).

largest_reply_test_() ->
    server_test("the largest reply message is refused or applied, never waited on", #{}, 120, fun(S) ->
        {Pid, Ref} = huge_pid_and_ref(),
        Data = binary:copy(<<"d">>, ?MAX_MESSAGE),
        TooBig0 = maps:get(too_big, stats(S)),
        %% Too large a record: refused and counted, not waited for.
        send(S, {Pid, Ref, lists:duplicate(old_max_uids(), 1), Data}),
        wait_stat(S, too_big, fun(V) -> V =:= TooBig0 + 1 end, 30000),
        still_served(S, 7),
        %% The longest list that fits is accepted and applied.
        Applied0 = maps:get(msgs_applied, stats(S)),
        send(S, {Pid, Ref, lists:duplicate(max_uids(), 1), Data}),
        wait_stat(S, msgs_applied, fun(V) -> V > Applied0 end, 30000),
        ?assertEqual(TooBig0 + 1, maps:get(too_big, stats(S))),
        still_served(S, 8)
    end).

%%% ---------------------------------------------------------------- silent connections

cnode_port(S) ->
    [Alive, _] = string:split(atom_to_list(node_of(S)), "@"),
    {port, Port, _} = erl_epmd:port_please(Alive, "localhost"),
    Port.

silent(Port) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}]),
    Sock.

%% A connection that never says anything holds a handshake thread for up
%% to 3 s, never the C-node thread: with four of them pending (the old
%% code spent 2 s in each, in turn), 2000 messages and a stats request are
%% answered at once; a fifth is refused and counted; a real node still gets
%% in, once the silent ones time out at the latest.
silent_connections_test_() ->
    server_test("silent connections hold no C-node thread", #{}, 60, fun(S) ->
        Port = cnode_port(S),
        In0 = maps:get(msgs_in, stats(S)),
        Silent = [silent(Port) || _ <- lists:seq(1, 4)],
        T0 = erlang:monotonic_time(millisecond),
        [send(S, {5, <<"x">>}) || _ <- lists:seq(1, 2000)],
        Ref = make_ref(),
        send(S, {self(), Ref, stats}),
        Map = receive {Ref, M} -> M after 6000 -> erlang:error(stats_reply_stalled) end,
        Took = erlang:monotonic_time(millisecond) - T0,
        ?assert(maps:get(msgs_in, Map) >= In0 + 2000),
        io:format(user, "~n  2000 messages + stats with 4 silent connections: ~b ms~n", [Took]),
        Fifth = silent(Port),
        wait_stat(S, erl_refused, fun(V) -> V >= 1 end, ?T),
        %% A real node (this one, reconnecting) gets in.
        Node = node_of(S),
        erlang:disconnect_node(Node),
        wait_until(fun() -> net_kernel:connect_node(Node) end, 10000, reconnect),
        still_served(S, 9),
        [gen_tcp:close(X) || X <- [Fifth | Silent]]
    end).

%%% ---------------------------------------------------------------- the receive buffer

%% A message of 64 MiB (refused: over --max-message) made the C-node's
%% receive buffer that large for good; it is given back now.
receive_buffer_test_() ->
    server_test("the receive buffer is given back after a huge message", #{}, 60, fun(S) ->
        Base = maps:get(memory, stats(S)),
        TooBig0 = maps:get(too_big, stats(S)),
        send(S, {5, binary:copy(<<"m">>, 64 * 1024 * 1024)}),
        wait_stat(S, too_big, fun(V) -> V > TooBig0 end, 30000),
        httpdtest_os:memory_judged() andalso
            wait_stat(S, memory, fun(V) -> V < Base + 32 * 1024 * 1024 end, 10000),
        still_served(S, 10)
    end).

%%% ---------------------------------------------------------------- a hung epmd

%% A fake epmd on a port of its own: in phase hang it accepts and never
%% answers; in phase serve it registers names (ALIVE2_REQ) and answers
%% PORT_PLEASE2_REQ for one name with the port of this test node.
fake_epmd() ->
    {ok, L} = gen_tcp:listen(0, [binary, {ip, {127, 0, 0, 1}}, {active, false},
                                 {reuseaddr, true}, {packet, 2}]),
    {ok, Port} = inet:port(L),
    Parent = self(),
    Pid = spawn(fun() -> fake_loop(L, Parent, hang, []) end),
    ok = gen_tcp:controlling_process(L, Pid),
    Pid ! accept,
    #{pid => Pid, port => Port}.

fake_loop(L, Parent, Phase, Held) ->
    Self = self(),
    receive
        accept ->
            case gen_tcp:accept(L, 100) of
                {ok, Sock} ->
                    Parent ! {fake_epmd, connection, Phase},
                    case Phase of
                        hang -> ok;
                        {serve, Answer} ->
                            H = spawn(fun() -> serve(Sock, Answer, Parent) end),
                            ok = gen_tcp:controlling_process(Sock, H)
                    end,
                    Self ! accept,
                    fake_loop(L, Parent, Phase, [Sock | Held]);
                {error, timeout} ->
                    Self ! accept,
                    fake_loop(L, Parent, Phase, Held)
            end;
        {phase, P} -> fake_loop(L, Parent, P, Held);
        stop -> [gen_tcp:close(S) || S <- Held], gen_tcp:close(L)
    end.

%% Answer: the name and port that PORT_PLEASE2_REQ may ask for.
serve(Sock, {Name, NodePort}, Parent) ->
    case gen_tcp:recv(Sock, 0, 5000) of
        {ok, <<120, Port:16, _Type, _Proto, _High:16, _Low:16, NLen:16, Alive:NLen/binary,
               _/binary>>} ->
            ok = inet:setopts(Sock, [{packet, raw}]),
            ok = gen_tcp:send(Sock, <<118, 0, 1:32>>),
            Parent ! {fake_epmd, registered, binary_to_list(Alive), Port},
            receive stop -> ok end;          % the registration lasts while this is open
        {ok, <<122, Alive/binary>>} ->
            ok = inet:setopts(Sock, [{packet, raw}]),
            Reply = case binary_to_list(Alive) of
                        Name ->
                            <<119, 0, NodePort:16, 72, 0, 6:16, 5:16,
                              (length(Name)):16, (list_to_binary(Name))/binary, 0:16>>;
                        _ -> <<119, 1>>
                    end,
            gen_tcp:send(Sock, Reply),
            gen_tcp:close(Sock);
        _ -> gen_tcp:close(Sock)
    end.

stop_fake(#{pid := Pid}) -> Pid ! stop.

%% The server, with ERL_EPMD_PORT at the fake and this node as its master.
start_with_epmd(EpmdPort) ->
    Name = httpdtest_os:unique("c1"),
    HttpPort = httpdtest_os:free_port(),
    AdminPort = httpdtest_os:free_port(),
    Args = ["ERL_EPMD_PORT=" ++ integer_to_list(EpmdPort),
            httpdtest_server:server_exe(),
            "--listen", "127.0.0.1:" ++ integer_to_list(HttpPort),
            "--admin-listen", "127.0.0.1:" ++ integer_to_list(AdminPort),
            "--name", Name ++ "@localhost", "--master", atom_to_list(node()),
            "--cookie", httpdtest_os:cookie()],
    Log = httpdtest_os:log_path(Name),
    P = httpdtest_os:spawn_os("/usr/bin/env", Args, Log, Name),
    S = #{node => list_to_atom(Name ++ "@localhost"), port => HttpPort, admin_port => AdminPort,
          proc => P, log => Log},
    wait_until(fun() -> is_map(catch stats(S)) end, 10000, http_up),
    {S, Name}.

%% Waits (at most Timeout ms) for Want connections to the fake epmd;
%% returns how many came.
count_connections(Want, Timeout) ->
    count_connections(0, Want, erlang:monotonic_time(millisecond) + Timeout).

count_connections(N, Want, _Deadline) when N >= Want -> N;
count_connections(N, Want, Deadline) ->
    Left = max(0, Deadline - erlang:monotonic_time(millisecond)),
    receive {fake_epmd, connection, _} -> count_connections(N + 1, Want, Deadline)
    after Left -> N
    end.

%% While epmd hangs, the server serves HTTP and keeps trying (each attempt
%% bounded); once epmd answers, it registers and connects to its master.
hung_epmd_test_() ->
    {timeout, 60, fun() ->
        Fake = fake_epmd(),
        {S, Name} = start_with_epmd(maps:get(port, Fake)),
        try
            %% More than one attempt within 4 s: none waits for ever.
            ?assertEqual(3, count_connections(3, 6000)),
            #{} = stats(S),
            [MyAlive, _] = string:split(atom_to_list(node()), "@"),
            {port, MyPort, _} = erl_epmd:port_please(MyAlive, "localhost"),
            maps:get(pid, Fake) ! {phase, {serve, {MyAlive, MyPort}}},
            receive {fake_epmd, registered, Name, CPort} -> ?assert(CPort > 0)
            after 10000 -> erlang:error(not_registered)
            end,
            Node = maps:get(node, S),
            wait_until(fun() -> lists:member(Node, nodes(hidden)) end, 10000, master_link),
            Ref = make_ref(),
            {any, Node} ! {self(), Ref, stats},
            receive {Ref, M} when is_map(M) -> ok after ?T -> erlang:error(no_stats_reply) end
        after
            httpdtest_server:stop_server(S),
            stop_fake(Fake)
        end
    end}.

%% SIGTERM while epmd hangs: the server exits at once, with status 0.
hung_epmd_sigterm_test_() ->
    {timeout, 30, fun() ->
        Fake = fake_epmd(),
        {S, _} = start_with_epmd(maps:get(port, Fake)),
        try
            ?assertEqual(1, count_connections(1, 5000)),
            httpdtest_os:signal(S, "TERM"),
            ?assertMatch({ok, 0, _}, httpdtest_os:wait_exit(S, 3000))
        after
            httpdtest_server:stop_server(S),
            stop_fake(Fake)
        end
    end}.
