%% SPDX-License-Identifier: Apache-2.0
%% The master's CPU per message to a topic's subscribers (make bench-topics):
%% httpdcnode:publish/2 to a topic against httpdcnode:multicast/2 to the
%% same uids, each K times, paced (GapMs between calls, so that the C-node
%% and its clients keep up and the master is measured, not a queue). Run
%% on a master running the application (erpc), the subscribers online.
%%
%% The CPU is the whole node's (erlang:statistics(runtime): every thread,
%% the presence server, the outq and the distribution's encoding included),
%% and the scheduler's busy time (scheduler_wall_time, microseconds), each
%% divided by K; the sleeps between calls cost neither, and what the node
%% does meanwhile anyway (presence windows, ticks) is measured alone, the
%% same K sleeps with no call (idle), and taken off.
-module(topic_cpu).

-export([measure/4]).

%% #{publish => #{cpu_us, busy_us}, multicast => ..., idle => ...}, per
%% call, publish and multicast with idle taken off.
-spec measure(binary(), [pos_integer()], pos_integer(), non_neg_integer()) -> map().
measure(Topic, Uids, K, GapMs) when K > 0 ->
    erlang:system_flag(scheduler_wall_time, true),
    Idle = run(fun() -> ok end, K, GapMs),
    Publish = run(fun() -> httpdcnode:publish(Topic, payload()) end, K, GapMs),
    Multicast = run(fun() -> httpdcnode:multicast(Uids, payload()) end, K, GapMs),
    #{publish => net(Publish, Idle), multicast => net(Multicast, Idle), idle => Idle,
      uids => length(Uids), calls => K}.

net(#{cpu_us := C, busy_us := B}, #{cpu_us := IC, busy_us := IB}) ->
    #{cpu_us => max(C - IC, 0), busy_us => max(B - IB, 0)}.

run(Call, K, GapMs) ->
    {Cpu0, _} = erlang:statistics(runtime),
    S0 = erlang:statistics(scheduler_wall_time_all),
    T0 = erlang:monotonic_time(microsecond),
    loop(Call, K, GapMs),
    {Cpu1, _} = erlang:statistics(runtime),
    S1 = erlang:statistics(scheduler_wall_time_all),
    Wall = erlang:monotonic_time(microsecond) - T0,
    #{cpu_us => (Cpu1 - Cpu0) * 1000 / K,
      busy_us => busy(S0, S1) * Wall / K}.

loop(_Call, 0, _GapMs) ->
    ok;
loop(Call, K, GapMs) ->
    ok = Call(),
    timer:sleep(GapMs),
    loop(Call, K - 1, GapMs).

%% Schedulers busy between two samples, as a number of schedulers (their
%% active share of the time, added up: the unit of the samples is not
%% given, their ratio is).
busy(S0, S1) ->
    lists:sum([case lists:keyfind(I, 1, S0) of
                   {I, A0, T0} when T1 > T0 -> (A1 - A0) / (T1 - T0);
                   _ -> 0
               end || {I, A1, T1} <- S1]).

payload() ->
    <<"t=", (integer_to_binary(os:system_time(nanosecond)))/binary, ";">>.
