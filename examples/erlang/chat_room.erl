%% An example handler of client messages (httpdcnode_handler): chat rooms,
%% as the demo page (web/index.html) uses them. Shipped beside the
%% application, not in its .app: `make` builds it into tools/erlang/ebin and
%% `make run` starts the application with it as the inbox
%% (env inbox => {httpdcnode_inbox, chat_room, [], #{workers => 4}}, the
%% C-node with --inbox httpdcnode_inbox).
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
%% Members are subscriptions in httpdcnode_subs: {subscription, Uid,
%% {chat_room, Room}}, so every master has them (mnesia copies) and
%% whichever master's inbox gets a uid's message can fan it out. The
%% fan-out is httpdcnode:multicast/2 of the room's subscribers: httpdcnode_router:send/2
%% would also address the room itself, which is no uid.
%%
%% Bounds, so that one client (the example runs without tokens: any uid,
%% any number of connections) cannot stall the chat of the others nor push
%% their history out with fan-outs. Each is answered with chat-error and
%% counted; Args (a map) may change them:
%%   max_members (1000)   members of a room: a join past it is refused
%%   max_rooms (16)       rooms of a uid
%%   join_burst (20), join_rate (2)   joins of a uid: 20 at once, then 2 a
%%                        second (a join of a room it is in takes none)
%%   room_rate (20)       joins and lines a room fans out per second (every
%%                        member gets each: its cost and its members'
%%                        history grow with the room)
%%   offline_grace_ms (10000)   a uid offline for that long (no stream on
%%                        any C-node: the presence server's offline notice,
%%                        then httpdcnode:online/1 once more) leaves its
%%                        rooms, silently; a member offline for a moment
%%                        keeps them and gets their lines on resume, a page
%%                        that comes back later joins again
%% Leaves are never refused. The inbox should be a pool (httpdcnode_inbox,
%% workers => N, as `make run` starts it): a uid's commands are handled in
%% order by one worker while the others go on; the join rate of a uid is
%% its worker's, the room rate is shared by all (an ETS table).
%%
%% State: counters, the join buckets of the uids this worker saw lately
%% (freed with their memberships; all dropped past ?MAX_BUCKETS uids).
%% stats/1 sums the counters of every worker. Bad input is answered and
%% counted, never a crash.
-module(chat_room).
-behaviour(httpdcnode_handler).

-export([init/1, handle_in/4, handle_offline/2, handle_info/2, stats/1, stats/2]).

%% The C-node already bounds a client message (--max-client-message, 4096
%% bytes); a line of chat is shorter.
-define(MAX_TEXT, 1000).
-define(MAX_ROOM, 32).
-define(DEFAULTS, #{max_members => 1000, max_rooms => 16, join_burst => 20, join_rate => 2,
                    room_rate => 20, offline_grace_ms => 10000}).
-define(COUNTERS, [joined, left, said, bad, room_full, too_fast, room_busy, freed]).
%% Join buckets kept per worker before they are all dropped.
-define(MAX_BUCKETS, 100000).
%% The rooms' fan-outs this second, shared by the workers: {Room, Second, N}.
-define(RATES, chat_room_rates).
%% Rate entries past which those of past seconds are swept.
-define(RATES_SWEEP, 10000).

init(Args) ->
    Opts = maps:merge(?DEFAULTS, case Args of M when is_map(M) -> M; _ -> #{} end),
    %% a bound that is not one stops the inbox at its start, saying which
    case [{K, V} || {K, V} <- maps:to_list(Opts), not valid_opt(K, V)] of
        [] -> ok;
        Bad -> erlang:error({chat_room, bad_args, Bad, "keys of the defaults, integers >= 1"})
    end,
    rates_table(),
    {ok, #{opts => Opts, counts => maps:from_list([{K, 0} || K <- ?COUNTERS]),
           buckets => #{}}}.

valid_opt(offline_grace_ms, V) -> is_integer(V) andalso V >= 0;
valid_opt(K, V) -> is_map_key(K, ?DEFAULTS) andalso is_integer(V) andalso V >= 1.

%% A binary message ({binary, Data}: a binary frame, a POST of
%% application/octet-stream) is read as the same command would be: its
%% text is checked where it matters (say).
handle_in(Uid, Conn, {binary, Data}, State) ->
    handle_in(Uid, Conn, Data, State);
handle_in(Uid, Conn, Data, State) ->
    {Result, State1} = command(Uid, Data, State),
    case Result of
        {ok, Key, Reply} ->
            reply(Conn, Reply),
            {ok, bump(Key, State1)};
        {ok, Reply} ->
            reply(Conn, Reply),
            {ok, State1};
        {error, Key, Why} ->
            reply(Conn, [<<"chat-error ">>, Why]),
            {ok, bump(Key, State1)}
    end.

%% Uid has no stream left anywhere: its rooms go unless it is back within
%% the grace time.
handle_offline(Uid, State = #{opts := #{offline_grace_ms := Grace}}) ->
    erlang:send_after(Grace, self(), {chat_room_offline, Uid}),
    {ok, State}.

%% {Pid, Ref, chat_stats}: this worker's counters, for stats/1 (tests, a
%% shell).
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

%%% ---------------------------------------------------------------- commands

command(Uid, <<"join ", Room/binary>>, State) ->
    with_room(Room, State, fun() -> join(Uid, Room, State) end);
command(Uid, <<"leave ", Room/binary>>, State) ->
    with_room(Room, State, fun() -> {leave(Uid, Room), State} end);
command(Uid, <<"say ", Rest/binary>>, State) ->
    case binary:split(Rest, <<" ">>) of
        [Room, Text] -> with_room(Room, State, fun() -> {say(Uid, Room, Text, State), State} end);
        _ -> {bad(<<"say needs a room and a text: say ROOM TEXT">>), State}
    end;
command(_, _, State) ->
    {bad(<<"unknown command: join ROOM, leave ROOM or say ROOM TEXT">>), State}.

bad(Why) -> {error, bad, Why}.

with_room(Room, State, Fun) ->
    case valid_room(Room) of
        true -> Fun();
        false -> {bad(<<"bad room name: 1 to 32 of A-Z a-z 0-9 _ . -">>), State}
    end.

valid_room(R) when byte_size(R) >= 1, byte_size(R) =< ?MAX_ROOM ->
    lists:all(fun(C) -> (C >= $a andalso C =< $z) orelse (C >= $A andalso C =< $Z)
                            orelse (C >= $0 andalso C =< $9)
                            orelse C =:= $_ orelse C =:= $. orelse C =:= $-
              end, binary_to_list(R));
valid_room(_) -> false.

%% The cheap refusals first; the room's size last (an index read).
join(Uid, Room, State = #{opts := Opts}) ->
    #{max_rooms := MaxRooms, max_members := Max} = Opts,
    Rooms = rooms(Uid),
    Notice = notice(<<"chat-joined ">>, Room, Uid),
    case lists:member(Room, Rooms) of
        true -> {{ok, Notice}, State};
        false when length(Rooms) >= MaxRooms ->
            {bad([<<"in too many rooms (">>, integer_to_binary(MaxRooms),
                  <<"): leave one first">>]), State};
        false ->
            case take_join(Uid, State) of
                {false, State1} ->
                    {{error, too_fast, <<"too many joins: wait a moment">>}, State1};
                {true, State1} ->
                    Result = case room_admit(Room, Opts) of
                                 false -> busy(Room);
                                 true -> add_member(Uid, Room, Max, Notice)
                             end,
                    {Result, State1}
            end
    end.

%% Uid in Room unless that makes more than Max: a join racing another
%% worker's past the bound is taken back.
add_member(Uid, Room, Max, Notice) ->
    Full = {error, room_full, [<<"room ">>, Room, <<" is full (">>, integer_to_binary(Max),
                               <<" members)">>]},
    case length(httpdcnode_subs:get_subscribers(key(Room))) >= Max of
        true -> Full;
        false ->
            Sub = {subscription, Uid, key(Room)},
            ok = httpdcnode_subs:add_subscriptions([Sub]),
            case length(httpdcnode_subs:get_subscribers(key(Room))) > Max of
                true ->
                    httpdcnode_subs:remove_subscriptions([Sub]),
                    Full;
                false ->
                    to_room(Room, Notice),
                    {ok, joined, none}
            end
    end.

busy(Room) ->
    {error, room_busy, [<<"room ">>, Room, <<" is busy: try again in a moment">>]}.

%% The members are told before the leaver is removed: it is told too.
leave(Uid, Room) ->
    case lists:member(Room, rooms(Uid)) of
        false -> bad([<<"not in room ">>, Room]);
        true ->
            to_room(Room, notice(<<"chat-left ">>, Room, Uid)),
            case httpdcnode_subs:remove_subscriptions([{subscription, Uid, key(Room)}]) of
                ok -> {ok, left, none};
                {error, _} -> bad(<<"could not leave the room, try again">>)
            end
    end.

say(Uid, Room, Text, #{opts := Opts}) ->
    Valid = byte_size(Text) >= 1 andalso byte_size(Text) =< ?MAX_TEXT,
    case Valid andalso is_binary(unicode:characters_to_binary(Text)) of
        false when byte_size(Text) > ?MAX_TEXT -> bad(<<"text too long (1000 bytes at most)">>);
        false when Text =:= <<>> -> bad(<<"empty text">>);
        false -> bad(<<"text not UTF-8">>);
        true ->
            case lists:member(Room, rooms(Uid)) of
                false -> bad([<<"not in room ">>, Room, <<": join it first">>]);
                true ->
                    case room_admit(Room, Opts) of
                        false -> busy(Room);
                        true ->
                            %% The sender's own copy is its confirmation.
                            to_room(Room, [notice(<<"chat ">>, Room, Uid), $\s, Text]),
                            {ok, said, none}
                    end
            end
    end.

%% One message to every member, online or offline for a moment.
to_room(Room, Msg) ->
    ok = httpdcnode:multicast(httpdcnode_subs:get_subscribers(key(Room)), Msg).

notice(What, Room, Uid) -> [What, Room, $\s, integer_to_binary(Uid)].

%% The rooms Uid is in.
rooms(Uid) ->
    [R || {chat_room, R} <- httpdcnode_subs:get_subscriptions(Uid)].

key(Room) -> {chat_room, Room}.

reply(_, none) -> ok;
reply(Conn, Msg) -> httpdcnode:reply(Conn, Msg).

bump(K, State = #{counts := C}) -> State#{counts := C#{K := maps:get(K, C) + 1}}.

%%% ---------------------------------------------------------------- bounds

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
    T = rates_table(),
    case ets:lookup(T, Room) of
        [{_, Sec, N}] when N >= Rate -> false;
        [{_, Sec, _}] -> ets:update_counter(T, Room, {3, 1}), true;
        _ ->
            ets:info(T, size) >= ?RATES_SWEEP andalso
                ets:select_delete(T, [{{'_', '$1', '_'}, [{'<', '$1', Sec}], [true]}]),
            ets:insert(T, {Room, Sec, 1}),
            true
    end.

%% The table of room rates, made by the first worker that needs it (the
%% one of a pool started before goes with that pool).
rates_table() ->
    case ets:whereis(?RATES) of
        undefined ->
            try ets:new(?RATES, [set, public, named_table, {write_concurrency, true}])
            catch error:badarg -> ?RATES                     % another worker made it
            end;
        T -> T
    end.

%% Uid's memberships and its join bucket go.
free(Uid, State = #{buckets := B}) ->
    Subs = [{subscription, Uid, key(R)} || R <- rooms(Uid)],
    State1 = State#{buckets := maps:remove(Uid, B)},
    case Subs =/= [] andalso httpdcnode_subs:remove_subscriptions(Subs) of
        ok ->
            #{counts := C} = State1,
            State1#{counts := C#{freed := maps:get(freed, C) + length(Subs)}};
        _ -> State1
    end.
