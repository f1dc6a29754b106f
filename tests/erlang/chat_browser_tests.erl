%% The demo page's chat, end to end: a real master running the httpdcnode
%% application with the example handler chat_room as its inbox (env inbox,
%% as `make run` sets it), a real server with --inbox and --presence, and
%% tabs of the page in headless Chromium (tests/js/chat_page.mjs) driven
%% through their form. Two uids join one room and each says a line: both
%% tabs show both lines, with who said them; a third tab in another room
%% sees neither; bad input gets an error on the sender's tab only.
%%
%% The same over SSE (no WebSocket) needs conn.send over POST /send/N: it
%% runs when the server has it, else it only checks that the server still
%% answers POST /send/1 with 404 or 405, and says it skipped the chat.
-module(chat_browser_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdcnode_page, [events/1, command/2]).

%% Waits on the page or the master; Chromium starts in a few seconds.
-define(T, 20000).
-define(INBOX, httpdcnode_inbox).

chat_browser_test_() ->
    [chat_test("chat over WebSocket: two uids in one room see both lines, with who said them; "
               "a third room sees neither; bad input answered on the sender's tab only",
               fun(Ctx) -> {run, fun() -> chat(Ctx, "ws") end} end),
     chat_test("chat over SSE only (conn.send by POST /send/N)",
               fun(Ctx) ->
                       case post_send(Ctx) of
                           {absent, St} -> {skip, St};
                           present -> {run, fun() -> chat(Ctx, "sse") end}
                       end
               end)].

%% A fresh master with the application and a server for each case; Case(Ctx)
%% says {run, Fun} or {skip, Status} (POST /send/N answered Status).
chat_test(Label, Case) ->
    {setup, fun start/0, fun stop/1,
     fun(Ctx = #{server := S}) ->
             case Case(Ctx) of
                 {run, Fun} ->
                     {timeout, httpdcnode_test_lib:scaled(120),
                      {Label, fun() -> httpdcnode_test_lib:logged(S, fun(_) -> Fun() end) end}};
                 {skip, St} ->
                     Why = io_lib:format("SKIPPED: POST /send/1 answers ~b, the server has no "
                                         "POST /send/N yet: no conn.send without a WebSocket", [St]),
                     {Label ++ ": " ++ lists:flatten(Why),
                      fun() -> io:format(user, "~n~s: ~s~n", [?MODULE, Why]) end}
             end
     end}.

start() ->
    M = httpdcnode_test_lib:start_master(),
    MNode = httpdcnode_test_lib:master_node(M),
    try
        start_app(MNode),
        S = httpdcnode_test_lib:start_server(#{master => M, presence => httpdcnode_presence,
                                               extra_args => ["--inbox", atom_to_list(?INBOX)]}),
        httpdcnode_test_lib:wait_until(
          fun() -> lists:member(httpdcnode_test_lib:node_of(S), m(MNode, httpdcnode, nodes, [])) end,
          ?T, {master_knows, httpdcnode_test_lib:node_of(S)}),
        #{master => M, mnode => MNode, server => S}
    catch C:E:St ->
            httpdcnode_test_lib:stop_master(M),
            erlang:raise(C, E, St)
    end.

stop(#{master := M, server := S}) ->
    httpdcnode_test_lib:stop_server(S),
    httpdcnode_test_lib:stop_master(M).

%% As a user does: the application's env names the inbox and its handler,
%% then the application starts (and supervises) it.
start_app(MNode) ->
    Ebin = filename:absname(filename:dirname(code:which(httpdcnode))),
    true = m(MNode, code, add_patha, [Ebin]),
    ok = m(MNode, application, load, [httpdcnode]),
    ok = m(MNode, application, set_env, [httpdcnode, inbox, {?INBOX, chat_room, []}]),
    {ok, _} = m(MNode, application, ensure_all_started, [httpdcnode]),
    ?assert(is_pid(m(MNode, erlang, whereis, [?INBOX]))).

m(Node, Mod, F, A) -> erpc:call(Node, Mod, F, A, 30000).

%% What the server answers POST /send/1: 404 or 405 means it has none.
post_send(#{server := S}) ->
    Port = httpdcnode_test_lib:port_of(S),
    #{status := St} = httpdcnode_test_lib:http_request(
                        Port, httpdcnode_test_lib:request_bytes(
                                "POST", "/send/1", "HTTP/1.1",
                                ["Connection: close", "Content-Length: 0"])),
    case St of
        404 -> {absent, St};
        405 -> {absent, St};
        _ -> present
    end.

%%% ---------------------------------------------------------------- the case

chat(#{server := S, mnode := MNode}, Transport) ->
    Base = "http://127.0.0.1:" ++ integer_to_list(httpdcnode_test_lib:port_of(S)) ++ "/",
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
        [join(P, T, R) || {T, R} <- [{<<"a">>, "lobby"}, {<<"b">>, "lobby"}, {<<"c">>, "other"}]],
        %% a's line reaches both before b says its own: both tabs in one order.
        LineA = <<"hello from a">>,
        LineB = <<"hi from b, caf", 16#c3, 16#a9, " <b>not bold</b>">>,
        say(P, <<"a">>, LineA),
        [wait_line(P, T, 101, LineA) || T <- [<<"a">>, <<"b">>]],
        say(P, <<"b">>, LineB),
        [wait_line(P, T, 102, LineB) || T <- [<<"a">>, <<"b">>]],
        %% c's own line comes after both lobby lines went out, from the one
        %% inbox to the one C-node: had they reached c, they would be there.
        LineC = <<"anyone here?">>,
        say(P, <<"c">>, LineC),
        wait_line(P, <<"c">>, 103, LineC),
        %% Bad input from a: a room name the handler refuses, a line to a
        %% room it is not in. Answered after c's line, so once a shows the
        %% errors, a and b would show c's line had it reached them.
        join_bad(P, <<"a">>, "bad/room"),
        say_in(P, <<"a">>, "nowhere", <<"lost line">>),
        wait_ev(P, fun(E) -> is_chat(E, <<"a">>, <<"error">>) andalso
                                 binary:match(text(E), <<"not in room nowhere">>) =/= nomatch
                   end, not_in_room_error),
        Lobby = [{<<"line">>, <<"101">>, <<"lobby">>, LineA}, {<<"line">>, <<"102">>, <<"lobby">>, LineB}],
        Mine = fun(Uid, Ls) -> [case U of Uid -> {<<"mine">>, U, R, X}; _ -> L end
                                || L = {_, U, R, X} <- Ls] end,
        DumpA = dump(P, <<"a">>),
        ?assertMatch([{<<"joined">>, null, <<"lobby">>, <<"joined room lobby">>}], joined(DumpA)),
        ?assertEqual(Mine(<<"101">>, Lobby), lines(DumpA)),
        ?assertMatch([<<"bad room name", _/binary>>, <<"not in room nowhere: join it first">>],
                     [X || {<<"error">>, _, _, X} <- DumpA]),
        DumpB = dump(P, <<"b">>),
        ?assertEqual(Mine(<<"102">>, Lobby), lines(DumpB)),
        ?assertEqual([], [R || R = {<<"error">>, _, _, _} <- DumpB]),
        DumpC = dump(P, <<"c">>),
        ?assertEqual([{<<"joined">>, null, <<"other">>, <<"joined room other">>},
                      {<<"mine">>, <<"103">>, <<"other">>, LineC}], DumpC),
        %% The who column: "you (uid N)" for one's own lines, "uid N" else.
        ?assertEqual([<<"you (uid 101) in lobby">>, <<"uid 102 in lobby">>],
                     who(P, <<"a">>, [<<"mine">>, <<"line">>])),
        %% The handler counted: 3 joins, 3 lines, 2 bad.
        {ok, Counts} = m(MNode, chat_room, stats, [?INBOX]),
        ?assertEqual(#{joined => 3, left => 0, said => 3, bad => 2}, Counts),
        no_script_errors(P)
    end).

%%% ---------------------------------------------------------------- helpers

join(P, Tab, Room) ->
    command(P, ["join ", Tab, " ", Room]),
    R = list_to_binary(Room),
    wait_ev(P, fun(E) -> is_chat(E, Tab, <<"joined">>) andalso maps:get(<<"room">>, E) =:= R end,
            {joined, Tab, Room}).

join_bad(P, Tab, Room) ->
    command(P, ["join ", Tab, " ", Room]),
    wait_ev(P, fun(E) -> is_chat(E, Tab, <<"error">>) andalso
                             binary:match(text(E), <<"bad room name">>) =/= nomatch
               end, {bad_room_error, Tab}).

say(P, Tab, Text) -> command(P, ["say ", Tab, " ", Text]).

%% Text said to Room, typed into the room box first (not joined).
say_in(P, Tab, Room, Text) ->
    command(P, ["room ", Tab, " ", Room]),
    say(P, Tab, Text).

wait_line(P, Tab, Uid, Text) ->
    U = integer_to_binary(Uid),
    wait_ev(P, fun(E) -> is_ev(E, <<"chat">>, Tab) andalso maps:get(<<"uid">>, E) =:= U
                             andalso text(E) =:= Text end, {line, Tab, Uid}).

wait_online(MNode, Uid) ->
    httpdcnode_test_lib:wait_until(fun() -> m(MNode, httpdcnode, online, [Uid]) =/= [] end,
                                   ?T, {online, Uid}).

%% Waits until some event so far satisfies Pred.
wait_ev(P, Pred, What) ->
    httpdcnode_test_lib:wait_until(
      fun() ->
              Evs = events(P),
              case [E || E = #{<<"ev">> := <<"fatal">>} <- Evs] of
                  [] -> lists:any(Pred, Evs) orelse {false, lists:sublist(lists:reverse(Evs), 10)};
                  Fatal -> erlang:error({page_failed, Fatal})
              end
      end, ?T, What).

is_ev(E, Ev, Tab) -> maps:get(<<"ev">>, E) =:= Ev andalso maps:get(<<"tag">>, E, none) =:= Tab.
is_chat(E, Tab, Kind) -> is_ev(E, <<"chat">>, Tab) andalso kind(E) =:= Kind.
kind(E) -> maps:get(<<"kind">>, E, none).
text(E) -> maps:get(<<"text">>, E, <<>>).

%% #chat of Tab now, as {Kind, Uid, Room, Text}.
dump(P, Tab) ->
    Before = length(dumps(P, Tab)),
    command(P, ["dump ", Tab]),
    #{<<"chat">> := Rows} =
        httpdcnode_test_lib:wait_until(
          fun() ->
                  D = dumps(P, Tab),
                  length(D) > Before andalso {true, lists:last(D)}
          end, ?T, {dump, Tab}),
    [{K, U, R, X} || #{<<"kind">> := K, <<"uid">> := U, <<"room">> := R, <<"text">> := X} <- Rows].

dumps(P, Tab) -> [E || E <- events(P), is_ev(E, <<"dump">>, Tab)].

who(P, Tab, Kinds) ->
    Before = length(dumps(P, Tab)),
    command(P, ["dump ", Tab]),
    #{<<"chat">> := Rows} =
        httpdcnode_test_lib:wait_until(
          fun() ->
                  D = dumps(P, Tab),
                  length(D) > Before andalso {true, lists:last(D)}
          end, ?T, {dump, Tab}),
    [W || #{<<"kind">> := K, <<"who">> := W} <- Rows, lists:member(K, Kinds)].

lines(Dump) -> [R || R = {K, _, _, _} <- Dump, K =:= <<"line">> orelse K =:= <<"mine">>].
joined(Dump) -> [R || R = {<<"joined">>, _, _, _} <- Dump].

no_script_errors(P) ->
    ?assertEqual([], [E || E = #{<<"ev">> := Ev} <- events(P),
                           Ev =:= <<"pageerror">> orelse Ev =:= <<"console">>
                               orelse Ev =:= <<"fatal">>]).

%% Fun(Driver) with the driver and its browser started; both end after,
%% also when Fun fails.
with_browser(Fun) ->
    P = httpdcnode_page:open("chat_page.mjs", []),
    try
        wait_ev(P, fun(#{<<"ev">> := E}) -> E =:= <<"started">> end, driver_started),
        Fun(P)
    after
        httpdcnode_page:close(P)
    end.
