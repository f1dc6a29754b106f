%% SPDX-License-Identifier: Apache-2.0
%% Names, ports and paths for the black-box tests (a name no other run uses,
%% a free port, the repository, the logs in build/tests/logs/NAME.log, the
%% time scale of slow runs), and OS processes (the server, Erlang master
%% nodes) run under a holder process, so that they can be signalled by OS
%% pid, killed for real and restarted under the same node name.
-module(httpdtest_os).

%% names, ports, paths, the time scale
-export([unique/1, free_port/0, cookie/0, repo_root/0, log_path/1, log_tail/1, log_tail/2,
         scaled/1]).
%% OS processes under a holder
-export([spawn_os/4, proc_status/1, os_pid/1, signal/2, wait_exit/2, stop_proc/1]).
%% for OS processes a test starts its own way (noted for run-tests.sh)
-export([note_pid/2, forget_pid/1]).
%% what a port says until it exits; what the kernel tells of a process or a port
-export([port_output/2, memory_judged/0, proc_kb/2, close_wait_count/1]).
%% the firewall the cuts between nodes are made with
-export([iptables/1]).
%% for the other test helpers
-export([ebin_dir/0, now_ms/0, settled_status/1, spawn_os/5]).

-define(LOCAL, {127, 0, 0, 1}).

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
%% module's beam (ROOT/build/tests/ebin/httpdtest_os.beam).
repo_root() ->
    case os:getenv("HTTPDCNODE_ROOT") of
        false ->
            Beam = filename:absname(code:which(?MODULE)),
            filename:dirname(filename:dirname(filename:dirname(filename:dirname(Beam))));
        Root -> Root
    end.

ebin_dir() -> filename:dirname(filename:absname(code:which(?MODULE))).

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

%% iptables with Args (a rule inserted or deleted: this host's packets
%% dropped, as a network that loses them); fails when it does.
iptables(Args) ->
    Out = os:cmd("iptables " ++ Args ++ " 2>&1; echo rc=$?"),
    case string:find(Out, "rc=0") of
        nomatch -> erlang:error({iptables_failed, Args, Out});
        _ -> ok
    end.

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

%% Sockets in CLOSE-WAIT on local port Port (the server's side).
close_wait_count(Port) ->
    Out = os:cmd("ss -Htan state close-wait '( sport = :" ++ integer_to_list(Port) ++ " )'"),
    length([L || L <- string:split(Out, "\n", all), string:trim(L) =/= ""]).
