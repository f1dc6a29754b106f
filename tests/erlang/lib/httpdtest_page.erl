%% SPDX-License-Identifier: Apache-2.0
%% A page in a real browser for the black-box tests: a driver script of
%% tests/js (browser_page.mjs, proxy_page.mjs) run by node, which starts
%% headless Chromium and says what happens as one JSON line each.
%%
%% A process owns the driver's port and keeps what it said; linked, so that
%% the port (and with its stdin the driver and browser) goes with the test.
%% The driver's and the browser's pids are noted (httpdtest_os:note_pid/2)
%% so that run-tests.sh ends them if all else fails.
-module(httpdtest_page).

-include_lib("eunit/include/eunit.hrl").

-export([open/2, events/1, command/2, close/1]).

%% tests/js/Script with Args; the owner's pid.
open(Script0, Args) ->
    Root = httpdtest_os:repo_root(),
    Node = os:find_executable("node"),
    ?assertNotEqual(false, Node),
    Js = filename:join([Root, "tests", "js"]),
    Script = filename:join(Js, Script0),
    spawn_link(fun() ->
        Port = open_port({spawn_executable, Node},
                         [{args, [Script | Args]}, {cd, Js}, {line, 1 bsl 20}, binary, use_stdio,
                          exit_status]),
        {os_pid, OsPid} = erlang:port_info(Port, os_pid),
        httpdtest_os:note_pid(OsPid, Script),
        page_loop(#{port => Port, os_pid => OsPid, script => Script, events => [],
                    partial => <<>>, browsers => [], status => running})
    end).

%% Every event the driver said so far, in order.
events(P) ->
    Ref = make_ref(),
    P ! {events, self(), Ref},
    receive {Ref, Evs} -> Evs after 5000 -> erlang:error(page_owner_silent) end.

%% A line to the driver's stdin (none once it exited).
command(P, Line) -> P ! {command, Line}, ok.

%% The driver told to quit, waited for; what outlives it killed.
close(P) ->
    Ref = make_ref(),
    M = erlang:monitor(process, P),
    P ! {close, self(), Ref},
    receive
        {Ref, closed} -> erlang:demonitor(M, [flush]), ok;
        {'DOWN', M, _, _, _} -> ok
    after httpdtest_os:scaled(60000) -> erlang:error(page_not_closed)
    end.

page_loop(St = #{port := Port, events := Evs, partial := Part}) ->
    receive
        {Port, {data, {noeol, B}}} ->
            page_loop(St#{partial := <<Part/binary, B/binary>>});
        {Port, {data, {eol, B}}} ->
            E = httpdtest_json:json_decode(<<Part/binary, B/binary>>),
            page_loop(noted(E, St#{events := [E | Evs], partial := <<>>}));
        {Port, {exit_status, Code}} ->
            page_loop(St#{status := {exited, Code}});
        {events, From, Ref} ->
            From ! {Ref, lists:reverse(Evs)},
            page_loop(St);
        {command, Line} ->
            case St of
                #{status := running} -> port_command(Port, [Line, "\n"]);
                _ -> ok
            end,
            page_loop(St);
        {close, From, Ref} ->
            end_driver(St),
            From ! {Ref, closed}
    end.

%% The browser's pid, noted so that run-tests.sh ends it if all else fails.
noted(#{<<"ev">> := <<"browser">>, <<"pid">> := Pid, <<"profile">> := Dir},
      St = #{browsers := Bs}) ->
    httpdtest_os:note_pid(Pid, binary_to_list(Dir)),
    St#{browsers := [{Pid, binary_to_list(Dir)} | Bs]};
noted(_, St) -> St.

%% "quit": the driver closes the browser and exits; one that does not in
%% time is killed, and so is a browser that outlives it.
end_driver(St = #{port := Port, os_pid := OsPid, script := Script, browsers := Bs}) ->
    Exited = case St of
                 #{status := running} ->
                     catch port_command(Port, "quit\n"),
                     receive {Port, {exit_status, _}} -> true
                     after httpdtest_os:scaled(20000) -> false
                     end;
                 _ -> true
             end,
    Exited orelse kill_if(OsPid, Script),
    catch port_close(Port),
    httpdtest_os:forget_pid(OsPid),
    [begin
         gone(Pid, Dir, 10000) orelse kill_if(Pid, Dir),
         httpdtest_os:forget_pid(Pid),
         file:del_dir_r(Dir)     % the driver removes it, unless it was killed
     end || {Pid, Dir} <- Bs],
    ok.

%% Whether Pid no longer runs with Tag on its command line, waiting up to Ms.
gone(Pid, Tag, Ms) ->
    try
        httpdtest_wait:wait_until(fun() -> not running_as(Pid, Tag) end, Ms, browser_gone)
    catch error:{timeout_waiting_for, _, _} -> false
    end.

running_as(Pid, Tag) ->
    case file:read_file("/proc/" ++ integer_to_list(Pid) ++ "/cmdline") of
        {ok, Cmd} -> binary:match(Cmd, list_to_binary(Tag)) =/= nomatch;
        _ -> false
    end.

kill_if(Pid, Tag) ->
    case running_as(Pid, Tag) of
        true -> os:cmd("kill -KILL " ++ integer_to_list(Pid)), ok;
        false -> ok
    end.
