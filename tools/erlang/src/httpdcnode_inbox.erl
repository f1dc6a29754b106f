%% SPDX-License-Identifier: Apache-2.0
%% The inbox process: registered under the name the C-nodes were started
%% with (--inbox NAME), it takes {httpdcnode_in, CNode, Uid, Id, Data} and
%% calls the handler module's handle_in(Uid, {CNode, Id}, Data, State)
%% (httpdcnode_handler). With --presence-conns a C-node also sends it
%% {httpdcnode, CNode, conn_down, Uid, Id, Reason} when a WebSocket of one
%% of its uids ends (after that connection's last message): the handler's
%% optional handle_conn_down(Uid, {CNode, Id}, Reason, State) is called, so
%% it can drop what it kept for that connection. The presence server sends
%% it {httpdcnode, offline, [Uid]} when uids lost their last stream
%% everywhere: the optional handle_offline(Uid, State) is called for each.
%%
%% Topic joins (C-nodes with --topic-auth handler): a join of a topic its
%% token does not allow comes as {httpdcnode_join, CNode, Uid, Id, Topic,
%% Since}, in order with that connection's messages: the handler's
%% optional authorize_join(Uid, Topic, Meta, State) decides (without it,
%% every such join is refused), and the answer goes back to the C-node
%% ({subscribe, Id, Topic, Since} or {refuse_join, Id, Topic, Reason}; the
%% client is told either way). A client's leave of a topic comes as
%% {httpdcnode_leave, CNode, Uid, Id, Topic}: the optional
%% handle_leave(Uid, Conn, Topic, State). Both are acknowledged as
%% messages are (they count in the C-node's window).
%%
%% Before a client message of a stream is handled, the presence server is
%% made to route its uid to its C-node (httpdcnode_presence:ensure_online/2):
%% a reply sent by the handler right away reaches the client even when the
%% C-node's `up' for it is not handled yet.
%%
%% A pool: with the option workers => N (N > 1) the registered process
%% starts N worker processes, each with a handler state of its own
%% (Module:init(Args) in each), and passes each message on to one of them
%% chosen by its uid: a uid's messages, and its conn_down and offline
%% after them, are handled by one worker in the order they came, while
%% other uids go on in the others. Anything else sent to the name goes to
%% every worker (workers/1 lists them, to ask each). The workers are linked
%% to it: one that dies takes the whole inbox with it, and its supervisor
%% starts it again. Without the option (workers => 1) the registered
%% process runs the handler itself.
%%
%% Flow control: a C-node sends each master at most 256 client messages
%% that the inbox has not acknowledged; past that it stops reading its
%% WebSocket clients (TCP pushes back on them). The process that handles
%% a message acknowledges it ({httpdcnode_in_ack, N} to the C-node) every
%% ?ACK_EVERY messages of a C-node and whenever its mailbox is empty, so a
%% slow handler slows its clients instead of growing a mailbox without
%% bound. A C-node counts
%% what it sent to the name and was not acknowledged: what an inbox that
%% died took with it would hold that window full for ever, so each inbox
%% announces itself at start ({httpdcnode_in_reset, Name}, announce/1)
%% and the C-nodes start its window afresh.
-module(httpdcnode_inbox).

-export([start_link/3, start_link/4, start/3, start/4, child_spec/3, child_spec/4,
         workers/1, workers/2]).
-export([init/5, worker_init/3]).

-define(ACK_EVERY, 32).
-define(MAX_WORKERS, 1024).

-type opts() :: #{workers => pos_integer()}.
-export_type([opts/0]).

-spec start_link(atom(), module(), term()) -> {ok, pid()} | {error, term()}.
start_link(Name, Module, Args) ->
    start_link(Name, Module, Args, #{}).

-spec start_link(atom(), module(), term(), opts()) -> {ok, pid()} | {error, term()}.
start_link(Name, Module, Args, Opts) ->
    proc_lib:start_link(?MODULE, init, [self(), Name, Module, Args, Opts]).

%% The same, not linked (an inbox started from a shell or by rpc).
-spec start(atom(), module(), term()) -> {ok, pid()} | {error, term()}.
start(Name, Module, Args) ->
    start(Name, Module, Args, #{}).

-spec start(atom(), module(), term(), opts()) -> {ok, pid()} | {error, term()}.
start(Name, Module, Args, Opts) ->
    proc_lib:start(?MODULE, init, [self(), Name, Module, Args, Opts]).

%% For a supervisor of your own; httpdcnode_sup starts one from the
%% application env inbox => {Name, Module, Args} or {Name, Module, Args, Opts}.
child_spec(Name, Module, Args) ->
    child_spec(Name, Module, Args, #{}).

child_spec(Name, Module, Args, Opts) ->
    #{id => {?MODULE, Name},
      start => {?MODULE, start_link, [Name, Module, Args, Opts]},
      restart => permanent, shutdown => 5000, type => worker,
      modules => [?MODULE, Module]}.

%% The processes that run the handler of the inbox Inbox (a name, {Name,
%% Node} or a pid): the workers, or the inbox itself without a pool.
-spec workers(atom() | {atom(), node()} | pid()) -> {ok, [pid()]} | {error, term()}.
workers(Inbox) ->
    workers(Inbox, 5000).

workers(Inbox, Timeout) ->
    try erlang:monitor(process, Inbox) of
        MRef ->
            Inbox ! {self(), MRef, httpdcnode_inbox_workers},
            receive
                {MRef, Pids} -> erlang:demonitor(MRef, [flush]), {ok, Pids};
                {'DOWN', MRef, _, _, Reason} -> {error, Reason}
            after Timeout -> erlang:demonitor(MRef, [flush]), {error, timeout}
            end
    catch error:badarg -> {error, noproc}
    end.

init(Parent, Name, Module, Args, Opts) ->
    case workers_opt(Opts) of
        {ok, N} ->
            try register(Name, self()) of
                true ->
                    Run = start_handlers(N, Module, Args),
                    proc_lib:init_ack(Parent, {ok, self()}),
                    announce(Name),
                    Run()
            catch error:badarg ->
                    proc_lib:init_ack(Parent, {error, {already_registered, Name}})
            end;
        error ->
            proc_lib:init_ack(Parent, {error, {bad_options, Opts,
                                               "workers => 1 to 1024 handler processes"}})
    end.

workers_opt(Opts) when is_map(Opts) ->
    case maps:get(workers, Opts, 1) of
        N when is_integer(N), N >= 1, N =< ?MAX_WORKERS -> {ok, N};
        _ -> error
    end;
workers_opt(_) ->
    error.

%% What this process runs once started: the handler itself, or the pool's
%% dispatch (its workers started, each with its handler state, in order).
start_handlers(1, Module, Args) ->
    {ok, State} = Module:init(Args),
    fun() -> loop(Module, State, #{}) end;
start_handlers(N, Module, Args) ->
    Workers = list_to_tuple([begin
                                 {ok, W} = proc_lib:start_link(?MODULE, worker_init,
                                                               [self(), Module, Args]),
                                 W
                             end || _ <- lists:seq(1, N)]),
    fun() -> dispatch(Module, Workers) end.

worker_init(Parent, Module, Args) ->
    {ok, State} = Module:init(Args),
    proc_lib:init_ack(Parent, {ok, self()}),
    loop(Module, State, #{}).

%%% ---------------------------------------------------------------- the pool

%% Each uid's messages to its worker, in the order they came.
dispatch(Module, Workers) ->
    receive
        {httpdcnode_in, _CNode, Uid, _Id, _Data} = M ->
            worker_of(Uid, Workers) ! M;
        {httpdcnode, _CNode, conn_down, Uid, _Id, _Reason} = M ->
            worker_of(Uid, Workers) ! M;
        {httpdcnode_join, _CNode, Uid, _Id, _Topic, _Since} = M ->
            worker_of(Uid, Workers) ! M;
        {httpdcnode_leave, _CNode, Uid, _Id, _Topic} = M ->
            worker_of(Uid, Workers) ! M;
        {httpdcnode, offline, Uids} when is_list(Uids) ->
            erlang:function_exported(Module, handle_offline, 2)
                andalso offline_to_workers(Uids, Workers);
        {Pid, Ref, httpdcnode_inbox_workers} when is_pid(Pid) ->
            Pid ! {Ref, tuple_to_list(Workers)};
        Other ->
            [W ! Other || W <- tuple_to_list(Workers)]
    end,
    dispatch(Module, Workers).

worker_of(Uid, Workers) ->
    element(erlang:phash2(Uid, tuple_size(Workers)) + 1, Workers).

%% One message per worker with its uids.
offline_to_workers(Uids, Workers) ->
    ByWorker = lists:foldl(fun(U, Acc) ->
                                   W = worker_of(U, Workers),
                                   Acc#{W => [U | maps:get(W, Acc, [])]}
                           end, #{}, Uids),
    maps:foreach(fun(W, Us) -> W ! {httpdcnode, offline, lists:reverse(Us)} end, ByWorker),
    true.

%%% ---------------------------------------------------------------- a handler

%% Unacked: CNode => messages handled and not yet acknowledged.
loop(Module, State, Unacked) ->
    receive
        {httpdcnode_in, CNode, Uid, Id, Data} ->
            Id =/= 0 andalso httpdcnode_presence:ensure_online(CNode, Uid),
            State1 = handle(Module, handle_in, [Uid, {CNode, Id}, Data], State),
            N = maps:get(CNode, Unacked, 0) + 1,
            loop(Module, State1, ack(CNode, N, Unacked));
        {httpdcnode_join, CNode, Uid, Id, Topic, Since} ->
            Id =/= 0 andalso httpdcnode_presence:ensure_online(CNode, Uid),
            State1 = join(Module, CNode, Uid, Id, Topic, Since, State),
            N = maps:get(CNode, Unacked, 0) + 1,
            loop(Module, State1, ack(CNode, N, Unacked));
        {httpdcnode_leave, CNode, Uid, Id, Topic} ->
            State1 = case erlang:function_exported(Module, handle_leave, 4) of
                         true -> handle(Module, handle_leave, [Uid, {CNode, Id}, Topic], State);
                         false -> State
                     end,
            N = maps:get(CNode, Unacked, 0) + 1,
            loop(Module, State1, ack(CNode, N, Unacked));
        {httpdcnode, CNode, conn_down, Uid, Id, Reason} = Other ->
            State1 = case erlang:function_exported(Module, handle_conn_down, 4) of
                         true -> handle(Module, handle_conn_down, [Uid, {CNode, Id}, Reason], State);
                         false -> other(Module, Other, State)
                     end,
            loop(Module, State1, Unacked);
        {httpdcnode, offline, Uids} when is_list(Uids) ->
            State1 = case erlang:function_exported(Module, handle_offline, 2) of
                         true -> lists:foldl(fun(U, S) -> handle(Module, handle_offline, [U], S) end,
                                             State, Uids);
                         false -> State
                     end,
            loop(Module, State1, Unacked);
        {Pid, Ref, httpdcnode_inbox_workers} when is_pid(Pid) ->
            Pid ! {Ref, [self()]},
            loop(Module, State, Unacked);
        Other ->
            loop(Module, other(Module, Other, State), Unacked)
    end.

%% The handler's word on a join, sent back to the C-node.
join(Module, CNode, Uid, Id, Topic, Since, State) ->
    Meta = #{conn => {CNode, Id}, since => case Since of <<>> -> undefined; _ -> Since end},
    {Verdict, State1} =
        case erlang:function_exported(Module, authorize_join, 4) of
            false -> {{deny, no_authorize_join}, State};
            true ->
                try Module:authorize_join(Uid, Topic, Meta, State) of
                    {allow, S} -> {allow, S};
                    {{deny, Why}, S} -> {{deny, Why}, S};
                    Bad ->
                        logger:error("httpdcnode_inbox: ~p:authorize_join returned ~p",
                                     [Module, Bad]),
                        {{deny, handler_error}, State}
                catch C:E:St ->
                        logger:error("httpdcnode_inbox: ~p:authorize_join crashed: ~p:~p ~p",
                                     [Module, C, E, St]),
                        {{deny, handler_error}, State}
                end
        end,
    case Verdict of
        allow -> {any, CNode} ! {subscribe, Id, Topic, Since};
        {deny, Why1} -> {any, CNode} ! {refuse_join, Id, Topic, reason(Why1)}
    end,
    State1.

%% A refusal's reason as the client is told it: 1 to 64 of A-Z a-z 0-9
%% _ - . : / and spaces, else "denied".
reason(A) when is_atom(A) -> reason(atom_to_binary(A, utf8));
reason(B) when is_binary(B), byte_size(B) >= 1, byte_size(B) =< 64 ->
    case lists:all(fun(C) -> C =:= $\s orelse httpdcnode_topics:valid(<<C>>) end,
                   binary_to_list(B)) of
        true -> B;
        false -> <<"denied">>
    end;
reason(_) -> <<"denied">>.

%% To every C-node linked to this node: this process is Name's inbox now.
announce(Name) ->
    httpdcnode_presence:each_cnode(
      fun(N) -> erlang:send({any, N}, {httpdcnode_in_reset, Name}, [noconnect]) end).

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
