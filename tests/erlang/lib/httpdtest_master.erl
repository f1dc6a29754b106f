%% SPDX-License-Identifier: Apache-2.0
%% Erlang master nodes for the black-box tests, each a separate OS process (a
%% plain erl -sname with this suite's beams on its path) that halts when the
%% test node goes; killed and restarted under the same name. Sinks that keep
%% what a name on this node gets, and forwarders run on a master.
-module(httpdtest_master).

%% masters
-export([start_master/0, start_master/1, start_master/2, new_master_name/0, stop_master/1,
         kill_master/1, restart_master/1, kill_master_by_name/1, master_node/1, master_sees/2,
         wait_master_sees/3]).
%% sinks on this node, forwarders on a master
-export([start_forwarder/2, start_sink/1, sink_subscribe/1, stop_sink/1]).
%% for the other test helpers
-export([wait_name_free/2]).

-import(httpdtest_os, [cookie/0, ebin_dir/0, log_path/1, log_tail/1, proc_status/1, signal/2,
                       spawn_os/5, stop_proc/1, unique/1, wait_exit/2]).
-import(httpdtest_wait, [wait_until/3]).

-define(WATCH_STDIN,
        "spawn(fun W() -> case io:get_line('') of eof -> erlang:halt(); _ -> W() end end)").

start_master() -> start_master(new_master_name()).

new_master_name() -> list_to_atom(unique("httpdmaster") ++ "@localhost").

start_master(Node) -> start_master(Node, #{}).

%% Starts (or starts again) the master Node: a plain `erl -sname`, with
%% this suite's beams on its path; it halts when this test node goes.
%% Opts: forwarder => {Name, Dest}: from boot on, a process registered as
%% Name on the master forwards what it gets to Dest (see start_forwarder);
%% ticktime => S: its net_ticktime (default Erlang's, 60).
start_master(Node, Opts) when is_atom(Node) ->
    [Alive, _Host] = string:split(atom_to_list(Node), "@"),
    ok = wait_name_free(Alive, 10000),
    Log = log_path(Alive),
    %% Distribution starts last, so a forwarder is there before any node
    %% can reach the master.
    Fwd = case maps:get(forwarder, Opts, none) of
              none -> "";
              {Name, Dest} ->
                  io_lib:format("{ok, _} = ~p:start_forwarder(~p, ~p), ", [?MODULE, Name, Dest])
          end,
    %% start/2: the list form would ignore -kernel net_ticktime.
    Boot = lists:flatten([?WATCH_STDIN, ", ", Fwd,
                          io_lib:format("{ok, _} = net_kernel:start(~p, #{name_domain => shortnames})", [Node])]),
    Tick = case maps:get(ticktime, Opts, default) of
               default -> [];
               Secs -> ["-kernel", "net_ticktime", integer_to_list(Secs)]
           end,
    Args = ["-setcookie", cookie(), "-noshell", "-pa", ebin_dir(), "-eval", Boot] ++ Tick,
    Proc = spawn_os(os:find_executable("erl"), Args, Log, Alive, exec),
    M = #{node => Node, proc => Proc, log => Log, opts => Opts},
    try
        wait_until(fun() ->
                           case proc_status(Proc) of
                               {exited, St} -> erlang:error({master_exited, St, log_tail(Log)});
                               running -> net_adm:ping(Node) =:= pong
                           end
                   end, 20000, {master_up, Node}),
        M
    catch C:E:T ->
            stop_proc(Proc),
            erlang:raise(C, E, T)
    end.

master_node(#{node := N}) -> N.

%% The same master again, after kill_master.
restart_master(#{node := N, opts := Opts}) -> start_master(N, Opts).

%% Ends whatever OS process runs as master Node now (started by this
%% suite): for fixture cleanups that may run after a test restarted it.
kill_master_by_name(Node) ->
    case rpc:call(Node, os, getpid, [], 3000) of
        P when is_list(P) ->
            os:cmd("kill -KILL " ++ P),
            erlang:disconnect_node(Node),
            [Alive, _] = string:split(atom_to_list(Node), "@"),
            catch wait_name_free(Alive, 5000),
            ok;
        _ -> ok
    end.

stop_master(M = #{proc := P, node := N}) ->
    stop_proc(P),
    erlang:disconnect_node(N),
    M.

%% SIGKILL, then wait until epmd has let the name go.
kill_master(#{proc := P, node := N}) ->
    _ = signal(P, "KILL"),
    {ok, _, _} = wait_exit(P, 10000),
    stop_proc(P),
    [Alive, _] = string:split(atom_to_list(N), "@"),
    ok = wait_name_free(Alive, 10000).

wait_name_free(Alive, Timeout) ->
    wait_until(fun() -> erl_epmd:port_please(Alive, "localhost") =:= noport end,
               Timeout, {epmd_name_free, Alive}),
    ok.

%% Whether the master lists Node in its nodes(hidden).
master_sees(#{node := M}, Node) -> master_sees(M, Node);
master_sees(M, Node) ->
    case rpc:call(M, erlang, nodes, [hidden], 3000) of
        L when is_list(L) -> lists:member(Node, L);
        _ -> false
    end.

wait_master_sees(M, Node, Timeout) ->
    wait_until(fun() -> master_sees(M, Node) end, Timeout, {master_sees, Node}).

%% A process registered as Name on this node that keeps what it gets
%% until a subscriber comes, then passes everything on to it.
start_sink(Name) ->
    Pid = spawn(fun() -> sink_loop(none, []) end),
    true = register(Name, Pid),
    Pid.

sink_loop(Sub, Queue) ->
    receive
        {sink_subscribe, Pid} ->
            [Pid ! M || M <- lists:reverse(Queue)],
            sink_loop(Pid, []);
        sink_stop -> ok;
        M when Sub =:= none -> sink_loop(Sub, [M | Queue]);
        M -> Sub ! M, sink_loop(Sub, Queue)
    end.

sink_subscribe(Name) -> Name ! {sink_subscribe, self()}, ok.

stop_sink(Name) -> catch Name ! sink_stop, ok.

%% Runs on the master: a process registered as Name that forwards
%% everything it receives to To as {forwarded, Name, Msg}.
start_forwarder(Name, To) ->
    Self = self(),
    Pid = spawn(fun() ->
                        register(Name, self()),
                        Self ! {registered, self()},
                        forward_loop(Name, To)
                end),
    receive {registered, Pid} -> {ok, Pid} after 5000 -> {error, timeout} end.

forward_loop(Name, To) ->
    receive Msg -> To ! {forwarded, Name, Msg} end,
    forward_loop(Name, To).
