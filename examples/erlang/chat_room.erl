%% SPDX-License-Identifier: Apache-2.0
%% An example handler of client messages (httpdcnode_handler): chat rooms
%% on topics, as the demo page (web/index.html) uses them. Shipped beside
%% the application, not in its .app: `make` builds it into tools/erlang/ebin
%% and `make run` starts the application with it as the inbox (env inbox =>
%% {httpdcnode_inbox, chat_room, [], #{workers => 4}}; the C-node with
%% --inbox httpdcnode_inbox --topic-auth handler --presence-conns).
%%
%% A room ROOM is the topic room:ROOM. A page joins it as it joins any
%% topic (the browser client's conn.subscribe: a WebSocket's join message,
%% or ?topics= when its stream opens), and the C-node asks this handler
%% (authorize_join/4), which admits it within the room's bounds; a
%% refusal's reason is told to the page (bad_room, too_many_rooms,
%% too_fast, room_full, room_busy). A page that reconnects names its rooms
%% with the last id it saw in each: it is admitted again without a notice
%% to the room (it resumes what it missed, it did not leave).
%% What every member gets (a message of the topic, with the topic's id and
%% kept in its history, so on every transport; one Erlang message per
%% C-node that has members, whatever their number):
%%   chat ROOM UID TEXT     UID said TEXT
%%   chat-joined ROOM UID   UID joined (the joiner is told by the server:
%%                          the event joined; the first in a room tells nobody)
%%   chat-left ROOM UID     UID left the room (asked to; a page that closes
%%                          leaves silently)
%% What a client sends (one command per message, UTF-8):
%%   say ROOM TEXT      TEXT to every member of ROOM; the connection must
%%                      be one (it was admitted and did not leave)
%% and gets, on its connection alone (httpdcnode:reply/2):
%%   chat-error WHY     the command was refused; nothing else happened
%% ROOM: 1 to 32 of A-Z a-z 0-9 _ . -; TEXT: 1 to ?MAX_TEXT bytes of UTF-8
%% (line breaks allowed).
%%
%% Members are connections: who may say what in a room is kept in a table
%% {Uid, Conn, Room} shared by the workers, filled by authorize_join and
%% emptied by handle_leave, handle_conn_down (the C-node's --presence-conns)
%% and, for what those miss, when the uid has been offline for
%% offline_grace_ms. The fan-out is httpdcnode:publish/2: no member list
%% in the handler, no multicast of uids.
%%
%% Bounds, so that one client (the example runs without tokens: any uid,
%% any number of connections) cannot stall the chat of the others. Each
%% refusal is counted; Args (a map) may change them:
%%   max_members (1000)   streams in a room (httpdcnode:topic_count/1, as the
%%                        masters last heard): a join past it is refused
%%   max_rooms (16)       rooms of a uid (all its connections)
%%   join_burst (20), join_rate (2)   joins of a uid: 20 at once, then 2 a
%%                        second (a page resuming a room takes none)
%%   room_rate (20)       joins and lines a room fans out per second
%%   offline_grace_ms (10000)   a uid offline for that long (the presence
%%                        server's offline notice, then httpdcnode:online/1
%%                        once more) is a member of nothing any more
%% A connection keeps at most ?MEMBERSHIPS_PER_UID rows of its uid: past
%% it the uid's oldest connection's are dropped (connection ids grow with
%% time). The inbox should be a pool (workers => N, as `make run` starts
%% it): a uid's commands and joins are handled in order by one worker.
%%
%% State: counters and the join buckets of the uids this worker saw lately
%% (all dropped past ?MAX_BUCKETS uids). stats/1 sums the counters of every
%% worker. Bad input is answered and counted, never a crash.
-module(chat_room).
-behaviour(httpdcnode_handler).

-export([init/1, handle_in/4, authorize_join/4, handle_leave/4, handle_conn_down/4,
         handle_offline/2, handle_info/2, stats/1, stats/2]).

-define(MAX_TEXT, 1000).
-define(MAX_ROOM, 32).
-define(DEFAULTS, #{max_members => 1000, max_rooms => 16, join_burst => 20, join_rate => 2,
                    room_rate => 20, offline_grace_ms => 10000}).
-define(COUNTERS, [joined, left, said, bad, room_full, too_fast, room_busy, freed]).
-define(MAX_BUCKETS, 100000).
-define(MEMBERSHIPS_PER_UID, 256).
%% The rooms' fan-outs this second, shared by the workers: {Room, Second, N}.
-define(RATES, chat_room_rates).
-define(RATES_SWEEP, 10000).
%% {{Uid, Conn, Room}}: who is in which room, shared by the workers.
-define(MEMBERS, chat_room_members).

init(Args) ->
    Opts = maps:merge(?DEFAULTS, case Args of M when is_map(M) -> M; _ -> #{} end),
    case [{K, V} || {K, V} <- maps:to_list(Opts), not valid_opt(K, V)] of
        [] -> ok;
        Bad -> erlang:error({chat_room, bad_args, Bad, "keys of the defaults, integers >= 1"})
    end,
    table(?RATES, set),
    table(?MEMBERS, ordered_set),
    {ok, #{opts => Opts, counts => maps:from_list([{K, 0} || K <- ?COUNTERS]),
           buckets => #{}}}.

valid_opt(offline_grace_ms, V) -> is_integer(V) andalso V >= 0;
valid_opt(K, V) -> is_map_key(K, ?DEFAULTS) andalso is_integer(V) andalso V >= 1.

%%% ---------------------------------------------------------------- joins

%% A join of Topic by Conn of Uid: a room's, within its bounds. A resume
%% (the page names the id it saw last) is let in again without a notice
%% and without a join token.
authorize_join(Uid, Topic, #{conn := Conn, since := Since}, State = #{opts := Opts}) ->
    case room_of(Topic) of
        error -> {{deny, bad_room}, bump(bad, State)};
        {ok, Room} when Since =/= undefined ->
            member(Uid, Conn, Room),
            {allow, State};
        {ok, Room} -> admit(Uid, Conn, Room, Topic, Opts, State)
    end.

admit(Uid, Conn, Room, Topic, Opts = #{max_rooms := MaxRooms, max_members := Max}, State) ->
    Rooms = rooms(Uid),
    case lists:member(Room, Rooms) of
        true -> member(Uid, Conn, Room), {allow, State};       % another tab of the uid
        false when length(Rooms) >= MaxRooms -> {{deny, too_many_rooms}, bump(bad, State)};
        false ->
            case take_join(Uid, State) of
                {false, State1} -> {{deny, too_fast}, bump(too_fast, State1)};
                {true, State1} ->
                    case httpdcnode:topic_count(Topic) of
                        N when N >= Max -> {{deny, room_full}, bump(room_full, State1)};
                        N ->
                            case room_admit(Room, Opts) of
                                false -> {{deny, room_busy}, bump(room_busy, State1)};
                                true ->
                                    %% the members so far (none: nobody to tell; a
                                    %% publish to a topic held nowhere would wait for
                                    %% the joiner); the joiner is told by the server
                                    N > 0 andalso
                                        httpdcnode:publish(Topic, notice(<<"chat-joined ">>, Room, Uid)),
                                    member(Uid, Conn, Room),
                                    {allow, bump(joined, State1)}
                            end
                    end
            end
    end.

%% Conn left Topic (it asked): the room is told.
handle_leave(Uid, Conn, Topic, State) ->
    case room_of(Topic) of
        {ok, Room} ->
            ets:delete(?MEMBERS, {Uid, Conn, Room}),
            ok = httpdcnode:publish(Topic, notice(<<"chat-left ">>, Room, Uid)),
            {ok, bump(left, State)};
        error -> {ok, State}
    end.

%% The connection ended (--presence-conns): in no room any more, silently.
handle_conn_down(Uid, Conn, _Reason, State) ->
    ets:select_delete(?MEMBERS, [{{{Uid, Conn, '_'}}, [], [true]}]),
    {ok, State}.

%% Uid has no stream left anywhere: its memberships go unless it is back
%% within the grace time.
handle_offline(Uid, State = #{opts := #{offline_grace_ms := Grace}}) ->
    erlang:send_after(Grace, self(), {chat_room_offline, Uid}),
    {ok, State}.

%%% ---------------------------------------------------------------- lines

handle_in(Uid, Conn, {binary, Data}, State) ->
    handle_in(Uid, Conn, Data, State);
handle_in(Uid, Conn, <<"say ", Rest/binary>>, State) ->
    {Result, State1} = case binary:split(Rest, <<" ">>) of
                           [Room, Text] -> say(Uid, Conn, Room, Text, State);
                           _ -> {bad(<<"say needs a room and a text: say ROOM TEXT">>), State}
                       end,
    answer(Conn, Result, State1);
handle_in(_Uid, Conn, _Data, State) ->
    answer(Conn, bad(<<"unknown command: say ROOM TEXT (join and leave rooms as topics)">>),
           State).

answer(_Conn, {ok, Key}, State) -> {ok, bump(Key, State)};
answer(Conn, {error, Key, Why}, State) ->
    httpdcnode:reply(Conn, [<<"chat-error ">>, Why]),
    {ok, bump(Key, State)}.

bad(Why) -> {error, bad, Why}.

say(Uid, Conn, Room, Text, State = #{opts := Opts}) ->
    Valid = byte_size(Text) >= 1 andalso byte_size(Text) =< ?MAX_TEXT,
    Result =
        case valid_room(Room) of
            false -> bad(<<"bad room name: 1 to 32 of A-Z a-z 0-9 _ . -">>);
            true when not Valid, byte_size(Text) > ?MAX_TEXT -> bad(<<"text too long (1000 bytes at most)">>);
            true when not Valid -> bad(<<"empty text">>);
            true ->
                case {is_binary(unicode:characters_to_binary(Text)),
                      ets:member(?MEMBERS, {Uid, Conn, Room})} of
                    {false, _} -> bad(<<"text not UTF-8">>);
                    {true, false} -> bad([<<"not in room ">>, Room, <<": join it first">>]);
                    {true, true} ->
                        case room_admit(Room, Opts) of
                            false -> {error, room_busy,
                                      [<<"room ">>, Room, <<" is busy: try again in a moment">>]};
                            true ->
                                %% the sender's own copy is its confirmation
                                ok = httpdcnode:publish(topic(Room),
                                                       [notice(<<"chat ">>, Room, Uid), $\s, Text]),
                                {ok, said}
                        end
                end
        end,
    {Result, State}.

%%% ---------------------------------------------------------------- the rest

%% {Pid, Ref, chat_stats}: this worker's counters, for stats/1.
handle_info({Pid, Ref, chat_stats}, State = #{counts := C}) when is_pid(Pid) ->
    Pid ! {Ref, C},
    {ok, State};
handle_info({chat_room_offline, Uid}, State) ->
    case httpdcnode:online(Uid) of
        [] -> {ok, free(Uid, State)};
        _ -> {ok, State}
    end;
handle_info(_, State) ->
    {ok, State}.

%% The counters of the inbox registered as Inbox (on this node, or
%% {Inbox, Node}), summed over its workers: joined, left, said, bad (bad
%% input), room_full, too_fast, room_busy (refused by a bound), freed
%% (memberships of uids gone for the grace time).
stats(Inbox) -> stats(Inbox, 5000).

stats(Inbox, Timeout) ->
    case httpdcnode_inbox:workers(Inbox, Timeout) of
        {ok, Workers} ->
            Refs = [begin
                        Ref = make_ref(),
                        W ! {self(), Ref, chat_stats},
                        Ref
                    end || W <- Workers],
            Deadline = erlang:monotonic_time(millisecond) + Timeout,
            collect(Refs, maps:from_list([{K, 0} || K <- ?COUNTERS]), Deadline);
        {error, _} = E -> E
    end.

collect([], Sum, _Deadline) ->
    {ok, Sum};
collect([Ref | Refs], Sum, Deadline) ->
    receive {Ref, C} -> collect(Refs, maps:fold(fun(K, V, S) -> S#{K => V + maps:get(K, S, 0)} end,
                                                Sum, C), Deadline)
    after max(0, Deadline - erlang:monotonic_time(millisecond)) -> {error, timeout}
    end.

topic(Room) -> <<"room:", Room/binary>>.

room_of(<<"room:", Room/binary>>) ->
    case valid_room(Room) of
        true -> {ok, Room};
        false -> error
    end;
room_of(_) -> error.

valid_room(R) when byte_size(R) >= 1, byte_size(R) =< ?MAX_ROOM ->
    lists:all(fun(C) -> (C >= $a andalso C =< $z) orelse (C >= $A andalso C =< $Z)
                            orelse (C >= $0 andalso C =< $9)
                            orelse C =:= $_ orelse C =:= $. orelse C =:= $-
              end, binary_to_list(R));
valid_room(_) -> false.

notice(What, Room, Uid) -> [What, Room, $\s, integer_to_binary(Uid)].

%% Conn of Uid is in Room; past ?MEMBERSHIPS_PER_UID rows of the uid, its
%% oldest connection's go.
member(Uid, Conn, Room) ->
    ets:insert(?MEMBERS, {{Uid, Conn, Room}}),
    case ets:select_count(?MEMBERS, [{{{Uid, '_', '_'}}, [], [true]}]) > ?MEMBERSHIPS_PER_UID of
        true ->
            {Uid, Oldest, _} = ets:next(?MEMBERS, {Uid, -1, <<>>}),
            ets:select_delete(?MEMBERS, [{{{Uid, Oldest, '_'}}, [], [true]}]);
        false -> ok
    end,
    ok.

%% The rooms Uid is in, on any of its connections.
rooms(Uid) ->
    lists:usort(ets:select(?MEMBERS, [{{{Uid, '_', '$1'}}, [], ['$1']}])).

bump(K, State = #{counts := C}) -> State#{counts := C#{K := maps:get(K, C) + 1}}.

%% A join token of Uid's bucket (join_burst, join_rate a second).
take_join(Uid, State = #{opts := #{join_burst := Burst, join_rate := Rate}, buckets := B0}) ->
    Now = erlang:monotonic_time(millisecond),
    B = case map_size(B0) >= ?MAX_BUCKETS of
            true -> #{};
            false -> B0
        end,
    {Tokens, At} = maps:get(Uid, B, {Burst, Now}),
    Have = min(Burst, Tokens + (Now - At) * Rate / 1000),
    case Have >= 1 of
        true -> {true, State#{buckets := B#{Uid => {Have - 1, Now}}}};
        false -> {false, State#{buckets := B#{Uid => {Have, Now}}}}
    end.

%% Whether Room may fan out once more this second (room_rate).
room_admit(Room, #{room_rate := Rate}) ->
    Sec = erlang:monotonic_time(second),
    case ets:lookup(?RATES, Room) of
        [{_, Sec, N}] when N >= Rate -> false;
        [{_, Sec, _}] -> ets:update_counter(?RATES, Room, {3, 1}), true;
        _ ->
            ets:info(?RATES, size) >= ?RATES_SWEEP andalso
                ets:select_delete(?RATES, [{{'_', '$1', '_'}, [{'<', '$1', Sec}], [true]}]),
            ets:insert(?RATES, {Room, Sec, 1}),
            true
    end.

%% A table shared by the workers, made by the first that needs it (the one
%% of a pool started before goes with that pool).
table(Name, Type) ->
    case ets:whereis(Name) of
        undefined ->
            try ets:new(Name, [Type, public, named_table, {write_concurrency, true}])
            catch error:badarg -> Name                     % another worker made it
            end;
        T -> T
    end.

%% Uid's memberships and its join bucket go.
free(Uid, State = #{buckets := B, counts := C}) ->
    N = ets:select_delete(?MEMBERS, [{{{Uid, '_', '_'}}, [], [true]}]),
    State#{buckets := maps:remove(Uid, B), counts := C#{freed := maps:get(freed, C) + N}}.
