%% SPDX-License-Identifier: Apache-2.0
%% The Erlang cookie stays secret: --cookie-file and its permission check,
%% the same check on ~/.erlang.cookie, the warning for --cookie, and
%% `make run` (scripts/run.sh) keeping the cookie out of ps and its epmd and
%% master on loopback; `make ws-echo` (scripts/ws-echo.sh) all on loopback.
-module(cookie_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_os, [cookie/0, repo_root/0, unique/1, free_port/0, log_path/1, spawn_os/4,
                       proc_status/1, log_tail/1, wait_exit/2, port_output/2]).
-import(httpdtest_server, [server_exe/0, stop_server/1, stats/1]).
-import(httpdtest_wait, [wait_until/3]).
-import(httpdtest_http, [open_stream/2, expect_chunk/2, close/1]).

%%% ---------------------------------------------------------------- --cookie-file

refused_modes_test_() ->
    [{"cookie file mode " ++ integer_to_list(Mode, 8) ++ " is refused: exit 2, one line why",
      {timeout, 20, fun() -> refused_mode(Mode) end}}
     || Mode <- [8#644, 8#640, 8#604, 8#620, 8#601]].

refused_mode(Mode) ->
    File = cookie_file(cookie() ++ "\n", Mode),
    {St, Lines} = run_to_exit(server_exe(), base_args() ++ ["--cookie-file", File]),
    ?assertEqual({exit_status, 2}, {exit_status, St}),
    ?assertMatch([_], Lines),
    [Line] = Lines,
    ?assertNotEqual(nomatch, binary:match(Line, list_to_binary(io_lib:format("~4.8.0B", [Mode])))),
    ?assertNotEqual(nomatch, binary:match(Line, <<"chmod 600">>)),
    ?assertEqual(nomatch, binary:match(Line, list_to_binary(cookie()))).

bad_files_test_() ->
    Missing = filename:join(tmp_dir(), "no_such_cookie"),
    [{"cookie file " ++ What ++ " is refused: exit 2, one line",
      {timeout, 20,
       fun() ->
               {St, Lines} = run_to_exit(server_exe(),
                                         base_args() ++ ["--cookie-file", File()]),
               ?assertEqual({exit_status, 2, What}, {exit_status, St, What}),
               ?assertMatch({[_], _}, {Lines, What})
       end}}
     || {What, File} <- [{"empty", fun() -> cookie_file("", 8#600) end},
                         {"with only a newline", fun() -> cookie_file("\n", 8#600) end},
                         {"with a CR", fun() -> cookie_file("abc\r\n", 8#600) end},
                         {"missing", fun() -> Missing end},
                         {"a directory", fun() -> tmp_dir() end}]]
        ++ [{"--cookie and --cookie-file together: exit 2",
             {timeout, 20,
              fun() ->
                      File = cookie_file("abc\n", 8#600),
                      {St, [_]} = run_to_exit(server_exe(),
                                              base_args() ++ ["--cookie", "abc",
                                                              "--cookie-file", File]),
                      ?assertEqual(2, St)
              end}}].

%% A 0600 file with a trailing newline: the server runs, and this node,
%% whose cookie the file holds, connects to its C-node. Nothing warns and
%% the cookie is not in the log.
private_file_test_() ->
    {"a 0600 cookie file with a trailing newline is used; nothing warns or shows it",
     {timeout, 40,
     fun() ->
             File = cookie_file(cookie() ++ "\n", 8#600),
             S = start(["--cookie-file", File], []),
             try
                 Log = read_log(S),
                 ?assertEqual(nomatch, binary:match(Log, <<"warning">>)),
                 ?assertEqual(nomatch, binary:match(Log, list_to_binary(cookie())))
             after
                 stop_server(S)
             end
     end}}.

%% --cookie still works, and says once that ps shows it (not the cookie).
cookie_option_warns_test_() ->
    {"--cookie works and warns once that ps shows it",
     {timeout, 40,
     fun() ->
             S = start(["--cookie", cookie()], []),
             try
                 Warnings = [L || L <- log_lines(S),
                                  binary:match(L, <<"--cookie is visible">>) =/= nomatch],
                 ?assertMatch([_], Warnings),
                 [W] = Warnings,
                 ?assertNotEqual(nomatch, binary:match(W, <<"--cookie-file">>)),
                 ?assertEqual(nomatch, binary:match(W, list_to_binary(cookie())))
             after
                 stop_server(S)
             end
     end}}.

%% ~/.erlang.cookie: the same check; a private one is used.
home_cookie_test_() ->
    [{"~/.erlang.cookie with mode 0644 is refused: exit 2, one line why",
      {timeout, 20,
       fun() ->
               Home = home_with_cookie(cookie() ++ "\n", 8#644),
               {St, Lines} = run_to_exit("/usr/bin/env", env_home(Home) ++ [server_exe() |
                                                                             base_args()]),
               ?assertEqual(2, St),
               ?assertMatch([_], Lines),
               [Line] = Lines,
               ?assertNotEqual(nomatch, binary:match(Line, <<".erlang.cookie">>)),
               ?assertNotEqual(nomatch, binary:match(Line, <<"0644">>))
       end}},
     {"~/.erlang.cookie with mode 0600 is used",
      {timeout, 40,
       fun() ->
               Home = home_with_cookie(cookie() ++ "\n", 8#600),
               S = start([], env_home(Home)),
               stop_server(S)
       end}}].

%%% ---------------------------------------------------------------- make run

%% scripts/run.sh --background starts epmd, the server and the master as
%% `make run` does (on an epmd port, names and a directory of its own).
%% The cookie it made is on no command line; epmd and the master listen on
%% loopback only; the server and the master share the cookie, and the
%% README's line typed on the master reaches a stream.
run_script_test_() ->
    {setup, fun() -> start_run("run.sh") end, fun stop_run/1,
     fun(R) ->
             [{"make run: the cookie is random, kept in a 0600 file, and in no process's argv",
               {timeout, 30, fun() -> run_cookie_hidden(R) end}},
              {"make run: epmd and the master listen on 127.0.0.1 only",
               {timeout, 30, fun() -> run_loopback_only(R) end}},
              {"make run: {any, C-node} ! {123, <<\"Hello\">>} on the master reaches /test/123",
               {timeout, 30, fun() -> run_master_sends(R) end}},
              {"make run: run.sh --stop ends epmd, the server and the master",
               {timeout, 60, fun() -> run_stop(R) end}}]
     end}.

%% `make ws-echo` (scripts/ws-echo.sh, scripts/run.sh with the echo) the
%% same way: HTTP too on loopback only, and a message echoed.
ws_echo_script_test_() ->
    {setup, fun() -> start_run("ws-echo.sh") end, fun stop_run/1,
     fun(R) ->
             [{"make ws-echo: HTTP, /stats, the C-node, epmd and the master listen on 127.0.0.1 "
               "only", {timeout, 30, fun() -> echo_loopback_only(R) end}},
              {"make ws-echo: a message on ws://127.0.0.1:PORT/ws/1 comes back",
               {timeout, 60, fun() -> echo_echoes(R) end}},
              {"make ws-echo: --stop ends epmd, the server and the master",
               {timeout, 60, fun() -> run_stop(R) end}}]
     end}.

%% Script (run.sh or ws-echo.sh) --background.
start_run(Script) ->
    Dir = filename:join([repo_root(), "build", "tests", unique("run")]),
    Env = [{"RUN_DIR", Dir},
           {"ERL_EPMD_PORT", integer_to_list(free_port())},
           {"PORT", integer_to_list(free_port())},
           {"ADMIN_PORT", integer_to_list(free_port())},
           {"NAME", unique("c1run") ++ "@localhost"},
           {"MASTER", unique("masterrun") ++ "@localhost"},
           {"COOKIE", false}, {"PUBLIC", false},
           %% the server of the build under test, not always ./httpdcnode
           {"HTTPDCNODE_BIN", server_exe()}],
    R = (maps:from_list(Env))#{script => Script},
    {St, Out} = run_sh(Script, ["--background"], Env),
    Pids = note_pids(R, Dir),
    case St of
        0 -> R#{dir => Dir, env => Env, pids => Pids};
        _ -> stop_run(R#{dir => Dir, env => Env, pids => Pids}),
             erlang:error({run_sh_failed, St, Out})
    end.

%% Whatever --stop left (the test failed first) is killed by pid.
stop_run(#{script := Script, env := Env, pids := Pids}) ->
    _ = run_sh(Script, ["--stop"], Env),
    [os:cmd("kill -KILL " ++ integer_to_list(P)) || P <- alive(Pids)],
    forget_pids(Pids).

run_stop(#{script := Script, env := Env, pids := Pids}) ->
    ?assertEqual([epmd, server, master], [Role || {Role, _} <- Pids]),
    {St, Out} = run_sh(Script, ["--stop"], Env),
    ?assertEqual({0, <<>>}, {St, Out}),
    ?assertEqual([], alive(Pids)).

%% The noted processes still running (a zombie has an empty command line).
alive(Pids) -> [P || {_, P} <- Pids, cmdline(P) =/= <<>>].

run_cookie_hidden(R = #{dir := Dir}) ->
    Cookie = string:trim(read(filename:join([Dir, "home", ".erlang.cookie"]))),
    ?assertEqual(Cookie, string:trim(read(filename:join(Dir, "cookie")))),
    ?assertMatch({match, _}, re:run(Cookie, "^[0-9a-f]{48}$")),
    [?assertEqual({F, 8#600}, {F, mode(filename:join(Dir, F))})
     || F <- ["cookie", "home/.erlang.cookie"]],
    %% the server and the master agree on it: the C-node is connected
    wait_master_connected(R),
    Ps = list_to_binary(os:cmd("ps -eo args")),
    ?assertNotEqual(nomatch, binary:match(Ps, list_to_binary(maps:get("NAME", R)))),
    ?assertEqual({cookie_in_ps, nomatch}, {cookie_in_ps, binary:match(Ps, list_to_binary(Cookie))}),
    Log = read(filename:join(Dir, "httpdcnode.log")),
    ?assertEqual(nomatch, string:find(Log, Cookie)).

%% The addresses process Pid listens on (TCP), as "127.0.0.1:PORT" or
%% "[::1]:PORT": its sockets' inodes (/proc/Pid/fd) among the listening
%% ones of /proc/Pid/net/tcp and tcp6. Read from /proc/Pid alone, so its
%% time does not grow with the other processes of the machine (ss -p
%% walks them all).
listening(Pid) ->
    Proc = "/proc/" ++ integer_to_list(Pid),
    {ok, Fds} = file:list_dir(Proc ++ "/fd"),
    Inodes = [I || F <- Fds,
                   {ok, "socket:[" ++ R} <- [file:read_link(Proc ++ "/fd/" ++ F)],
                   I <- [lists:droplast(R)]],
    [addr(Local, V6) || {File, V6} <- [{"tcp", false}, {"tcp6", true}],
                        {ok, B} <- [file:read_file(Proc ++ "/net/" ++ File)],
                        [_, Local, _, "0A" | Rest] <- [string:lexemes(L, " ")
                                                       || L <- tl(string:split(binary_to_list(B),
                                                                               "\n", all)),
                                                          L =/= ""],
                        lists:member(lists:nth(6, Rest), Inodes)].

%% "0100007F:1F90" (tcp) or 32 hex digits (tcp6), in the kernel's words.
addr(Local, V6) ->
    [Hex, PortHex] = string:split(Local, ":"),
    Port = integer_to_list(list_to_integer(PortHex, 16)),
    case V6 of
        false ->
            <<A, B, C, D>> = <<(list_to_integer(Hex, 16)):32/little>>,
            lists:flatten(io_lib:format("~b.~b.~b.~b:~s", [A, B, C, D, Port]));
        true ->
            Words = [<<(list_to_integer(W, 16)):32/little>>
                     || W <- [lists:sublist(Hex, I, 8) || I <- [1, 9, 17, 25]]],
            <<Bytes:128>> = iolist_to_binary(Words),
            "[" ++ inet:ntoa(list_to_tuple([X || <<X:16>> <= <<Bytes:128>>])) ++ "]:" ++ Port
    end.

run_loopback_only(#{pids := Pids}) ->
    Listening = fun listening/1,
    {master, Master} = lists:keyfind(master, 1, Pids),
    MasterAddrs = Listening(Master),
    ?assertNotEqual([], MasterAddrs),
    [?assertMatch({master, "127.0.0.1:" ++ _}, {master, A}) || A <- MasterAddrs],
    case lists:keyfind(epmd, 1, Pids) of
        {epmd, Epmd} ->
            EpmdAddrs = Listening(Epmd),
            ?assertNotEqual([], EpmdAddrs),
            [?assert(lists:prefix("127.0.0.1:", A) orelse lists:prefix("[::1]:", A))
             || A <- EpmdAddrs];
        false -> erlang:error(run_sh_did_not_start_epmd)
    end.

%% The server's listeners too: HTTP, admin and the C-node's.
echo_loopback_only(R = #{pids := Pids}) ->
    run_loopback_only(R),
    {server, Server} = lists:keyfind(server, 1, Pids),
    Addrs = listening(Server),
    [?assert(lists:member("127.0.0.1:" ++ maps:get(P, R), Addrs)) || P <- ["PORT", "ADMIN_PORT"]],
    [?assertMatch({server, "127.0.0.1:" ++ _}, {server, A}) || A <- Addrs].

%% The master's application starts its inbox after the C-node may have
%% linked: a message sent before it is registered is lost, so each try is
%% a connection of its own, until one comes back.
echo_echoes(R) ->
    wait_master_connected(R),
    S = #{port => list_to_integer(maps:get("PORT", R))},
    wait_until(fun() ->
                       Sock = httpdtest_inbox:ws_open(S, 1),
                       ok = gen_tcp:send(Sock, httpdtest_inbox:frame(<<"echo?">>)),
                       Got = httpdtest_inbox:recv_frame_within(Sock, 1000),
                       gen_tcp:close(Sock),
                       {Got =:= {1, 1, <<"echo?">>}, Got}
               end, 20000, echoed).

run_master_sends(R = #{dir := Dir, env := Env}) ->
    wait_master_connected(R),
    S = #{port => list_to_integer(maps:get("PORT", R)),
          admin_port => list_to_integer(maps:get("ADMIN_PORT", R))},
    C = open_stream(S, 123),
    try
        Expr = filename:join(Dir, "send.erl"),
        ok = file:write_file(Expr, ["{any, '", maps:get("NAME", R),
                                    "'} ! {123, <<\"Hello\">>}.\n"]),
        Master = hd(string:split(maps:get("MASTER", R), "@")),
        %% erl_call finds the cookie as the master does, through HOME
        {0, _} = run_port("/bin/sh", ["-c", "exec erl_call -sname \"$0\" -e <\"$1\"", Master, Expr],
                          [{"HOME", filename:join(Dir, "home")} | Env], 20000),
        ?assertEqual(<<"Hello">>, expect_chunk(C, 5000))
    after
        close(C)
    end.

wait_master_connected(R) ->
    S = #{port => list_to_integer(maps:get("PORT", R)),
          admin_port => list_to_integer(maps:get("ADMIN_PORT", R))},
    wait_until(fun() -> maps:get(erl_nodes, stats(S)) >= 1 end, 15000,
               master_connected_to_cnode).

%%% ---------------------------------------------------------------- helpers

tmp_dir() ->
    D = filename:join([repo_root(), "build", "tests", "cookie"]),
    ok = filelib:ensure_dir(filename:join(D, "x")),
    D.

cookie_file(Content, Mode) ->
    F = filename:join(tmp_dir(), unique("cookie")),
    ok = file:write_file(F, Content),
    ok = file:change_mode(F, Mode),
    F.

home_with_cookie(Content, Mode) ->
    Home = filename:join(tmp_dir(), unique("home")),
    F = filename:join(Home, ".erlang.cookie"),
    ok = filelib:ensure_dir(F),
    ok = file:write_file(F, Content),
    ok = file:change_mode(F, Mode),
    Home.

env_home(Home) -> ["-u", "ERLANG_COOKIE", "HOME=" ++ Home].

mode(F) ->
    {ok, I} = file:read_file_info(F),
    element(8, I) band 8#777.

read(F) ->
    {ok, B} = file:read_file(F),
    binary_to_list(B).

cmdline(Pid) ->
    case file:read_file("/proc/" ++ integer_to_list(Pid) ++ "/cmdline") of
        {ok, B} -> B;
        _ -> <<>>
    end.

%% A server on a free port, no master, with Args for its cookie, run
%% through /usr/bin/env with EnvArgs; ready once this node connects to its
%% C-node (so it holds this node's cookie).
start(CookieArgs, EnvArgs) ->
    Name = unique("c1cookie"),
    Node = list_to_atom(Name ++ "@localhost"),
    Port = free_port(),
    AdminPort = free_port(),
    Args = ["--listen", "127.0.0.1:" ++ integer_to_list(Port),
            "--admin-listen", "127.0.0.1:" ++ integer_to_list(AdminPort),
            "--name", atom_to_list(Node),
            "--master", unique("httpdmaster_absent") ++ "@localhost" | CookieArgs],
    Log = log_path(Name),
    P = spawn_os("/usr/bin/env", EnvArgs ++ [server_exe() | Args], Log, Name),
    S = #{proc => P, node => Node, port => Port, admin_port => AdminPort, log => Log},
    try
        wait_until(fun() ->
                           proc_status(P) =:= running orelse
                               erlang:error({server_exited, proc_status(P),
                                             log_tail(Log)}),
                           try is_map(stats(S)) andalso net_kernel:connect_node(Node)
                           catch _:_ -> false
                           end
                   end, 15000, {server_ready_with_our_cookie, Name}),
        S
    catch C:E:St ->
            stop_server(S),
            erlang:raise(C, E, St)
    end.

read_log(#{log := Log}) ->
    {ok, B} = file:read_file(Log),
    B.

log_lines(S) -> binary:split(read_log(S), <<"\n">>, [global, trim_all]).

base_args() ->
    ["--listen", "127.0.0.1:" ++ integer_to_list(free_port()), "--admin-listen", "",
     "--name", unique("c1cookiecli") ++ "@localhost",
     "--master", unique("httpdmaster_absent") ++ "@localhost"].

%% Runs Exe Args to its end (bounded): {ExitStatus, non-empty output lines}.
run_to_exit(Exe, Args) ->
    Log = log_path(unique("cookiecli")),
    P = spawn_os(Exe, Args, Log, "httpdcnode"),
    St = case wait_exit(P, 10000) of
             {ok, S, _} -> S;
             timeout -> timeout
         end,
    stop_server(#{proc => P, node => nonode@nohost}),
    {ok, Out} = file:read_file(Log),
    {St, binary:split(Out, <<"\n">>, [global, trim_all])}.

run_sh(Script, Args, Env) ->
    run_port("/bin/bash", [filename:join([repo_root(), "scripts", Script]) | Args], Env, 60000).

%% {ExitStatus, Output} of Exe Args with Env added (false: unset).
run_port(Exe, Args, Env, Timeout) ->
    Port = open_port({spawn_executable, Exe},
                     [{args, Args}, {env, Env}, exit_status, binary, stderr_to_stdout,
                      {cd, repo_root()}]),
    case port_output(Port, Timeout) of
        {timeout, Out} -> erlang:error({timeout, Out});
        Done -> Done
    end.

%% The pids run.sh noted, also noted for scripts/run-tests.sh, which ends
%% them if this node dies before stop_run.
note_pids(R, Dir) ->
    case file:read_file(filename:join(Dir, "pids")) of
        {ok, B} ->
            Pids = [{binary_to_atom(Role), binary_to_integer(P)}
                    || L <- binary:split(B, <<"\n">>, [global, trim_all]),
                       [Role, P] <- [binary:split(L, <<" ">>)]],
            [note_pid(P, tag(Role, R)) || {Role, P} <- Pids],
            Pids;
        _ -> []
    end.

tag(epmd, R) -> "-port " ++ maps:get("ERL_EPMD_PORT", R);
tag(server, R) -> maps:get("NAME", R);
tag(master, R) -> maps:get("MASTER", R).

note_pid(Pid, Tag) ->
    case os:getenv("HTTPDTEST_PIDDIR") of
        false -> ok;
        D -> file:write_file(filename:join(D, integer_to_list(Pid)), Tag)
    end.

forget_pids(Pids) ->
    case os:getenv("HTTPDTEST_PIDDIR") of
        false -> ok;
        D -> [file:delete(filename:join(D, integer_to_list(P))) || {_, P} <- Pids]
    end.
