%% SPDX-License-Identifier: Apache-2.0
%% make install and make deb, and the systemd unit they install: what lands
%% where (a scratch DESTDIR, the package's own file list), that each piece
%% works from there (the binary, its manual, the Erlang application found
%% through ERL_LIBS), the unit checked by systemd-analyze verify, and the
%% unit's own ExecStart run with the files docs/install.md makes: it
%% serves, and stops on SIGTERM well within TimeoutStopSec; without its
%% secret it exits 2 with one line saying what to create.
-module(install_tests).
-include_lib("eunit/include/eunit.hrl").
-include_lib("kernel/include/file.hrl").

-import(httpdtest_os, [repo_root/0, unique/1, free_port/0]).
-import(httpdtest_wait, [wait_until/3]).

-define(MAKE_MS, 180000).

%%% ---------------------------------------------------------------- make install

install_test_() ->
    {setup, fun() -> install(#{}) end, fun cleanup/1,
     fun(Ctx) ->
             [{Label, {timeout, 60, fun() -> Fun(Ctx) end}}
              || {Label, Fun} <-
                     [{"make install: the binary, its manual, the unit, the application's "
                       "ebin, the JS client, the docs and the examples, nothing else",
                       fun installed_files/1},
                      {"the installed binary runs; its manual has every --help option",
                       fun binary_and_manual/1},
                      {"the installed application loads through ERL_LIBS", fun erl_libs/1},
                      {"the installed unit names PREFIX/bin/httpdcnode; systemd-analyze "
                       "verify has nothing to say", fun unit_verifies/1},
                      {"the unit's stop timeout leaves 10 s beyond its drain; exit 2 "
                       "(a bad file or option) is not restarted", fun unit_timeouts/1},
                      {"the unit's ExecStart, with the files docs/install.md makes, serves "
                       "a stream with a token and exits 0 on SIGTERM within TimeoutStopSec",
                       fun unit_runs/1},
                      {"the unit's ExecStart without its secret: exit 2, one line naming "
                       "the file and how to make it", fun unit_without_secret/1}]]
     end}.

prefix_test_() ->
    {setup, fun() -> install(#{prefix => "/opt/httpdcnode-test"}) end, fun cleanup/1,
     fun(Ctx) ->
             {"make install PREFIX=/opt/...: the unit runs that binary, found there",
              {timeout, 60, fun() -> other_prefix(Ctx) end}}
     end}.

%% Ctx: dir (the DESTDIR), root (DESTDIR ++ PREFIX), prefix.
install(Opts) ->
    Prefix = maps:get(prefix, Opts, "/usr/local"),
    Dir = scratch("install"),
    Args = ["install", "DESTDIR=" ++ Dir] ++ [ "PREFIX=" ++ Prefix || maps:is_key(prefix, Opts)],
    {0, _} = make(Args),
    #{dir => Dir, root => Dir ++ Prefix, prefix => Prefix}.

cleanup(#{dir := Dir}) ->
    ok = file:del_dir_r(Dir).

scratch(What) ->
    Dir = filename:join([repo_root(), "build", "tests", "install", unique(What)]),
    ok = filelib:ensure_path(Dir),
    Dir.

%% make Args in the repository, bounded: {0, Output} or the test fails with
%% the output. The make that runs the tests may have left its jobserver in
%% MAKEFLAGS: this one is on its own.
make(Args) ->
    Make = os:find_executable("make"),
    Port = open_port({spawn_executable, Make},
                     [{args, ["-s", "--no-print-directory" | Args]}, {cd, repo_root()},
                      {env, [{"MAKEFLAGS", false}, {"MFLAGS", false}, {"MAKELEVEL", false}]},
                      exit_status, stderr_to_stdout, binary]),
    case httpdtest_os:port_output(Port, ?MAKE_MS) of
        {0, Out} -> {0, Out};
        {St, Out} -> erlang:error({make_failed, Args, St, Out})
    end.

%% A command through sh: {Status, Output}, bounded like make/1.
sh(Cmd) ->
    Port = open_port({spawn_executable, "/bin/sh"},
                     [{args, ["-c", Cmd]}, exit_status, stderr_to_stdout, binary]),
    httpdtest_os:port_output(Port, 60000).

%% Every regular file under Dir, relative, sorted.
files(Dir) ->
    lists:sort([F -- (Dir ++ "/") || F <- filelib:wildcard(Dir ++ "/**"), filelib:is_regular(F)]).

%% What make install must install, from the repository itself.
expected(Vsn, Man) ->
    {ok, [{application, httpdcnode, App}]} =
        file:consult(filename:join(repo_root(), "tools/erlang/src/httpdcnode.app.src")),
    Ebin = "lib/erlang/lib/httpdcnode-" ++ Vsn ++ "/ebin/",
    Docs = [filename:basename(F) || F <- filelib:wildcard(repo_root() ++ "/docs/*.md")],
    Examples = [filename:basename(F)
                || F <- filelib:wildcard(repo_root() ++ "/examples/erlang/*.erl")]
        ++ ["nginx.conf.example", "sysctl.conf.example"],
    lists:sort(["bin/httpdcnode", "share/man/man1/" ++ Man,
                "share/httpdcnode/httpdcnode.js",
                Ebin ++ "httpdcnode.app"]
               ++ [Ebin ++ atom_to_list(M) ++ ".beam" || M <- proplists:get_value(modules, App)]
               ++ ["share/doc/httpdcnode/" ++ F || F <- ["README.md"]]
               ++ ["share/doc/httpdcnode/docs/" ++ F || F <- Docs]
               ++ ["share/doc/httpdcnode/examples/" ++ F || F <- Examples]).

app_vsn() ->
    {ok, [{application, httpdcnode, App}]} =
        file:consult(filename:join(repo_root(), "tools/erlang/src/httpdcnode.app.src")),
    proplists:get_value(vsn, App).

installed_files(#{root := Root, dir := Dir}) ->
    Want = expected(app_vsn(), "httpdcnode.1") ++ ["lib/systemd/system/httpdcnode.service",
                                                    "share/doc/httpdcnode/LICENSE"],
    ?assertEqual(lists:sort(Want), files(Root)),
    %% and nothing outside PREFIX
    ?assertEqual(["usr/local/" ++ F || F <- files(Root)], files(Dir)),
    {ok, #file_info{mode = Mode}} = file:read_file_info(Root ++ "/bin/httpdcnode"),
    ?assertEqual(8#755, Mode band 8#777).

binary_and_manual(#{root := Root}) ->
    Bin = Root ++ "/bin/httpdcnode",
    {0, Version} = sh(Bin ++ " --version"),
    ?assertMatch(<<"httpdcnode ", _/binary>>, Version),
    {0, Help} = sh(Bin ++ " --help"),
    Options = lists:usort([O || [O] <- re_all(Help, "^ +(?:-[a-z], )?(--[a-z-]+)")]),
    ?assert(length(Options) > 20),
    {ok, Man} = file:read_file(Root ++ "/share/man/man1/httpdcnode.1"),
    %% help2man makes each option a tagged paragraph: .TP, then the option.
    Tagged = lists:usort([unescape(O) || [O] <- re_all(Man, "^\\.TP\\n(?:\\\\fB\\\\-[a-z]\\\\fR, )?"
                                                       "\\\\fB(\\\\-\\\\-(?:[a-z]|\\\\-)+)")]),
    ?assertEqual(Options, [O || O <- Options, lists:member(O, Tagged)]),
    ?assertNotEqual(nomatch, binary:match(Man, <<".SH \"EXIT STATUS\"">>)).

re_all(Subject, Re) ->
    case re:run(Subject, Re, [global, multiline, {capture, all_but_first, list}]) of
        {match, L} -> L;
        nomatch -> []
    end.

unescape(S) -> lists:flatten(string:replace(S, "\\-", "-", all)).

erl_libs(#{root := Root}) ->
    Libs = Root ++ "/lib/erlang/lib",
    Erl = os:find_executable("erl"),
    %% a fresh node, the repository's ebin not on its path
    Cmd = "ERL_LIBS='" ++ Libs ++ "' " ++ Erl ++ " -noshell -eval '"
        "ok = application:load(httpdcnode), "
        "{ok, Ms} = application:get_key(httpdcnode, modules), "
        "[{module, _} = code:ensure_loaded(M) || M <- Ms], "
        "io:format(\"~s~n\", [code:which(httpdcnode_token)]), halt().'",
    {0, Out} = sh(Cmd),
    Want = list_to_binary(Libs ++ "/httpdcnode-" ++ app_vsn() ++ "/ebin/httpdcnode_token.beam\n"),
    ?assertEqual(Want, Out).

%%% ---------------------------------------------------------------- the unit

unit_file(#{root := Root}) -> Root ++ "/lib/systemd/system/httpdcnode.service".

%% [{Key, Value}] of the unit, continuation lines joined.
unit(File) ->
    {ok, B} = file:read_file(File),
    Joined = re:replace(B, "\\\\\\n", "", [global, {return, binary}]),
    [list_to_tuple(string:split(L, "=")) ||
        L <- string:lexemes(binary_to_list(Joined), "\n"),
        hd(L) =/= $#, hd(L) =/= $[, string:find(L, "=") =/= nomatch].

unit_value(Key, Unit) ->
    case [V || {K, V} <- Unit, K =:= Key] of
        [V] -> V;
        Vs -> erlang:error({unit_key, Key, Vs})
    end.

exec_start(Unit) -> string:lexemes(unit_value("ExecStart", Unit), " ").

unit_verifies(Ctx = #{root := Root, prefix := Prefix}) ->
    [Exe | _] = exec_start(unit(unit_file(Ctx))),
    ?assertEqual(Prefix ++ "/bin/httpdcnode", Exe),
    ?assert(filelib:is_regular(Root ++ "/bin/httpdcnode")),
    verify(unit_file(Ctx), Prefix ++ "/bin/httpdcnode", Root ++ "/bin/httpdcnode").

%% systemd-analyze verify checks that ExecStart's binary exists and that
%% man finds the Documentation= page: a copy of the unit whose ExecStart
%% names the one staged is verified, with MANPATH the staged manuals.
verify(File, Exe, Staged) ->
    case os:find_executable("systemd-analyze") of
        false -> io:format(user, " [no systemd-analyze here: not verified] ", []);
        Analyze ->
            Dir = scratch("verify"),
            {ok, B} = file:read_file(File),
            Copy = filename:join(Dir, "httpdcnode.service"),
            ok = file:write_file(Copy, binary:replace(B, list_to_binary("ExecStart=" ++ Exe),
                                                      list_to_binary("ExecStart=" ++ Staged))),
            try
                Man = filename:join(filename:dirname(filename:dirname(Staged)), "share/man"),
                ?assertEqual({0, <<>>}, sh("MANPATH='" ++ Man ++ "' " ++ Analyze ++ " verify "
                                           ++ Copy))
            after
                file:del_dir_r(Dir)
            end
    end.

unit_timeouts(Ctx) ->
    Unit = unit(unit_file(Ctx)),
    Stop = list_to_integer(unit_value("TimeoutStopSec", Unit)),
    Drain = case lists:dropwhile(fun(A) -> A =/= "--drain-seconds" end, exec_start(Unit)) of
                [_, S | _] -> list_to_integer(S);
                [] -> 10                    % the server's default
            end,
    ?assert(Stop >= Drain + 10),
    ?assertEqual("SIGTERM", unit_value("KillSignal", Unit)),
    ?assertEqual("2", unit_value("RestartPreventExitStatus", Unit)).

%% The unit's ExecStart as a command line for this test: its own binary
%% (staged), /etc/httpdcnode as Etc, /run/httpdcnode (its RuntimeDirectory,
%% which systemd makes 0700) as a directory beside it, and addresses and
%% names of its own (a fresh C-node name, an absent master, free ports):
%% the rest as shipped.
command(Ctx = #{root := Root}, Etc) ->
    [_ | Args] = exec_start(unit(unit_file(Ctx))),
    Port = free_port(),
    Admin = free_port(),
    Run = filename:join(filename:dirname(Etc), "run-httpdcnode"),
    ok = filelib:ensure_path(Run),
    ok = file:change_mode(Run, 8#700),
    Subst = fun("0.0.0.0:8000") -> "127.0.0.1:" ++ integer_to_list(Port);
               ("c1@localhost") -> unique("c1unit") ++ "@localhost";
               ("httpdmaster@localhost") -> unique("httpdmaster_absent") ++ "@localhost";
               ("/etc/httpdcnode/" ++ F) -> filename:join(Etc, F);
               ("/run/httpdcnode/" ++ F) -> filename:join(Run, F);
               (A) -> A
            end,
    {Root ++ "/bin/httpdcnode",
     [Subst(A) || A <- Args] ++ ["--admin-listen", "127.0.0.1:" ++ integer_to_list(Admin)],
     Port, Admin}.

%% The two files as docs/install.md makes them (the cookie is this node's).
etc_files(Dir) ->
    Etc = filename:join(Dir, "etc-httpdcnode"),
    ok = filelib:ensure_path(Etc),
    {0, _} = sh("cd '" ++ Etc ++ "' && head -c 32 /dev/urandom | base64 > secret && chmod 600 secret"),
    ok = file:write_file(filename:join(Etc, "cookie"), httpdtest_os:cookie()),
    ok = file:change_mode(filename:join(Etc, "cookie"), 8#600),
    Etc.

unit_runs(Ctx = #{dir := Dir}) ->
    Etc = etc_files(Dir),
    {Exe, Args, Port, Admin} = command(Ctx, Etc),
    Log = httpdtest_os:log_path(unique("unit")),
    P = httpdtest_os:spawn_os(Exe, Args, Log, "httpdcnode"),
    try
        wait_until(fun() -> listening(Port) andalso listening(Admin) end, 15000, unit_server_up),
        {ok, Secret} = file:read_file(filename:join(Etc, "secret")),
        Query = httpdcnode_token:query(string:trim(Secret, trailing, "\n"), 21,
                                       erlang:system_time(second) + 60),
        C = httpdtest_http:open(Port, httpdtest_http:get_request(
                                             "/test/21?" ++ binary_to_list(Query))),
        ?assertMatch(#{status := 200}, httpdtest_http:expect_head(C, 5000)),
        ?assertEqual(httpdtest_http:welcome(21), httpdtest_http:expect_chunk(C, 5000)),
        Stop = list_to_integer(unit_value("TimeoutStopSec", unit(unit_file(Ctx)))),
        ok = httpdtest_os:signal(P, "TERM"),
        httpdtest_http:expect_end(C, 5000),
        ?assertMatch({ok, 0, _}, httpdtest_os:wait_exit(P, Stop * 1000))
    after
        httpdtest_os:stop_proc(P)
    end.

listening(Port) ->
    case gen_tcp:connect({127, 0, 0, 1}, Port, []) of
        {ok, Sock} -> gen_tcp:close(Sock), true;
        {error, _} -> false
    end.

unit_without_secret(Ctx = #{dir := Dir}) ->
    Etc = etc_files(Dir),
    ok = file:delete(filename:join(Etc, "secret")),
    {Exe, Args, _, _} = command(Ctx, Etc),
    Log = httpdtest_os:log_path(unique("unitnosecret")),
    P = httpdtest_os:spawn_os(Exe, Args, Log, "httpdcnode"),
    try
        ?assertMatch({ok, 2, _}, httpdtest_os:wait_exit(P, 10000)),
        {ok, Out} = file:read_file(Log),
        Lines = [L || L <- binary:split(Out, <<"\n">>, [global, trim]), L =/= <<>>],
        ?assertMatch([_], Lines),
        [Line] = Lines,
        Secret = list_to_binary(filename:join(Etc, "secret")),
        ?assertNotEqual(nomatch, binary:match(Line, Secret)),
        ?assertNotEqual(nomatch, binary:match(Line, <<"create it">>))
    after
        httpdtest_os:stop_proc(P)
    end.

other_prefix(Ctx = #{root := Root}) ->
    [Exe | _] = exec_start(unit(unit_file(Ctx))),
    ?assertEqual("/opt/httpdcnode-test/bin/httpdcnode", Exe),
    ?assert(filelib:is_regular(Root ++ "/bin/httpdcnode")),
    ?assert(filelib:is_regular(Root ++ "/lib/erlang/lib/httpdcnode-" ++ app_vsn()
                               ++ "/ebin/httpdcnode.app")).

%%% ---------------------------------------------------------------- make deb

deb_test_() ->
    {setup,
     fun() ->
             Dir = scratch("deb"),
             {0, Out} = make(["deb", "DEB_DIR=" ++ Dir]),
             [Deb] = filelib:wildcard(Dir ++ "/httpdcnode_*.deb"),
             Unpacked = filename:join(Dir, "unpacked"),
             {0, _} = sh("dpkg-deb -R '" ++ Deb ++ "' '" ++ Unpacked ++ "'"),
             #{dir => Dir, deb => Deb, out => Out, unpacked => Unpacked}
     end,
     fun cleanup/1,
     fun(Ctx) ->
             [{Label, {timeout, 60, fun() -> Fun(Ctx) end}}
              || {Label, Fun} <-
                     [{"make deb: lintian finds no error or warning; the files of make "
                       "install under /usr, the unit in /lib, copyright and changelog",
                       fun deb_files/1},
                      {"the package's control and maintainer scripts", fun deb_control/1},
                      {"the package's unit runs /usr/bin/httpdcnode; systemd-analyze verify "
                       "has nothing to say", fun deb_unit/1}]]
     end}.

deb_files(#{out := Out, unpacked := U}) ->
    ?assertNotEqual(nomatch, binary:match(Out, <<"lintian found no error and no warning">>)),
    Want = ["usr/" ++ F || F <- expected(app_vsn(), "httpdcnode.1.gz")]
        ++ ["lib/systemd/system/httpdcnode.service",
            "usr/share/doc/httpdcnode/copyright", "usr/share/doc/httpdcnode/changelog.gz",
            "usr/share/lintian/overrides/httpdcnode"]
        ++ ["DEBIAN/" ++ F || F <- ["control", "md5sums", "postinst", "postrm", "prerm"]],
    ?assertEqual(lists:sort(Want), files(U)).

deb_control(#{unpacked := U}) ->
    {ok, Control} = file:read_file(U ++ "/DEBIAN/control"),
    Field = fun(F) ->
                    {match, [V]} = re:run(Control, "^" ++ F ++ ": (.*)$",
                                          [multiline, {capture, all_but_first, binary}]),
                    V
            end,
    ?assertEqual(<<"httpdcnode">>, Field("Package")),
    ?assertEqual(list_to_binary(app_vsn()), Field("Version")),
    Depends = Field("Depends"),
    [?assertNotEqual({Lib, nomatch}, {Lib, binary:match(Depends, Lib)})
     || Lib <- [<<"libevent-2.1">>, <<"libssl3">>, <<"libwslay1">>, <<"libjansson4">>,
                <<"zlib1g">>, <<"adduser">>]],
    [?assertEqual({Script, {0, <<>>}}, {Script, sh("sh -n '" ++ U ++ "/DEBIAN/" ++ Script ++ "'")})
     || Script <- ["postinst", "prerm", "postrm"]],
    %% postinst makes what the unit reads, the service user owning it
    {ok, Postinst} = file:read_file(U ++ "/DEBIAN/postinst"),
    [?assertNotEqual({Want, nomatch}, {Want, binary:match(Postinst, Want)})
     || Want <- [<<"adduser">>, <<"/etc/httpdcnode/secret">>, <<"/etc/httpdcnode/cookie">>,
                 <<"chown httpdcnode:httpdcnode">>, <<"umask 077">>]].

deb_unit(#{unpacked := U}) ->
    File = U ++ "/lib/systemd/system/httpdcnode.service",
    Unit = unit(File),
    [Exe | Args] = exec_start(Unit),
    ?assertEqual("/usr/bin/httpdcnode", Exe),
    [?assert(lists:member(A, Args)) || A <- ["/etc/httpdcnode/cookie", "/etc/httpdcnode/secret"]],
    verify(File, "/usr/bin/httpdcnode", U ++ "/usr/bin/httpdcnode").
