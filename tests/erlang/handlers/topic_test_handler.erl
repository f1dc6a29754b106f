%% SPDX-License-Identifier: Apache-2.0
%% An httpdcnode_handler for the topic tests: a join of a topic that starts
%% "ok:" is allowed, any other refused with the reason not_allowed; every
%% join asked and every leave goes to the test's process as {join, Uid,
%% Conn, Topic, Since} and {leave, Uid, Conn, Topic}.
-module(topic_test_handler).
%% (-behaviour(httpdcnode_handler): not declared, the tests compile apart from the application.)

-export([init/1, handle_in/4, authorize_join/4, handle_leave/4]).

init(Dest) -> {ok, Dest}.

handle_in(_Uid, _Conn, _Data, Dest) -> {ok, Dest}.

authorize_join(Uid, Topic, #{conn := Conn, since := Since}, Dest) ->
    Dest ! {join, Uid, Conn, Topic, Since},
    case Topic of
        <<"ok:", _/binary>> -> {allow, Dest};
        _ -> {{deny, not_allowed}, Dest}
    end.

handle_leave(Uid, Conn, Topic, Dest) ->
    Dest ! {leave, Uid, Conn, Topic},
    {ok, Dest}.
