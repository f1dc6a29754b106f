%% SPDX-License-Identifier: Apache-2.0
%% Loads a friends edge list ("A B" per line, as httpdcnode_friends_graph writes) into
%% httpdcnode_subs. Friendship is mutual: each edge adds both A-subscribes-to-B
%% and B-subscribes-to-A, so whatever either publishes reaches the other.
%% Rows go in batches (default 10000 rows per add_subscriptions/1 call).
%% Blank lines and lines starting with '#' are skipped.
-module(httpdcnode_friends_loader).

-export([load/1, load/2, parse_line/1]).

-define(BATCH, 10000).

%% Returns {ok, NumEdges} or {error, {Line, bad_line}} / {error, Posix}.
-spec load(file:filename()) -> {ok, non_neg_integer()} | {error, term()}.
load(File) ->
    load(File, #{}).

%% Options: batch => rows per add_subscriptions/1 call,
%%          mutual => false to add only A-subscribes-to-B,
%%          add => Fun(Rows) -> ok instead of httpdcnode_subs:add_subscriptions/1
%%                 (to load the rows into another store).
-spec load(file:filename(), map()) -> {ok, non_neg_integer()} | {error, term()}.
load(File, Opts) ->
    Batch = maps:get(batch, Opts, ?BATCH),
    Mutual = maps:get(mutual, Opts, true),
    Add = maps:get(add, Opts, fun httpdcnode_subs:add_subscriptions/1),
    case file:open(File, [read, raw, binary, {read_ahead, 1 bsl 20}]) of
        {ok, Fd} ->
            try
                read(Fd, 1, {Mutual, Batch, Add}, [], 0, 0)
            after
                file:close(Fd)
            end;
        Error ->
            Error
    end.

read(Fd, LineNo, How = {Mutual, Batch, Add}, Buf, BufLen, Edges) ->
    case file:read_line(Fd) of
        {ok, Line} ->
            case parse_line(Line) of
                skip ->
                    read(Fd, LineNo + 1, How, Buf, BufLen, Edges);
                {A, B} ->
                    Rows = rows(A, B, Mutual),
                    {Buf1, Len1} = flush(Batch, Add, Rows ++ Buf, BufLen + length(Rows)),
                    read(Fd, LineNo + 1, How, Buf1, Len1, Edges + 1);
                error ->
                    {error, {LineNo, bad_line}}
            end;
        eof ->
            ok = Add(Buf),
            {ok, Edges};
        {error, _} = Error ->
            Error
    end.

rows(A, B, true) -> [{subscription, A, B}, {subscription, B, A}];
rows(A, B, false) -> [{subscription, A, B}].

flush(Batch, Add, Buf, Len) when Len >= Batch ->
    ok = Add(Buf),
    {[], 0};
flush(_Batch, _Add, Buf, Len) ->
    {Buf, Len}.

%% "A B" -> {A, B} (positive integers, any blanks between), skip for blank or
%% comment lines, error otherwise.
-spec parse_line(binary()) -> {pos_integer(), pos_integer()} | skip | error.
parse_line(Line) ->
    case binary:split(Line, [<<" ">>, <<"\t">>, <<"\r">>, <<"\n">>], [global, trim_all]) of
        [] -> skip;
        [<<"#", _/binary>> | _] -> skip;
        [A, B] ->
            try {binary_to_integer(A), binary_to_integer(B)} of
                {X, Y} when X > 0, Y > 0 -> {X, Y};
                _ -> error
            catch error:badarg -> error
            end;
        _ -> error
    end.
