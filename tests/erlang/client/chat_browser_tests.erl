%% SPDX-License-Identifier: Apache-2.0
%% The demo page's chat, end to end: a real master running the httpdcnode
%% application with the example handler chat_room as its inbox (env inbox,
%% as `make run` sets it), a real server with --inbox and --presence, and
%% tabs of the page in headless Chromium (tests/js/chat_page.mjs) driven
%% through their form. A room is a topic (room:ROOM, joined by the page's
%% conn.subscribe, admitted by the handler's authorize_join, each line one
%% httpdcnode:publish/2). Two uids join one room and each says a line: both
%% tabs show both lines, with who said them; a third tab in another room
%% sees neither; bad input gets an error on the sender's tab only; a tab
%% that moves to another room leaves the first; after a reconnect each tab
%% joins its room again, told on its own connection alone.
%%
%% The same over SSE (no WebSocket) needs conn.send over POST /send/N: it
%% runs when the server has it, else it only checks that the server still
%% answers POST /send/1 with 404 or 405, and says it skipped the chat.
%% Last, `make run` as the README has it: two tabs chat through what
%% scripts/run.sh starts, the page's hint naming its C-node; and the other
%% C-node its hints print reaches the same master.
-module(chat_browser_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_page, [events/1, command/2]).

%% Waits on the page or the master; Chromium starts in a few seconds.
-define(T, 20000).
-define(INBOX, httpdcnode_inbox).

chat_browser_test_() ->
    [chat_test("chat over WebSocket: two uids in one room see both lines, with who said them; "
               "a third room sees neither; bad input answered on the sender's tab only; "
               "after a reconnect each tab joins again, the room not told twice",
               fun(Ctx) -> {run, fun() -> chat(Ctx, "ws") end} end),
     chat_test("chat over SSE only (conn.send by POST /send/N)",
               fun(Ctx) ->
                       case post_send(Ctx) of
                           {absent, St} -> {skip, St};
                           present -> {run, fun() -> chat(Ctx, "sse") end}
                       end
               end),
     {setup, fun start_run/0, fun stop_run/1,
      fun(R) ->
              [{timeout, httpdtest_os:scaled(120),
                {"make run (scripts/run.sh --background): the demo page's chat between two "
                 "tabs; its hint names the C-node (NAME)",
                 fun() -> make_run_chat(R) end}},
               {timeout, httpdtest_os:scaled(60),
                {"make run's hints: the message to send ends in a newline and names NAME; the "
                 "other C-node printed reaches the master (presence, inbox)",
                 fun() -> make_run_other_cnode(R) end}}]
      end}].

%% A fresh master with the application and a server for each case; Case(Ctx)
%% says {run, Fun} or {skip, Status} (POST /send/N answered Status).
chat_test(Label, Case) ->
    {setup, fun start/0, fun stop/1,
     fun(Ctx = #{server := S}) ->
             case Case(Ctx) of
                 {run, Fun} ->
                     {timeout, httpdtest_os:scaled(120),
                      {Label, fun() -> httpdtest_server:logged(S, fun(_) -> Fun() end) end}};
                 {skip, St} ->
                     Why = io_lib:format("SKIPPED: POST /send/1 answers ~b, the server has no "
                                         "POST /send/N yet: no conn.send without a WebSocket", [St]),
                     {Label ++ ": " ++ lists:flatten(Why),
                      fun() -> io:format(user, "~n~s: ~s~n", [?MODULE, Why]) end}
             end
     end}.

start() -> httpdtest_inbox:chat_start([], ?T).

stop(#{master := M, server := S}) ->
    httpdtest_server:stop_server(S),
    httpdtest_master:stop_master(M).

m(Node, Mod, F, A) -> erpc:call(Node, Mod, F, A, 30000).

%% What the server answers POST /send/1: 404 or 405 means it has none.
post_send(#{server := S}) ->
    Port = httpdtest_server:port_of(S),
    #{status := St} = httpdtest_http:http_request(
                        Port, httpdtest_http:request_bytes(
                                "POST", "/send/1", "HTTP/1.1",
                                ["Connection: close", "Content-Length: 0"])),
    case St of
        404 -> {absent, St};
        405 -> {absent, St};
        _ -> present
    end.

%%% ---------------------------------------------------------------- the case

chat(#{server := S, mnode := MNode}, Transport) ->
    Base = "http://127.0.0.1:" ++ integer_to_list(httpdtest_server:port_of(S)) ++ "/",
    Tabs = [{<<"a">>, 101}, {<<"b">>, 102}, {<<"c">>, 103}],
    with_browser(fun(P) ->
        [begin
             command(P, ["open ", T, " ", Base, "?uid=", integer_to_list(U),
                         "&transport=", Transport]),
             wait_ev(P, fun(E) -> is_ev(E, <<"ready">>, T) end, {ready, T})
         end || {T, U} <- Tabs],
        [begin
             wait_ev(P, fun(E) -> is_ev(E, <<"log">>, T) andalso kind(E) =:= <<"open">> end,
                     {open, T}),
             wait_online(MNode, U)
         end || {T, U} <- Tabs],
        %% On the transport asked for, not one fallen back to.
        Opened = iolist_to_binary(["open (", Transport, ")"]),
        [?assertEqual({T, [Opened]}, {T, lists:usort([text(E) || E <- events(P), is_ev(E, <<"log">>, T),
                                                                 kind(E) =:= <<"open">>])})
         || {T, _} <- Tabs],
        %% Each tab is told of its own join, and of those after it.
        [join(P, T, U, R) || {T, U, R} <- [{<<"a">>, 101, "lobby"}, {<<"b">>, 102, "lobby"},
                                          {<<"c">>, 103, "other"}]],
        wait_chat(P, <<"a">>, <<"joined">>, 102, <<"lobby">>),
        %% a's line reaches both before b says its own: both tabs in one order.
        LineA = <<"hello from a">>,
        LineB = <<"hi from b, caf", 16#c3, 16#a9, " <b>not bold</b>">>,
        say(P, <<"a">>, LineA),
        [wait_chat(P, T, K, 101, <<"lobby">>) || {T, K} <- [{<<"a">>, <<"mine">>}, {<<"b">>, <<"line">>}]],
        say(P, <<"b">>, LineB),
        [wait_chat(P, T, K, 102, <<"lobby">>) || {T, K} <- [{<<"a">>, <<"line">>}, {<<"b">>, <<"mine">>}]],
        %% The rooms are topics: a subscription a tab, two topics held, the
        %% lines published (once for the node), the master routing the
        %% lobby to the node's two streams.
        St = httpdtest_server:stats(S),
        ?assertMatch(#{topic_subscriptions := 3, topics := 2}, St),
        ?assert(maps:get(topic_published, St) >= 2),
        CNode = httpdtest_server:node_of(S),
        httpdtest_wait:wait_until(
          fun() -> m(MNode, httpdcnode, topic_nodes, [<<"room:lobby">>]) =:= [{CNode, 2}] end,
          ?T, lobby_routed),
        %% c's own line comes after both lobby lines went out, from the one
        %% inbox to the one C-node: had they reached c, they would be there.
        LineC = <<"anyone here?">>,
        say(P, <<"c">>, LineC),
        wait_chat(P, <<"c">>, <<"mine">>, 103, <<"other">>),
        %% Bad input from a: a room name the handler refuses, a line to a
        %% room it is not in. Answered after c's line, so once a shows the
        %% errors, a and b would show c's line had it reached them.
        command(P, "join a bad/room"),
        wait_errors(P, <<"a">>, 1),
        command(P, "room a nowhere"),
        say(P, <<"a">>, <<"lost line">>),
        wait_errors(P, <<"a">>, 2),
        %% b moves to c's room: told there, and it leaves the lobby (a told).
        command(P, "join b other"),
        [wait_chat(P, T, K, 102, R) || {T, K, R} <- [{<<"b">>, <<"joined">>, <<"other">>},
                                                     {<<"c">>, <<"joined">>, <<"other">>},
                                                     {<<"b">>, <<"left">>, <<"lobby">>},
                                                     {<<"a">>, <<"left">>, <<"lobby">>}]],
        Joined = fun(U, R) -> {<<"joined">>, U, R, <<"joined room ", R/binary>>} end,
        Left = fun(U, R) -> {<<"left">>, U, R, <<"left room ", R/binary>>} end,
        ?assertEqual([Joined(<<"101">>, <<"lobby">>), Joined(<<"102">>, <<"lobby">>),
                      {<<"mine">>, <<"101">>, <<"lobby">>, LineA},
                      {<<"line">>, <<"102">>, <<"lobby">>, LineB},
                      {<<"error">>, null, null, <<"bad room name: 1 to 32 of A-Z a-z 0-9 _ . -">>},
                      {<<"error">>, null, null, <<"not in room nowhere: join it first">>},
                      Left(<<"102">>, <<"lobby">>)],
                     rows(dump(P, <<"a">>))),
        RowsB = [Joined(<<"102">>, <<"lobby">>),
                 {<<"line">>, <<"101">>, <<"lobby">>, LineA},
                 {<<"mine">>, <<"102">>, <<"lobby">>, LineB},
                 Joined(<<"102">>, <<"other">>), Left(<<"102">>, <<"lobby">>)],
        ?assertEqual(RowsB, rows(dump(P, <<"b">>))),
        RowsC = [Joined(<<"103">>, <<"other">>),
                 {<<"mine">>, <<"103">>, <<"other">>, LineC},
                 Joined(<<"102">>, <<"other">>)],
        ?assertEqual(RowsC, rows(dump(P, <<"c">>))),
        %% Who: "you (uid N)" for oneself, "uid N" for the others.
        ?assertEqual([<<"you (uid 101)">>, <<"uid 102">>, <<"you (uid 101) in lobby">>,
                      <<"uid 102 in lobby">>, <<"error">>, <<"error">>, <<"uid 102">>],
                     [W || #{<<"who">> := W} <- dump(P, <<"a">>)]),
        %% Over WebSocket, a reconnect: each tab joins its room again, told
        %% on its own connection alone (the room is not told twice).
        Said = case Transport of
                   "ws" -> rejoin(S, P, RowsB, RowsC, Joined), 4;
                   _ -> 3
               end,
        %% The handler counted what it did and what it refused.
        {ok, Counts} = m(MNode, chat_room, stats, [?INBOX]),
        ?assertEqual(#{joined => 4, left => 1, said => Said, bad => 2, room_full => 0,
                       too_fast => 0, room_busy => 0, freed => 0}, Counts),
        no_script_errors(P)
    end).

%% The server ends every stream (a drain) and takes new ones at once: the
%% tabs come back by themselves and join again. c's line after it is the
%% barrier: had b been told of c's join again, it would show before.
rejoin(S, P, RowsB, RowsC, Joined) ->
    Tabs = [{<<"a">>, 101, <<"lobby">>}, {<<"b">>, 102, <<"other">>}, {<<"c">>, 103, <<"other">>}],
    Own = fun(T, U, R) -> length([E || E <- events(P), is_ev(E, <<"chat">>, T),
                                       kind(E) =:= <<"joined">>, maps:get(<<"room">>, E) =:= R,
                                       maps:get(<<"uid">>, E) =:= integer_to_binary(U)])
          end,
    Before = [{T, Own(T, U, R)} || {T, U, R} <- Tabs],
    httpdtest_server:send(S, {drain, 0}),
    httpdtest_server:send(S, {drain, cancel}),
    [httpdtest_wait:wait_until(fun() -> Own(T, U, R) > proplists:get_value(T, Before) end,
                               ?T, {rejoined, T})
     || {T, U, R} <- Tabs],
    Line = <<"back again">>,
    say(P, <<"c">>, Line),
    [wait_ev(P, fun(E) -> is_ev(E, <<"chat">>, T) andalso text(E) =:= Line end, {line_after, T})
     || T <- [<<"b">>, <<"c">>]],
    ?assertEqual(RowsB ++ [Joined(<<"102">>, <<"other">>),
                           {<<"line">>, <<"103">>, <<"other">>, Line}], rows(dump(P, <<"b">>))),
    ?assertEqual(RowsC ++ [Joined(<<"103">>, <<"other">>),
                           {<<"mine">>, <<"103">>, <<"other">>, Line}], rows(dump(P, <<"c">>))).

%%% ---------------------------------------------------------------- make run

%% scripts/run.sh --background on ports, names and a directory of its own,
%% the machine's epmd (so that this node reaches the master): its handler
%% is the default one, chat_room.
start_run() ->
    Dir = filename:join([httpdtest_os:repo_root(), "build", "tests",
                         httpdtest_os:unique("chatrun")]),
    Env = [{"RUN_DIR", Dir},
           {"PORT", integer_to_list(httpdtest_os:free_port())},
           {"ADMIN_PORT", integer_to_list(httpdtest_os:free_port())},
           {"NAME", httpdtest_os:unique("c1chat") ++ "@localhost"},
           {"MASTER", httpdtest_os:unique("masterchat") ++ "@localhost"},
           {"COOKIE", false}, {"PUBLIC", false}, {"INBOX_HANDLER", false}, {"ERL_EPMD_PORT", false},
           {"HTTPDCNODE_BIN", httpdtest_server:server_exe()}],
    R = (maps:from_list(Env))#{dir => Dir, env => Env},
    {St, Out} = run_sh("--background", Env),
    R1 = R#{pids => note_pids(R), out => Out},
    St =:= 0 orelse begin stop_run(R1), erlang:error({run_sh_failed, St, Out}) end,
    R1.

%% run.sh --stop; whatever it left (a test failed first) is killed by pid.
stop_run(#{env := Env, pids := Pids}) ->
    _ = run_sh("--stop", Env),
    [os:cmd("kill -KILL " ++ integer_to_list(P)) || {_, P} <- Pids, alive(P)],
    [httpdtest_os:forget_pid(P) || {_, P} <- Pids],
    ok.

make_run_chat(R = #{dir := Dir}) ->
    MNode = list_to_atom(maps:get("MASTER", R)),
    {ok, Cookie} = file:read_file(filename:join(Dir, "cookie")),
    true = erlang:set_cookie(MNode, binary_to_atom(string:trim(Cookie))),
    CNode = list_to_atom(maps:get("NAME", R)),
    %% The inbox run by the application, and the C-node linked to it.
    httpdtest_wait:wait_until(
      fun() -> is_pid(catch m(MNode, erlang, whereis, [?INBOX]))
                   andalso lists:member(CNode, m(MNode, httpdcnode, nodes, [])) end,
      ?T, make_run_ready),
    Base = "http://127.0.0.1:" ++ maps:get("PORT", R) ++ "/",
    with_browser(fun(P) ->
        [begin
             command(P, ["open ", T, " ", Base, "?uid=", integer_to_list(U)]),
             wait_ev(P, fun(E) -> is_ev(E, <<"log">>, T) andalso kind(E) =:= <<"open">> end,
                     {open, T}),
             wait_online(MNode, U),
             join(P, T, U, "demo")
         end || {T, U} <- [{<<"a">>, 201}, {<<"b">>, 202}]],
        say(P, <<"a">>, <<"hi b">>),
        wait_chat(P, <<"b">>, <<"line">>, 201, <<"demo">>),
        say(P, <<"b">>, <<"hi a">>),
        wait_chat(P, <<"a">>, <<"line">>, 202, <<"demo">>),
        ?assertEqual([{<<"joined">>, <<"201">>, <<"demo">>, <<"joined room demo">>},
                      {<<"joined">>, <<"202">>, <<"demo">>, <<"joined room demo">>},
                      {<<"mine">>, <<"201">>, <<"demo">>, <<"hi b">>},
                      {<<"line">>, <<"202">>, <<"demo">>, <<"hi a">>}],
                     rows(dump(P, <<"a">>))),
        %% The footer's hint: what to send this C-node, by its NAME.
        ?assertEqual(iolist_to_binary(["{any, '", atom_to_list(CNode),
                                       "'} ! {201, <<\"hello\\n\">>}."]),
                     maps:get(<<"hint">>, dump_event(P, <<"a">>))),
        no_script_errors(P)
    end).

%% The hints run.sh printed: the message names NAME and ends in a newline
%% (two of them would run together on a curl); the other C-node's command,
%% run as printed but for its name and ports (the test's own), links to
%% the master, reports presence there and takes client messages (--inbox).
make_run_other_cnode(R = #{out := Out, dir := Dir}) ->
    Name = maps:get("NAME", R),
    MNode = list_to_atom(maps:get("MASTER", R)),
    {ok, Cookie} = file:read_file(filename:join(Dir, "cookie")),
    true = erlang:set_cookie(MNode, binary_to_atom(string:trim(Cookie))),
    Line = iolist_to_binary(["{any, '", Name, "'} ! {123, <<\"Hello Libevent World\\n\">>}."]),
    ?assertNotEqual(nomatch, binary:match(Out, Line)),
    [Exe | Args] = other_cnode_command(Out),
    ?assertEqual(maps:get("HTTPDCNODE_BIN", R), Exe),
    Want = [{"--master", maps:get("MASTER", R)}, {"--presence", "httpdcnode_presence"},
            {"--inbox", "httpdcnode_inbox"},
            {"--cookie-file", filename:join([Dir, "home", ".erlang.cookie"])}],
    ?assertEqual(Want, [{K, proplists:get_value(K, pairs(Args))} || {K, _} <- Want]),
    Other = httpdtest_os:unique("c2chat") ++ "@localhost",
    Port = httpdtest_os:free_port(),
    Own = [{"--name", Other}, {"--listen", "127.0.0.1:" ++ integer_to_list(Port)},
           {"--admin-listen", "127.0.0.1:" ++ integer_to_list(httpdtest_os:free_port())}],
    Log = httpdtest_os:log_path(httpdtest_os:unique("c2chat")),
    Proc = httpdtest_os:spawn_os(Exe, unpairs([{K, proplists:get_value(K, Own, V)}
                                               || {K, V} <- pairs(Args)]), Log, Other),
    try
        ONode = list_to_atom(Other),
        httpdtest_wait:wait_until(
          fun() -> lists:member(ONode, m(MNode, httpdcnode, nodes, [])) end, ?T, linked),
        {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}]),
        ok = gen_tcp:send(Sock, httpdtest_http:request_bytes("GET", "/sse/301", "HTTP/1.1", [])),
        httpdtest_wait:wait_until(
          fun() -> m(MNode, httpdcnode, online, [301]) =:= [ONode] end, ?T, online_there),
        Post = httpdtest_http:request_bytes("POST", "/send/301", "HTTP/1.1",
                                            ["Connection: close", "Content-Type: text/plain",
                                             "Content-Length: 9"]),
        #{status := 202} = httpdtest_http:http_request(Port, <<Post/binary, "join here">>),
        gen_tcp:close(Sock)
    after
        httpdtest_os:stop_proc(Proc)
    end.

%% The command after "or another C-node" in run.sh's output, its lines
%% joined: [Exe | Args].
other_cnode_command(Out) ->
    [_, After] = binary:split(Out, <<"or another C-node">>),
    [_ | Lines] = binary:split(After, <<"\n">>, [global]),
    Cmd = lists:takewhile(fun(L) -> binary:first(L) =:= $\s end,
                          [L || L <- Lines, L =/= <<>>]),
    Text = binary:replace(iolist_to_binary(lists:join(" ", Cmd)), <<"\\">>, <<>>, [global]),
    [binary_to_list(W) || W <- string:lexemes(Text, " ")].

pairs([K, V | Rest]) -> [{K, V} | pairs(Rest)];
pairs([]) -> [].

unpairs(Pairs) -> lists:append([[K, V] || {K, V} <- Pairs]).

run_sh(Arg, Env) ->
    Port = open_port({spawn_executable, "/bin/bash"},
                     [{args, [filename:join([httpdtest_os:repo_root(), "scripts", "run.sh"]),
                              Arg]},
                      {env, Env}, exit_status, binary, stderr_to_stdout,
                      {cd, httpdtest_os:repo_root()}]),
    case httpdtest_os:port_output(Port, httpdtest_os:scaled(60000)) of
        {timeout, Out} -> erlang:error({run_sh_timeout, Out});
        Done -> Done
    end.

%% The pids run.sh noted, noted for scripts/run-tests.sh too (it ends them
%% if this node dies before stop_run).
note_pids(R = #{dir := Dir}) ->
    case file:read_file(filename:join(Dir, "pids")) of
        {ok, B} ->
            Pids = [{Role, binary_to_integer(P)}
                    || L <- binary:split(B, <<"\n">>, [global, trim_all]),
                       [Role, P] <- [binary:split(L, <<" ">>)]],
            [httpdtest_os:note_pid(P, tag(Role, R)) || {Role, P} <- Pids],
            Pids;
        _ -> []
    end.

tag(<<"server">>, R) -> maps:get("NAME", R);
tag(<<"master">>, R) -> maps:get("MASTER", R);
tag(_, _) -> "epmd".

alive(Pid) ->
    case file:read_file("/proc/" ++ integer_to_list(Pid) ++ "/cmdline") of
        {ok, B} -> B =/= <<>>;
        _ -> false
    end.

%%% ---------------------------------------------------------------- helpers

%% Tab joins Room through its form, and is told so.
join(P, Tab, Uid, Room) ->
    command(P, ["join ", Tab, " ", Room]),
    wait_chat(P, Tab, <<"joined">>, Uid, list_to_binary(Room)).

say(P, Tab, Text) -> command(P, ["say ", Tab, " ", Text]).

%% Until Tab shows a row of Kind from Uid in Room.
wait_chat(P, Tab, Kind, Uid, Room) ->
    U = integer_to_binary(Uid),
    wait_ev(P, fun(E) -> is_ev(E, <<"chat">>, Tab) andalso kind(E) =:= Kind andalso
                             maps:get(<<"uid">>, E) =:= U andalso maps:get(<<"room">>, E) =:= Room
               end, {Tab, Kind, Uid, Room}).

wait_errors(P, Tab, N) ->
    wait_ev(P, fun(_) ->
                       length([E || E <- events(P), is_ev(E, <<"chat">>, Tab),
                                    kind(E) =:= <<"error">>]) >= N
               end, {errors, Tab, N}).

wait_online(MNode, Uid) ->
    httpdtest_wait:wait_until(fun() -> m(MNode, httpdcnode, online, [Uid]) =/= [] end,
                              ?T, {online, Uid}).

%% Waits until some event so far satisfies Pred.
wait_ev(P, Pred, What) ->
    httpdtest_wait:wait_until(
      fun() ->
              Evs = events(P),
              case [E || E = #{<<"ev">> := <<"fatal">>} <- Evs] of
                  [] -> lists:any(Pred, Evs) orelse {false, lists:sublist(lists:reverse(Evs), 10)};
                  Fatal -> erlang:error({page_failed, Fatal})
              end
      end, ?T, What).

is_ev(E, Ev, Tab) -> maps:get(<<"ev">>, E) =:= Ev andalso maps:get(<<"tag">>, E, none) =:= Tab.
kind(E) -> maps:get(<<"kind">>, E, none).
text(E) -> maps:get(<<"text">>, E, <<>>).

%% The rows of #chat in Tab now, in its order.
dump(P, Tab) ->
    #{<<"chat">> := Rows} = dump_event(P, Tab),
    Rows.

%% The answer to a dump of Tab asked now.
dump_event(P, Tab) ->
    Before = length(dumps(P, Tab)),
    command(P, ["dump ", Tab]),
    httpdtest_wait:wait_until(
      fun() ->
              D = dumps(P, Tab),
              length(D) > Before andalso {true, lists:last(D)}
      end, ?T, {dump, Tab}).

dumps(P, Tab) -> [E || E <- events(P), is_ev(E, <<"dump">>, Tab)].

rows(Rows) ->
    [{K, U, R, X} || #{<<"kind">> := K, <<"uid">> := U, <<"room">> := R, <<"text">> := X} <- Rows].

no_script_errors(P) ->
    ?assertEqual([], [E || E = #{<<"ev">> := Ev} <- events(P),
                           Ev =:= <<"pageerror">> orelse Ev =:= <<"console">>
                               orelse Ev =:= <<"fatal">>]).

%% Fun(Driver) with the driver and its browser started; both end after,
%% also when Fun fails.
with_browser(Fun) ->
    P = httpdtest_page:open("chat_page.mjs", []),
    try
        wait_ev(P, fun(#{<<"ev">> := E}) -> E =:= <<"started">> end, driver_started),
        Fun(P)
    after
        httpdtest_page:close(P)
    end.
