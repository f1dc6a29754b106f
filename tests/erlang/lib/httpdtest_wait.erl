%% SPDX-License-Identifier: Apache-2.0
%% Bounded waits for the black-box tests: a condition polled up to a deadline
%% (never a fixed sleep), and terms shortened for the reports of what failed.
-module(httpdtest_wait).

-export([wait_until/3, summarize/1]).

-import(httpdtest_os, [now_ms/0, scaled/1]).

-define(POLL_MS, 25).

%% Polls Fun every 25 ms until it returns true or {true, V} (returns V or
%% true); fails after Timeout ms with the last {false, Info} or value.
wait_until(Fun, Timeout, What) -> wait_until_loop(Fun, now_ms() + scaled(Timeout), What).

wait_until_loop(Fun, Deadline, What) ->
    case Fun() of
        true -> true;
        {true, V} -> V;
        Other ->
            Info = case Other of {false, I} -> I; _ -> Other end,
            case now_ms() >= Deadline of
                true -> erlang:error({timeout_waiting_for, What, {last, Info}});
                false -> timer:sleep(?POLL_MS), wait_until_loop(Fun, Deadline, What)
            end
    end.

%% Shortens large binaries inside a term for error reports.
summarize(B) when is_binary(B), byte_size(B) > 120 ->
    {binary, byte_size(B), binary:part(B, 0, 60), '...', binary:part(B, byte_size(B) - 20, 20)};
summarize(T) when is_tuple(T) -> list_to_tuple([summarize(E) || E <- tuple_to_list(T)]);
summarize(L) when is_list(L) ->
    try length(L) of
        N when N > 30 -> {list, N, [summarize(E) || E <- lists:sublist(L, 10)], '...'};
        _ -> [summarize(E) || E <- L]
    catch error:badarg -> L   % an improper list
    end;
summarize(M) when is_map(M) -> maps:map(fun(_, V) -> summarize(V) end, M);
summarize(X) -> X.
