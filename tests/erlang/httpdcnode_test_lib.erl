%% SPDX-License-Identifier: Apache-2.0
%% Helpers for the black-box tests of httpdcnode.
%%
%% - OS processes (the server, Erlang master nodes) run under a holder
%%   process so they can be signalled by OS pid, killed for real and
%%   restarted under the same node name. Their output goes to
%%   build/tests/logs/NAME.log.
%% - A raw HTTP/1.x client: each connection is a process that parses the
%%   response incrementally and hands over one event at a time
%%   ({hc, Conn, Event}): the head, each chunk, the terminating chunk,
%%   plain bytes, the close.
%% - /stats (on the server's admin port) as a map, and waits that poll a condition up to a deadline.
-module(httpdcnode_test_lib).

%% names, ports, paths
-export([unique/1, free_port/0, cookie/0, repo_root/0, log_tail/1, log_tail/2,
         scaled/1]).
%% server
-export([start_server/1, stop_server/1, server_test/4, server_test/5,
         master_server_test/4, logged/2,
         node_of/1, port_of/1, admin_port_of/1, os_pid/1, send/2, stats/1, metrics/1,
         admin_get/2, wait_stat/4,
         signal/2, wait_exit/2, proc_status/1, run_cli/2]).
%% a server killed and started again as the same C-node
-export([kill_server/1, restart_server/1]).
%% a new server process taking over from a running one (hot upgrade)
-export([takeover_server/1, takeover_server/2, server_args/1]).
%% master
-export([start_master/0, start_master/1, start_master/2, new_master_name/0,
         stop_master/1, kill_master/1, restart_master/1, kill_master_by_name/1,
         master_node/1, master_sees/2, wait_master_sees/3, start_forwarder/2,
         start_sink/1, sink_subscribe/1, stop_sink/1]).
%% HTTP client
-export([open/2, open/3, open_stream/2, open_stream/3, open_streams/4, get_request/1,
         request_bytes/3, request_bytes/4, http_request/2, next_event/2,
         expect_head/2, expect_chunk/2, expect_chunks/3, expect_last_chunk/2,
         expect_closed/2, expect_end/2, expect_bytes/3, collected/1, close/1,
         welcome/1, header/2]).
%% misc
-export([memory_judged/0, proc_kb/2]).
-export([iptables/1]).
-export([wait_until/3, json_decode/1, close_wait_count/1, summarize/1, port_output/2]).
%% for tests that start the server their own way
-export([server_exe/0, log_path/1, spawn_os/4, stop_proc/1]).
%% for OS processes a test starts its own way (noted for run-tests.sh)
-export([note_pid/2, forget_pid/1]).

-define(LOCAL, {127, 0, 0, 1}).
-define(POLL_MS, 25).

%%% ================================================================
%%% Names, ports, paths
%%% ================================================================

%% A name no other test run on the machine uses: Prefix_OSPID_N.
unique(Prefix) ->
    Prefix ++ "_" ++ os:getpid() ++ "_" ++
        integer_to_list(erlang:unique_integer([positive])).

%% A TCP port free right now on 127.0.0.1 (bind port 0, read it, close).
free_port() ->
    {ok, L} = gen_tcp:listen(0, [{ip, ?LOCAL}, {reuseaddr, true}]),
    {ok, P} = inet:port(L),
    ok = gen_tcp:close(L),
    P.

cookie() -> atom_to_list(erlang:get_cookie()).

%% The repository root: $HTTPDCNODE_ROOT, else four levels above this
%% module's beam (ROOT/build/tests/ebin/httpdcnode_test_lib.beam).
repo_root() ->
    case os:getenv("HTTPDCNODE_ROOT") of
        false ->
            Beam = filename:absname(code:which(?MODULE)),
            filename:dirname(filename:dirname(filename:dirname(filename:dirname(Beam))));
        Root -> Root
    end.

ebin_dir() -> filename:dirname(filename:absname(code:which(?MODULE))).

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

%% Whether the resident size means anything: not under a sanitizer, whose
%% allocator keeps freed memory in quarantine.
memory_judged() -> os:getenv("HTTPDTEST_SANITIZED") =:= false.

%% A field of /proc/PID/status (VmHWM: the peak resident size, VmRSS,
%% VmSize...) in kB; Pid an OS pid or a server.
proc_kb(S, Key) when is_map(S) -> proc_kb(os_pid(S), Key);
proc_kb(Pid, Key) ->
    {ok, B} = file:read_file("/proc/" ++ integer_to_list(Pid) ++ "/status"),
    {match, [V]} = re:run(B, "^" ++ Key ++ ":\\s+(\\d+) kB",
                          [multiline, {capture, all_but_first, binary}]),
    binary_to_integer(V).

%% Ms (or s) times $HTTPDTEST_TIME_SCALE (default 1): a slow run (under
%% sanitizers, valgrind) waits longer without every run waiting longer.
scaled(infinity) -> infinity;
scaled(T) ->
    case os:getenv("HTTPDTEST_TIME_SCALE") of
        false -> T;
        F ->
            Scale = try list_to_float(F) catch _:_ -> list_to_integer(F) end,
            round(T * Scale)
    end.

log_path(Name) ->
    File = filename:join([repo_root(), "build", "tests", "logs", Name ++ ".log"]),
    ok = filelib:ensure_dir(File),
    File.

log_tail(Log) -> log_tail(Log, 30).

log_tail(Log, N) ->
    case file:read_file(Log) of
        {ok, B} ->
            Lines = binary:split(B, <<"\n">>, [global, trim]),
            Tail = lists:nthtail(max(0, length(Lines) - N), Lines),
            iolist_to_binary(lists:join(<<"\n">>, Tail));
        {error, R} -> iolist_to_binary(io_lib:format("(no log ~s: ~p)", [Log, R]))
    end.

%%% ================================================================
%%% OS processes under a holder
%%% ================================================================

%% Starts Exe Args with stdout and stderr appended to Log, the soft
%% descriptor limit raised to the hard one. Returns a proc map.
%% Mode exec: Exe replaces the shell and reads its stdin from this node
%% (an Erlang master halts when that closes). Mode watch: a shell stays
%% between, says the child's pid, and kills the child if this node goes
%% away (its stdin closes) before the child ended.
spawn_os(Exe, Args, Log, Tag) -> spawn_os(Exe, Args, Log, Tag, watch).

spawn_os(Exe, Args, Log, Tag, Mode) ->
    Parent = self(),
    Ref = make_ref(),
    Holder = spawn(fun() -> holder_init(Parent, Ref, Exe, Args, Log, Tag, Mode) end),
    receive
        {Ref, {ok, OsPid}} -> #{holder => Holder, os_pid => OsPid, log => Log, tag => Tag};
        {Ref, {error, E}} -> erlang:error({spawn_failed, Exe, E})
    after 10000 -> erlang:error({spawn_timeout, Exe})
    end.

-define(RAISE_FDS, "ulimit -n \"$(ulimit -Hn)\" 2>/dev/null; ").
-define(EXEC_SCRIPT, ?RAISE_FDS "exec \"$0\" \"$@\" >>\"$HTTPDTEST_LOG\" 2>&1").
-define(WATCH_SCRIPT,
        ?RAISE_FDS
        "exec 3<&0 2>/dev/null; "
        "\"$0\" \"$@\" >>\"$HTTPDTEST_LOG\" 2>&1 </dev/null 3<&- & child=$!; "
        "echo \"pid $child\"; "
        "(while read -r _; do :; done; kill -KILL \"$child\") <&3 >/dev/null 2>&1 & watcher=$!; "
        "wait \"$child\"; st=$?; kill \"$watcher\" 2>/dev/null; exit $st").

holder_init(Parent, Ref, Exe, Args, Log, Tag, Mode) ->
    Script = case Mode of exec -> ?EXEC_SCRIPT; watch -> ?WATCH_SCRIPT end,
    try open_port({spawn_executable, "/bin/sh"},
                  [{args, ["-c", Script, Exe | Args]},
                   {env, [{"HTTPDTEST_LOG", Log}]},
                   exit_status, binary, use_stdio]) of
        Port ->
            OsPid = case Mode of
                        exec -> {os_pid, P} = erlang:port_info(Port, os_pid), P;
                        watch -> read_child_pid(Port, <<>>)
                    end,
            case is_integer(OsPid) of
                true ->
                    note_pid(OsPid, Tag),
                    Parent ! {Ref, {ok, OsPid}},
                    holder_loop(Port, OsPid, running);
                false ->
                    catch port_close(Port),
                    Parent ! {Ref, {error, OsPid}}
            end
    catch C:E -> Parent ! {Ref, {error, {C, E}}}
    end.

read_child_pid(Port, Acc) ->
    case binary:split(Acc, <<"\n">>) of
        [<<"pid ", P/binary>>, _] -> binary_to_integer(P);
        [Line, _] -> {unexpected_output, Line};
        [_] ->
            receive
                {Port, {data, D}} -> read_child_pid(Port, <<Acc/binary, D/binary>>);
                {Port, {exit_status, St}} -> {exited_at_once, St}
            after 5000 -> no_pid_from_shell
            end
    end.

holder_loop(Port, OsPid, Status) ->
    receive
        {Port, {exit_status, St}} ->
            forget_pid(OsPid),
            holder_loop(Port, OsPid, {exited, St});
        {Port, {data, _}} ->
            holder_loop(Port, OsPid, Status);
        {status, From, R} ->
            From ! {R, Status},
            holder_loop(Port, OsPid, Status);
        {stop, From, R} ->
            catch port_close(Port),
            From ! {R, ok}
    end.

%% With $HTTPDTEST_PIDDIR set (by scripts/run-tests.sh), every OS process
%% started is noted there so that the script can end what a crashed test
%% node left behind; Tag is a name found in the process's command line.
note_pid(OsPid, Tag) ->
    case os:getenv("HTTPDTEST_PIDDIR") of
        false -> ok;
        Dir -> file:write_file(filename:join(Dir, integer_to_list(OsPid)), Tag)
    end.

forget_pid(OsPid) ->
    case os:getenv("HTTPDTEST_PIDDIR") of
        false -> ok;
        Dir -> file:delete(filename:join(Dir, integer_to_list(OsPid)))
    end.

%% running | {exited, Status}
proc_status(#{holder := H}) ->
    R = make_ref(),
    M = erlang:monitor(process, H),
    H ! {status, self(), R},
    receive
        {R, St} -> erlang:demonitor(M, [flush]), St;
        {'DOWN', M, _, _, _} -> {exited, unknown}
    after 5000 -> erlang:error(holder_not_answering)
    end;
proc_status(#{proc := P}) -> proc_status(P).

%% The status after a failure: a process that just died takes a moment to
%% be reaped, so give it up to a second before calling it running.
settled_status(Obj) ->
    case wait_exit(Obj, 1000) of
        {ok, St, _} -> {exited, St};
        timeout -> running
    end.

os_pid(#{proc := #{os_pid := P}}) -> P;
os_pid(#{os_pid := P}) -> P.

%% Sends a signal ("TERM", "KILL", ...) to the process if it still runs.
signal(Obj, Sig) ->
    case proc_status(Obj) of
        running ->
            os:cmd("kill -" ++ Sig ++ " " ++ integer_to_list(os_pid(Obj))),
            ok;
        St -> St
    end.

%% {ok, ExitStatus, Millis} once exited, or timeout.
wait_exit(Obj, Timeout) ->
    T0 = now_ms(),
    Deadline = T0 + scaled(Timeout),
    wait_exit_loop(Obj, T0, Deadline).

wait_exit_loop(Obj, T0, Deadline) ->
    case proc_status(Obj) of
        {exited, St} -> {ok, St, now_ms() - T0};
        running ->
            case now_ms() >= Deadline of
                true -> timeout;
                false -> timer:sleep(10), wait_exit_loop(Obj, T0, Deadline)
            end
    end.

%% TERM, then KILL if it lingers; then the holder goes.
stop_proc(P) ->
    _ = signal(P, "TERM"),
    case wait_exit(P, 5000) of
        {ok, _, _} -> ok;
        timeout ->
            _ = signal(P, "KILL"),
            _ = wait_exit(P, 5000)
    end,
    #{holder := H} = P,
    R = make_ref(),
    M = erlang:monitor(process, H),
    H ! {stop, self(), R},
    receive {R, ok} -> ok; {'DOWN', M, _, _, _} -> ok after 5000 -> ok end,
    erlang:demonitor(M, [flush]),
    ok.

now_ms() -> erlang:monotonic_time(millisecond).

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

%%% ================================================================
%%% The server
%%% ================================================================

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

%%% ================================================================
%%% Erlang master nodes (separate OS processes)
%%% ================================================================

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

%%% ================================================================
%%% Raw HTTP client
%%% ================================================================
%%
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
    C = open(port_of(S), get_request("/test/" ++ integer_to_list(Uid)), Opts),
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
    C = open(port_of(S), get_request("/test/" ++ integer_to_list(Uid)), ConnOpts),
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

%%% ================================================================
%%% Misc
%%% ================================================================

%% iptables with Args (a rule inserted or deleted: this host's packets
%% dropped, as a network that loses them); fails when it does.
iptables(Args) ->
    Out = os:cmd("iptables " ++ Args ++ " 2>&1; echo rc=$?"),
    case string:find(Out, "rc=0") of
        nomatch -> erlang:error({iptables_failed, Args, Out});
        _ -> ok
    end.

%% Polls Fun every 25 ms until it returns true or {true, V} (returns V or
%% true); fails after Timeout ms with the last {false, Info} or value.
wait_until(Fun, Timeout, What) -> wait_until_loop(Fun, now_ms() + scaled(Timeout), What).

%% What a port opened with exit_status and binary says until it exits:
%% {ExitStatus, Output}, or {timeout, OutputSoFar} (the port closed) past
%% Timeout ms.
port_output(Port, Timeout) -> port_output(Port, [], now_ms() + Timeout).

port_output(Port, Acc, Deadline) ->
    receive
        {Port, {data, D}} -> port_output(Port, [D | Acc], Deadline);
        {Port, {exit_status, St}} -> {St, iolist_to_binary(lists:reverse(Acc))}
    after max(0, Deadline - now_ms()) ->
            catch port_close(Port),
            {timeout, iolist_to_binary(lists:reverse(Acc))}
    end.

wait_until_loop(Fun, Deadline, What) ->
    case Fun() of
        true -> true;
        {true, V} -> V;
        Other ->
            Info = case Other of {false, I} -> I; _ -> Other end,
            case now_ms() >= Deadline of
                true -> erlang:error({timeout_waiting_for, What, {last, Info}});
                false -> timer:sleep(?POLL_MS), wait_until_loop(Fun, Deadline, What)
            end
    end.

%% Sockets in CLOSE-WAIT on local port Port (the server's side).
close_wait_count(Port) ->
    Out = os:cmd("ss -Htan state close-wait '( sport = :" ++ integer_to_list(Port) ++ " )'"),
    length([L || L <- string:split(Out, "\n", all), string:trim(L) =/= ""]).

%% Shortens large binaries inside a term for error reports.
summarize(B) when is_binary(B), byte_size(B) > 120 ->
    {binary, byte_size(B), binary:part(B, 0, 60), '...', binary:part(B, byte_size(B) - 20, 20)};
summarize(T) when is_tuple(T) -> list_to_tuple([summarize(E) || E <- tuple_to_list(T)]);
summarize(L) when is_list(L) ->
    try length(L) of
        N when N > 30 -> {list, N, [summarize(E) || E <- lists:sublist(L, 10)], '...'};
        _ -> [summarize(E) || E <- L]
    catch error:badarg -> L   % an improper list
    end;
summarize(M) when is_map(M) -> maps:map(fun(_, V) -> summarize(V) end, M);
summarize(X) -> X.

%% A small JSON decoder (objects, arrays, strings, numbers, literals);
%% object keys stay binaries.
json_decode(Bin) ->
    {V, Rest} = json_value(json_ws(Bin)),
    case json_ws(Rest) of
        <<>> -> V;
        Junk -> erlang:error({json_trailing, summarize(Junk)})
    end.

json_ws(<<C, R/binary>>) when C =:= $\s; C =:= $\t; C =:= $\n; C =:= $\r -> json_ws(R);
json_ws(B) -> B.

json_value(<<${, R/binary>>) -> json_object(json_ws(R), #{});
json_value(<<$[, R/binary>>) -> json_array(json_ws(R), []);
json_value(<<$", R/binary>>) -> json_string(R, <<>>);
json_value(<<"true", R/binary>>) -> {true, R};
json_value(<<"false", R/binary>>) -> {false, R};
json_value(<<"null", R/binary>>) -> {null, R};
json_value(B) -> json_number(B, <<>>).

json_object(<<$}, R/binary>>, M) -> {M, R};
json_object(<<$", R/binary>>, M) ->
    {K, R1} = json_string(R, <<>>),
    <<$:, R2/binary>> = json_ws(R1),
    {V, R3} = json_value(json_ws(R2)),
    case json_ws(R3) of
        <<$,, R4/binary>> -> json_object(json_ws(R4), M#{K => V});
        <<$}, R4/binary>> -> {M#{K => V}, R4}
    end.

json_array(<<$], R/binary>>, Acc) -> {lists:reverse(Acc), R};
json_array(B, Acc) ->
    {V, R1} = json_value(B),
    case json_ws(R1) of
        <<$,, R2/binary>> -> json_array(json_ws(R2), [V | Acc]);
        <<$], R2/binary>> -> {lists:reverse([V | Acc]), R2}
    end.

json_string(<<$", R/binary>>, Acc) -> {Acc, R};
json_string(<<$\\, $u, H:4/binary, R/binary>>, Acc) ->
    C = binary_to_integer(H, 16),
    json_string(R, <<Acc/binary, (unicode:characters_to_binary([C]))/binary>>);
json_string(<<$\\, C, R/binary>>, Acc) ->
    E = case C of $n -> $\n; $t -> $\t; $r -> $\r; $b -> $\b; $f -> $\f; _ -> C end,
    json_string(R, <<Acc/binary, E>>);
json_string(<<C, R/binary>>, Acc) -> json_string(R, <<Acc/binary, C>>).

json_number(<<C, R/binary>>, Acc) when (C >= $0 andalso C =< $9); C =:= $-; C =:= $+;
                                       C =:= $.; C =:= $e; C =:= $E ->
    json_number(R, <<Acc/binary, C>>);
json_number(R, Acc) when Acc =/= <<>> ->
    V = try binary_to_integer(Acc)
        catch _:_ -> binary_to_float(with_fraction(Acc))
        end,
    {V, R}.

%% binary_to_float wants a fraction: "1e5" -> "1.0e5".
with_fraction(B) ->
    case {binary:match(B, <<".">>), binary:split(B, [<<"e">>, <<"E">>])} of
        {nomatch, [M, E]} -> <<M/binary, ".0e", E/binary>>;
        {nomatch, [M]} -> <<M/binary, ".0">>;
        _ -> B
    end.
