%% The inbox process: registered under the name the C-nodes were started
%% with (--inbox NAME), it takes {httpdcnode_in, CNode, Uid, Id, Data} and
%% calls the handler module's handle_in(Uid, {CNode, Id}, Data, State)
%% (httpdcnode_handler). With --presence-conns a C-node also sends it
%% {httpdcnode, CNode, conn_down, Uid, Id, Reason} when a WebSocket of one
%% of its uids ends (after that connection's last message): the handler's
%% optional handle_conn_down(Uid, {CNode, Id}, Reason, State) is called, so
%% it can drop what it kept for that connection.
%%
%% Before a client message of a stream is handled, the presence server is
%% made to route its uid to its C-node (httpdcnode_presence:ensure_online/2):
%% a reply sent by the handler right away reaches the client even when the
%% C-node's `up' for it is not handled yet.
%%
%% Flow control: a C-node sends each master at most 256 client messages
%% that the inbox has not acknowledged; past that it stops reading its
%% WebSocket clients (TCP pushes back on them). The inbox acknowledges
%% ({httpdcnode_in_ack, N} to the C-node) every ?ACK_EVERY messages of a
%% C-node and whenever its mailbox is empty, so a slow handler slows its
%% clients instead of growing this mailbox without bound.
-module(httpdcnode_inbox).

-export([start_link/3, start/3, child_spec/3]).
-export([init/4]).

-define(ACK_EVERY, 32).

-spec start_link(atom(), module(), term()) -> {ok, pid()} | {error, term()}.
start_link(Name, Module, Args) ->
    proc_lib:start_link(?MODULE, init, [self(), Name, Module, Args]).

%% The same, not linked (an inbox started from a shell or by rpc).
-spec start(atom(), module(), term()) -> {ok, pid()} | {error, term()}.
start(Name, Module, Args) ->
    proc_lib:start(?MODULE, init, [self(), Name, Module, Args]).

%% For a supervisor of your own; httpdcnode_sup starts one from the
%% application env inbox => {Name, Module, Args}.
child_spec(Name, Module, Args) ->
    #{id => {?MODULE, Name},
      start => {?MODULE, start_link, [Name, Module, Args]},
      restart => permanent, shutdown => 5000, type => worker,
      modules => [?MODULE, Module]}.

init(Parent, Name, Module, Args) ->
    try register(Name, self()) of
        true ->
            {ok, State} = Module:init(Args),
            proc_lib:init_ack(Parent, {ok, self()}),
            loop(Module, State, #{})
    catch error:badarg ->
            proc_lib:init_ack(Parent, {error, {already_registered, Name}})
    end.

%% Unacked: CNode => messages handled and not yet acknowledged.
loop(Module, State, Unacked) ->
    receive
        {httpdcnode_in, CNode, Uid, Id, Data} ->
            Id =/= 0 andalso httpdcnode_presence:ensure_online(CNode, Uid),
            State1 = handle(Module, handle_in, [Uid, {CNode, Id}, Data], State),
            N = maps:get(CNode, Unacked, 0) + 1,
            loop(Module, State1, ack(CNode, N, Unacked));
        {httpdcnode, CNode, conn_down, Uid, Id, Reason} = Other ->
            State1 = case erlang:function_exported(Module, handle_conn_down, 4) of
                         true -> handle(Module, handle_conn_down, [Uid, {CNode, Id}, Reason], State);
                         false -> other(Module, Other, State)
                     end,
            loop(Module, State1, Unacked);
        Other ->
            loop(Module, other(Module, Other, State), Unacked)
    end.

other(Module, Msg, State) ->
    case erlang:function_exported(Module, handle_info, 2) of
        true -> handle(Module, handle_info, [Msg], State);
        false -> State
    end.

handle(Module, Fun, Args, State) ->
    try apply(Module, Fun, Args ++ [State]) of
        {ok, State1} -> State1;
        Bad ->
            logger:error("httpdcnode_inbox: ~p:~p returned ~p", [Module, Fun, Bad]),
            State
    catch C:E:St ->
            logger:error("httpdcnode_inbox: ~p:~p crashed: ~p:~p ~p", [Module, Fun, C, E, St]),
            State
    end.

%% Every ?ACK_EVERY, or when nothing more waits: then every C-node's count.
ack(CNode, N, Unacked) when N >= ?ACK_EVERY ->
    {any, CNode} ! {httpdcnode_in_ack, N},
    idle_ack(maps:remove(CNode, Unacked));
ack(CNode, N, Unacked) ->
    idle_ack(Unacked#{CNode => N}).

idle_ack(Unacked) ->
    case process_info(self(), message_queue_len) of
        {message_queue_len, 0} ->
            maps:foreach(fun(C, K) -> {any, C} ! {httpdcnode_in_ack, K} end, Unacked),
            #{};
        _ -> Unacked
    end.
