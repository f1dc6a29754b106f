%% An example handler of client messages (httpdcnode_handler): chat rooms,
%% as the demo page (web/index.html) uses them. Shipped beside the
%% application, not in its .app: `make` builds it into tools/erlang/ebin and
%% `make run` starts the application with it as the inbox
%% (env inbox => {httpdcnode_inbox, chat_room, []}, the C-node with
%% --inbox httpdcnode_inbox).
%%
%% What a client sends (one command per WebSocket message, UTF-8):
%%   join ROOM          the uid becomes a member of ROOM
%%   leave ROOM         it is one no more
%%   say ROOM TEXT      TEXT to every member of ROOM; the sender must be one
%% What every member of the room gets (a message to its uid, with an id and
%% kept in its history like any other, so on every transport):
%%   chat ROOM UID TEXT     UID said TEXT
%%   chat-joined ROOM UID   UID is a member now (the joiner gets it too)
%%   chat-left ROOM UID     UID is a member no more (the leaver gets it too)
%% What the sending connection alone gets (httpdcnode:reply/2, a WebSocket
%% frame): chat-joined ROOM UID when UID was a member already (a page that
%% reconnects joins again; the others are not told twice), and
%%   chat-error WHY         the command was refused; nothing else happened
%% ROOM: 1 to 32 of A-Z a-z 0-9 _ . -; TEXT: 1 to ?MAX_TEXT bytes of UTF-8
%% (line breaks allowed). Split on the first spaces only, so the page needs
%% no parser beyond that.
%%
%% Members are subscriptions in subsmanager: {subscription, Uid,
%% {chat_room, Room}}, so every master has them (mnesia copies) and
%% whichever master's inbox gets a uid's message can fan it out. The
%% fan-out is httpdcnode:multicast/2 of the room's subscribers: router:send/2
%% would also address the room itself, which is no uid. Membership outlives
%% the connection (no connection-down reports yet): a member offline for a
%% moment gets the lines on resume; a page that loads again joins again.
%%
%% State: a map of counters (a few words), read by stats/1. Bad input is
%% answered and counted, never a crash.
-module(chat_room).
-behaviour(httpdcnode_handler).

-export([init/1, handle_in/4, handle_info/2, stats/1, stats/2]).

%% The C-node already bounds a client message (--max-client-message, 4096
%% bytes); a line of chat is shorter.
-define(MAX_TEXT, 1000).
-define(MAX_ROOM, 32).
%% Rooms one uid may be in: its subscriptions are not freed when it goes.
-define(MAX_ROOMS, 16).

init(_Args) ->
    {ok, #{joined => 0, left => 0, said => 0, bad => 0}}.

%% A binary message ({binary, Data}: a binary frame, a POST of
%% application/octet-stream) is read as the same command would be: its
%% text is checked where it matters (say).
handle_in(Uid, Conn, {binary, Data}, State) ->
    handle_in(Uid, Conn, Data, State);
handle_in(Uid, Conn, Data, State) ->
    case command(Uid, Data) of
        {ok, Key, Reply} ->
            reply(Conn, Reply),
            {ok, bump(Key, State)};
        {ok, Reply} ->
            reply(Conn, Reply),
            {ok, State};
        {error, Why} ->
            reply(Conn, [<<"chat-error ">>, Why]),
            {ok, bump(bad, State)}
    end.

%% {Pid, Ref, chat_stats}: the counters, for stats/1 (tests, a shell).
handle_info({Pid, Ref, chat_stats}, State) when is_pid(Pid) ->
    Pid ! {Ref, State},
    {ok, State};
handle_info(_, State) ->
    {ok, State}.

%% The counters of the inbox registered as Inbox (on this node, or
%% {Inbox, Node}): joined, left, said, bad.
stats(Inbox) -> stats(Inbox, 5000).

stats(Inbox, Timeout) ->
    Ref = make_ref(),
    Inbox ! {self(), Ref, chat_stats},
    receive {Ref, S} -> {ok, S}
    after Timeout -> {error, timeout}
    end.

%%% ---------------------------------------------------------------- commands

command(Uid, <<"join ", Room/binary>>) ->
    with_room(Room, fun() -> join(Uid, Room) end);
command(Uid, <<"leave ", Room/binary>>) ->
    with_room(Room, fun() -> leave(Uid, Room) end);
command(Uid, <<"say ", Rest/binary>>) ->
    case binary:split(Rest, <<" ">>) of
        [Room, Text] -> with_room(Room, fun() -> say(Uid, Room, Text) end);
        _ -> {error, <<"say needs a room and a text: say ROOM TEXT">>}
    end;
command(_, _) ->
    {error, <<"unknown command: join ROOM, leave ROOM or say ROOM TEXT">>}.

with_room(Room, Fun) ->
    case valid_room(Room) of
        true -> Fun();
        false -> {error, <<"bad room name: 1 to 32 of A-Z a-z 0-9 _ . -">>}
    end.

valid_room(R) when byte_size(R) >= 1, byte_size(R) =< ?MAX_ROOM ->
    lists:all(fun(C) -> (C >= $a andalso C =< $z) orelse (C >= $A andalso C =< $Z)
                            orelse (C >= $0 andalso C =< $9)
                            orelse C =:= $_ orelse C =:= $. orelse C =:= $-
              end, binary_to_list(R));
valid_room(_) -> false.

join(Uid, Room) ->
    Rooms = rooms(Uid),
    Notice = notice(<<"chat-joined ">>, Room, Uid),
    case lists:member(Room, Rooms) of
        true -> {ok, Notice};
        false when length(Rooms) >= ?MAX_ROOMS ->
            {error, <<"in too many rooms (16): leave one first">>};
        false ->
            ok = subsmanager:add_subscriptions([{subscription, Uid, key(Room)}]),
            to_room(Room, Notice),
            {ok, joined, none}
    end.

%% The members are told before the leaver is removed: it is told too.
leave(Uid, Room) ->
    case lists:member(Room, rooms(Uid)) of
        false -> {error, [<<"not in room ">>, Room]};
        true ->
            to_room(Room, notice(<<"chat-left ">>, Room, Uid)),
            case subsmanager:remove_subscriptions([{subscription, Uid, key(Room)}]) of
                ok -> {ok, left, none};
                {error, _} -> {error, <<"could not leave the room, try again">>}
            end
    end.

say(Uid, Room, Text) ->
    Valid = byte_size(Text) >= 1 andalso byte_size(Text) =< ?MAX_TEXT,
    case Valid andalso is_binary(unicode:characters_to_binary(Text)) of
        false when byte_size(Text) > ?MAX_TEXT -> {error, <<"text too long (1000 bytes at most)">>};
        false when Text =:= <<>> -> {error, <<"empty text">>};
        false -> {error, <<"text not UTF-8">>};
        true ->
            case lists:member(Room, rooms(Uid)) of
                true ->
                    %% The sender's own copy is its confirmation.
                    to_room(Room, [notice(<<"chat ">>, Room, Uid), $\s, Text]),
                    {ok, said, none};
                false ->
                    {error, [<<"not in room ">>, Room, <<": join it first">>]}
            end
    end.

%% One message to every member, online or offline for a moment.
to_room(Room, Msg) ->
    ok = httpdcnode:multicast(subsmanager:get_subscribers(key(Room)), Msg).

notice(What, Room, Uid) -> [What, Room, $\s, integer_to_binary(Uid)].

%% The rooms Uid is in.
rooms(Uid) ->
    [R || {chat_room, R} <- subsmanager:get_subscriptions(Uid)].

key(Room) -> {chat_room, Room}.

reply(_, none) -> ok;
reply(Conn, Msg) -> httpdcnode:reply(Conn, Msg).

bump(K, State) -> State#{K := maps:get(K, State) + 1}.
