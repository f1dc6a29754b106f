%% SPDX-License-Identifier: Apache-2.0
%% The behaviour of a module that handles what clients send: the inbox
%% process (httpdcnode_inbox, registered as the C-nodes' --inbox name)
%% calls it for each message a WebSocket client sent, in the order that
%% connection sent them.
%%
%%   init(Args) -> {ok, State}
%%   handle_in(Uid, Conn, Data, State) -> {ok, State}
%%       Uid: the uid of the stream (/ws/Uid); Conn: {CNode, Id}, the one
%%       connection (httpdcnode:reply(Conn, Reply) answers it alone);
%%       Data: the message: a binary for a text message (valid UTF-8),
%%       {binary, Binary} for a binary one (a binary frame, a POST of
%%       application/octet-stream); reply(Conn, Data) sends it back as it came.
%%   handle_conn_down(Uid, Conn, Reason, State) -> {ok, State}   (optional)
%%       with --presence-conns: the WebSocket Conn of Uid ended (after its
%%       last handle_in), Reason an atom (client, kick, ws_dead, drain, ...);
%%       without this callback the message goes to handle_info
%%   handle_offline(Uid, State) -> {ok, State}   (optional)
%%       Uid lost its last stream on every C-node (as this master's presence
%%       sees it; it may come back at any time): the place to free what the
%%       handler keeps for a uid. Comes after that uid's messages handled
%%       so far; a message of it can still follow (one that waited on its
%%       C-node), so a handler that frees on it checks again later
%%       (httpdcnode:online/1). Sent by httpdcnode_presence to the inbox of
%%       application env inbox (or env offline_events)
%%   authorize_join(Uid, Topic, Meta, State) -> {allow | {deny, Reason}, State}
%%       (optional) with the C-nodes' --topic-auth handler: may the stream
%%       Meta's conn => Conn of Uid join Topic (a binary), a topic its
%%       subscriber token does not list? Meta also holds since => Id (the
%%       id the client resumes the topic from) or undefined. Reason (an
%%       atom or binary of topic name characters and spaces) is told to the
%%       client. Without this callback every such join is refused. The
%%       subscription is made after it returns: a publish made in it does
%%       not reach the joiner (the joiner is told `joined').
%%   handle_leave(Uid, Conn, Topic, State) -> {ok, State}   (optional) the
%%       same C-nodes: the client left Topic (it asked; a stream that ends
%%       leaves its topics silently)
%%   handle_info(Msg, State) -> {ok, State}     (optional) anything else
%%
%% With a pool (httpdcnode_inbox, workers => N) each worker has a state of
%% its own, and one uid's calls all go to one worker, in order.
%%
%% A crash in a callback is logged and the message counted as handled:
%% the inbox keeps its state and goes on.
-module(httpdcnode_handler).

-callback init(Args :: term()) -> {ok, State :: term()}.
-callback handle_in(Uid :: pos_integer(), Conn :: httpdcnode:conn(),
                    Data :: binary() | {binary, binary()},
                    State :: term()) -> {ok, NewState :: term()}.
-callback handle_info(Msg :: term(), State :: term()) -> {ok, NewState :: term()}.
-callback handle_conn_down(Uid :: pos_integer(), Conn :: httpdcnode:conn(), Reason :: atom(),
                           State :: term()) -> {ok, NewState :: term()}.
-callback handle_offline(Uid :: pos_integer(), State :: term()) -> {ok, NewState :: term()}.
-callback authorize_join(Uid :: pos_integer(), Topic :: binary(),
                         Meta :: #{conn := httpdcnode:conn(), since := binary() | undefined},
                         State :: term()) ->
    {allow | {deny, Reason :: atom() | binary()}, NewState :: term()}.
-callback handle_leave(Uid :: pos_integer(), Conn :: httpdcnode:conn(), Topic :: binary(),
                       State :: term()) -> {ok, NewState :: term()}.
-optional_callbacks([handle_info/2, handle_conn_down/4, handle_offline/2, authorize_join/4,
                     handle_leave/4]).
