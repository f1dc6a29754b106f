%% SPDX-License-Identifier: Apache-2.0
%% The server under test: a real ./httpdcnode started on free ports with its
%% own node name, stopped, killed, restarted as the same C-node and taken over
%% by a new process; its admin port (/stats as a map, /metrics, waits on a
%% counter); the EUnit fixtures that start it (and a master) for a test and end
%% them after, printing the end of its log when the test fails.
-module(httpdtest_server).

%% the server
-export([start_server/1, stop_server/1, node_of/1, port_of/1, admin_port_of/1, send/2,
         run_cli/2]).
%% a server killed and started again as the same C-node
-export([kill_server/1, restart_server/1]).
%% a new server process taking over from a running one (hot upgrade)
-export([takeover_server/1, takeover_server/2, server_args/1]).
%% its admin port
-export([stats/1, metrics/1, admin_get/2, wait_stat/4]).
%% EUnit fixtures
-export([server_test/4, server_test/5, master_server_test/4, logged/2]).
%% for tests that start the server their own way
-export([server_exe/0]).

-import(httpdtest_os, [cookie/0, free_port/0, log_path/1, log_tail/1, log_tail/2, now_ms/0,
                       proc_status/1, repo_root/0, scaled/1, settled_status/1, signal/2,
                       spawn_os/4, stop_proc/1, unique/1, wait_exit/2]).
-import(httpdtest_wait, [summarize/1, wait_until/3]).
-import(httpdtest_json, [json_decode/1, with_fraction/1]).
-import(httpdtest_http, [http_request/2]).
-import(httpdtest_master, [kill_master_by_name/1, master_node/1, new_master_name/0,
                           start_master/0, stop_master/1, wait_name_free/2]).

server_exe() ->
    case os:getenv("HTTPDCNODE_BIN") of
        false -> filename:join(repo_root(), "httpdcnode");
        Bin -> filename:absname(Bin)
    end.

%% The server's command line: {Exe, Args}. $HTTPDTEST_SERVER_PREFIX, a
%% command and its arguments split at spaces (e.g. "valgrind -q"), runs it.
server_cmd(Args) ->
    case string:lexemes(os:getenv("HTTPDTEST_SERVER_PREFIX", ""), " ") of
        [] -> {server_exe(), Args};
        [Cmd | Pre] ->
            case os:find_executable(Cmd) of
                false -> erlang:error({server_prefix_not_found, Cmd});
                Exe -> {Exe, Pre ++ [server_exe() | Args]}
            end
    end.

%% Runs the server binary with Args (a command-line check), bounded:
%% {ExitStatus, Output} or {timeout, Output} after killing it.
run_cli(Args, Timeout) ->
    Log = log_path(unique("cli")),
    {Exe, CmdArgs} = server_cmd(Args),
    P = spawn_os(Exe, CmdArgs, Log, "httpdcnode"),
    Res = case wait_exit(P, Timeout) of
              {ok, St, _} -> St;
              timeout -> timeout
          end,
    stop_proc(P),
    {ok, Out} = file:read_file(Log),
    {Res, Out}.

%% Opts: master (atom, or a master map), max_users, max_message,
%% max_conns_per_uid, max_backlog, max_backlog_total, header_timeout,
%% keepalive, presence, extra_args (list of strings),
%% fd_limit (the server's open-files limit, soft and hard, set by prlimit),
%% admin: port (default: --admin-listen on a free port of its own), same
%% (--admin-listen is --listen), none (--admin-listen "": no /stats) or
%% default (no --admin-listen: only for a test that holds 127.0.0.1:8001).
%% Without a master, one that never runs is named so the server does not
%% go to the default name another run may use. The map returned has port
%% (public) and admin_port (none without an admin listener).
start_server(Opts) -> start_server(Opts, 3).

start_server(Opts, Attempts) ->
    Name = unique("c1"),
    Node = list_to_atom(Name ++ "@localhost"),
    Port = free_port(),
    {AdminPort, AdminArgs} =
        case maps:get(admin, Opts, port) of
            port -> P = free_port(), {P, ["--admin-listen", admin_address(P)]};
            same -> {Port, ["--admin-listen", admin_address(Port)]};
            none -> {none, ["--admin-listen", ""]};
            default -> {none, []}     % 127.0.0.1:8001, which the test must hold itself
        end,
    Master = case maps:get(master, Opts, none) of
                 none -> list_to_atom(unique("httpdmaster_absent") ++ "@localhost");
                 #{node := MN} -> MN;
                 MN when is_atom(MN) -> MN
             end,
    Args = ["--listen", "127.0.0.1:" ++ integer_to_list(Port),
            "--name", atom_to_list(Node),
            "--master", atom_to_list(Master),
            "--cookie", cookie()]
        ++ AdminArgs ++ option_args(Opts) ++ maps:get(extra_args, Opts, []),
    Log = log_path(Name),
    {Exe, CmdArgs} = server_cmd(Args),
    ok = file:write_file(Log, ["# ", lists:join(" ", [Exe | CmdArgs]), "\n"]),
    Proc = case maps:get(fd_limit, Opts, none) of
               none -> spawn_os(Exe, CmdArgs, Log, Name);
               N -> spawn_os("/usr/bin/prlimit",
                             ["--nofile=" ++ integer_to_list(N) ++ ":" ++ integer_to_list(N),
                              "--", Exe | CmdArgs], Log, Name)
           end,
    S = #{node => Node, port => Port, admin_port => AdminPort, proc => Proc, log => Log,
          master => Master, max_users => maps:get(max_users, Opts, 1114112), opts => Opts},
    case wait_ready(S, now_ms() + scaled(15000)) of
        ok -> S;
        {exited, St} when Attempts > 1 ->
            %% most likely a port was taken between free_port and bind (the
            %% public one: 1; the admin one: 2, as is a bad option)
            case St =/= 2 orelse port_taken(Log) of
                true ->
                    io:format(user, "~nserver ~s exited (~p) while starting, retrying:~n~s~n",
                              [Name, St, log_tail(Log, 5)]),
                    stop_proc(Proc),
                    start_server(Opts, Attempts - 1);
                false ->
                    stop_proc(Proc),
                    erlang:error({server_not_ready, {exited, St}, log_tail(Log)})
            end;
        Err ->
            Tail = log_tail(Log),
            stop_proc(Proc),
            erlang:error({server_not_ready, Err, Tail})
    end.

port_taken(Log) ->
    {ok, B} = file:read_file(Log),
    binary:match(B, <<"for --admin-listen: Address already in use">>) =/= nomatch.

admin_address(none) -> "";
admin_address(P) -> "127.0.0.1:" ++ integer_to_list(P).

option_args(Opts) ->
    lists:append(
      [[Flag, to_list(maps:get(K, Opts))] || {K, Flag} <- [{max_users, "--max-users"},
                                                          {max_message, "--max-message"},
                                                          {max_conns_per_uid, "--max-conns-per-uid"},
                                                          {max_backlog, "--max-backlog"},
                                                          {max_backlog_total, "--max-backlog-total"},
                                                          {header_timeout, "--header-timeout"},
                                                          {keepalive, "--keepalive"},
                                                          {presence, "--presence"}],
                                             maps:is_key(K, Opts)]).

to_list(I) when is_integer(I) -> integer_to_list(I);
to_list(A) when is_atom(A) -> atom_to_list(A);
to_list(L) when is_list(L) -> L.

%% Ready: GET /stats answers 200 (without an admin listener: HEAD /test/1
%% does) and the C-node takes a connection from this node.
wait_ready(S = #{node := Node, proc := Proc}, Deadline) ->
    case proc_status(Proc) of
        {exited, St} -> {exited, St};
        running ->
            Ok = try http_up(S) of
                     true -> net_kernel:connect_node(Node) =:= true;
                     false -> false
                 catch _:_ -> false
                 end,
            case Ok of
                true -> ok;
                false ->
                    case now_ms() >= Deadline of
                        true -> {not_ready_in_time, proc_status(Proc)};
                        false -> timer:sleep(50), wait_ready(S, Deadline)
                    end
            end
    end.

http_up(S = #{admin_port := none}) ->
    R = http_request(port_of(S), "HEAD /test/1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
    maps:get(status, R) =:= 200;
http_up(S) -> is_map(stats(S)).

stop_server(S = #{proc := P, node := Node}) ->
    stop_proc(P),
    erlang:disconnect_node(Node),
    S.

%% SIGKILL: the C-node dies as in a crash (no drain, no goodbye to its
%% masters); returns once it exited and epmd let its name go.
kill_server(S = #{proc := P, node := Node}) ->
    _ = signal(P, "KILL"),
    {ok, _, _} = wait_exit(P, 10000),
    stop_proc(P),
    erlang:disconnect_node(Node),
    [Alive, _] = string:split(atom_to_list(Node), "@"),
    ok = wait_name_free(Alive, 10000),
    S.

%% Starts S again after it exited, as a service manager would: the same
%% node name, ports, masters and options (a new epoch, an empty history).
%% Its output goes on in the same log. Returns the new server map.
restart_server(S) -> restart_server(S, 3).

restart_server(S = #{node := Node, log := Log}, Attempts) ->
    [Alive, _] = string:split(atom_to_list(Node), "@"),
    ok = wait_name_free(Alive, 10000),
    {Exe, CmdArgs} = server_cmd(server_args(S)),
    ok = file:write_file(Log, ["# restarted: ", lists:join(" ", [Exe | CmdArgs]), "\n"],
                         [append]),
    Proc = spawn_os(Exe, CmdArgs, Log, Alive),
    S1 = S#{proc => Proc},
    case wait_ready(S1, now_ms() + scaled(15000)) of
        ok -> S1;
        {exited, St} when Attempts > 1 ->
            %% its ports are its own; one may still be held for a moment
            io:format(user, "~nserver ~s exited (~p) while restarting, retrying:~n~s~n",
                      [Alive, St, log_tail(Log, 5)]),
            stop_proc(Proc),
            restart_server(S, Attempts - 1);
        Err ->
            Tail = log_tail(Log),
            stop_proc(Proc),
            erlang:error({server_not_ready, Err, Tail})
    end.

%% The command line start_server gave S (without the executable).
server_args(#{node := Node, port := Port, admin_port := AdminPort, master := Master,
              opts := Opts}) ->
    AdminArgs = case maps:get(admin, Opts, port) of
                    none -> ["--admin-listen", ""];
                    default -> [];
                    _ -> ["--admin-listen", admin_address(AdminPort)]   % port, same
                end,
    ["--listen", "127.0.0.1:" ++ integer_to_list(Port),
     "--name", atom_to_list(Node),
     "--master", atom_to_list(Master),
     "--cookie", cookie()]
        ++ AdminArgs ++ option_args(Opts) ++ maps:get(extra_args, Opts, []).

%% A new process started with S's command line, --takeover and Extra
%% (more arguments: a differing option), in the environment Env
%% ("NAME=VALUE" strings): {ok, S2} once the old process exited 0 (S2 is
%% S with the new process), or {refused, ExitStatus, S} when the new one
%% exited (the old one serves on). Its output goes on in S's log.
takeover_server(S) -> takeover_server(S, #{}).

takeover_server(S = #{proc := Old, node := Node, log := Log}, Opts) ->
    [Alive, _] = string:split(atom_to_list(Node), "@"),
    {Exe, CmdArgs} = server_cmd(server_args(S) ++ maps:get(extra, Opts, []) ++ ["--takeover"]),
    {Exe1, Args1} = case maps:get(env, Opts, []) of
                        [] -> {Exe, CmdArgs};
                        Env -> {"/usr/bin/env", Env ++ [Exe | CmdArgs]}
                    end,
    ok = file:write_file(Log, ["# takeover: ", lists:join(" ", [Exe1 | Args1]), "\n"], [append]),
    New = spawn_os(Exe1, Args1, Log, Alive),
    wait_until(fun() ->
                       case {proc_status(New), proc_status(Old)} of
                           {{exited, St}, _} -> stop_proc(New), {true, {refused, St, S}};
                           {running, {exited, 0}} -> stop_proc(Old), {true, {ok, S#{proc => New}}};
                           {running, {exited, St}} -> erlang:error({old_server_exited, St});
                           Both -> {false, Both}
                       end
               end, 60000, {takeover, Alive}).

node_of(#{node := N}) -> N.
port_of(#{port := P}) -> P.
%% The admin listener's port (/stats, /metrics, /probe); none without one.
admin_port_of(#{admin_port := P}) -> P;
admin_port_of(#{port := P}) -> P.      % a map made by hand: --admin-listen is --listen

%% Sends Msg from this node to the C-node (any registered name will do).
send(#{node := Node}, Msg) ->
    {any, Node} ! Msg,
    ok.

%% GET Path on the admin port: the response map (status, headers, body).
admin_get(S, Path) ->
    case admin_port_of(S) of
        none -> erlang:error({no_admin_listener, Path});
        P -> http_request(P, "GET " ++ Path ++ " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    end.

%% GET /stats as a map with atom keys.
stats(S) ->
    case admin_get(S, "/stats") of
        #{status := 200, body := Body} -> atomize(json_decode(Body));
        R -> erlang:error({stats_failed, summarize(R)})
    end.

%% GET /metrics: the Prometheus text as #{Sample => Value}, a sample named
%% with its labels as written ("httpdcnode_x{reason=\"y\"}").
metrics(S) ->
    case admin_get(S, "/metrics") of
        #{status := 200, body := Body} ->
            maps:from_list([begin
                                [K, V] = string:split(L, " ", trailing),
                                {K, binary_to_number(V)}
                            end || L <- binary:split(Body, <<"\n">>, [global, trim]),
                                   L =/= <<>>, binary:first(L) =/= $#]);
        R -> erlang:error({metrics_failed, summarize(R)})
    end.

binary_to_number(B) ->
    try binary_to_integer(B) catch error:badarg -> binary_to_float(with_fraction(B)) end.

atomize(M) when is_map(M) ->
    maps:from_list([{binary_to_atom(K, utf8), atomize(V)} || {K, V} <- maps:to_list(M)]);
atomize(V) -> V.

%% Polls /stats until Pred(value of Key) holds; returns the stats map.
wait_stat(S, Key, Pred, Timeout) ->
    wait_until(fun() ->
                       St = stats(S),
                       V = maps:get(Key, St, missing),
                       case V =/= missing andalso Pred(V) of
                           true -> {true, St};
                           false -> {false, {Key, V}}
                       end
               end, Timeout, {stat, Key}).

%% An EUnit test on a fresh server started with Opts and stopped after:
%% cleanup runs even when the test fails or times out.
server_test(Label, Opts, Timeout, Fun) ->
    {setup, fun() -> start_server(Opts) end, fun stop_server/1,
     fun(S) -> {timeout, scaled(Timeout), {Label, fun() -> logged(S, Fun) end}} end}.

%% The same with a master: Fun(S, Master).
server_test(Label, Master, Opts, Timeout, Fun) ->
    server_test(Label, Opts#{master => Master}, Timeout, fun(S) -> Fun(S, Master) end).

%% An EUnit test on a fresh server with a master of its own, both ended
%% after, even when the test fails or times out. Master says which:
%% - started: started before the server, stopped after;
%% - restartable: the same, but the test may kill and restart it, so the
%%   cleanup ends whatever runs under its name then;
%% - absent: a fresh name with no node behind it (the test may start one).
%% Fun(S) or Fun(S, M): M is the master, or its name when absent.
master_server_test(Label, Master, Timeout, Fun) ->
    {Label,
     {setup,
      fun() ->
              M = case Master of
                      absent -> new_master_name();
                      _ -> start_master()
                  end,
              {M, start_server(#{master => M})}
      end,
      fun({M, S}) ->
              stop_server(S),
              case Master of
                  started -> stop_master(M);
                  restartable -> kill_master_by_name(master_node(M));
                  absent -> kill_master_by_name(M)
              end
      end,
      fun({M, S}) ->
              Run = if is_function(Fun, 1) -> fun(_) -> Fun(S) end;
                       true -> fun(_) -> Fun(S, M) end
                    end,
              {timeout, scaled(Timeout), fun() -> logged(S, Run) end}
      end}}.

%% Runs Fun(S); on failure prints the end of the server's log first.
logged(S = #{log := Log}, Fun) ->
    try Fun(S)
    catch C:E:St ->
            Status = case settled_status(S) of
                         running -> "still running";
                         {exited, N} when is_integer(N), N > 128 ->
                             io_lib:format("DIED, exit status ~b (signal ~b)", [N, N - 128]);
                         {exited, N} -> io_lib:format("exited, status ~p", [N])
                     end,
            io:format(user, "~n--- server ~s; end of its log ~s ---~n~s~n---~n",
                      [Status, Log, log_tail(Log)]),
            erlang:raise(C, E, St)
    end.
