%% SPDX-License-Identifier: Apache-2.0
%% Terms the server must refuse, each a test, on one server started with
%% --max-users 1000 --max-message 1024: after each, nothing reached the
%% streams, a good message still arrives, and the refusal counters
%% (bad_terms + bad_uid + too_big + empty) rose by exactly one.
-module(core_bad_terms_tests).
-include_lib("eunit/include/eunit.hrl").

-import(httpdtest_http, [open_stream/2, close/1, expect_chunk/2]).
-import(httpdtest_server, [send/2, stats/1]).
-import(httpdtest_wait, [summarize/1]).

-define(T, 5000).
-define(MAX_USERS, 1000).
-define(MAX_MESSAGE, 1024).

bad_terms() ->
    [{abc, <<"x">>},
     {0, <<"x">>},
     {-1, <<"x">>},
     {?MAX_USERS + 1, <<"x">>},
     {99999999999999999999, <<"x">>},
     {-99999999999999999999, <<"x">>},
     {1.5, <<"x">>},
     {5, <<>>},
     {5, []},
     {5, [<<>>, [[]], ""]},
     {5, 123},
     {5, abc},
     {5, <<"x">>, extra},
     {5},
     {},
     hello,
     [1, 2],
     <<"just a binary">>,
     {5, <<1:3>>},
     {5, [<<"a">>, <<1:3>>]},
     {5, [<<"a">>, 256]},
     {5, [<<"a">>, -1]},
     {5, {<<"x">>}},
     {[1, abc], <<"x">>},
     {[1, 0], <<"x">>},
     {[1 | 5], <<"x">>},
     {kick, abc},
     {kick, 0},
     {broadcast, <<>>},
     {broadcast, 123},
     {5, binary:copy(<<"a">>, ?MAX_MESSAGE + 1)},
     {5, [binary:copy(<<"a">>, 1000), binary:copy(<<"b">>, 25)]},
     {[1, 5], binary:copy(<<"a">>, ?MAX_MESSAGE + 1)},
     {broadcast, binary:copy(<<"a">>, ?MAX_MESSAGE + 1)}].

refusals(St) ->
    lists:sum([maps:get(K, St) || K <- [bad_terms, bad_uid, too_big, empty]]).

%% Waits until the refusal count reaches N (or the deadline); returns it.
wait_refusals(S, N) ->
    try
        httpdtest_wait:wait_until(fun() -> R = refusals(stats(S)), {R >= N, R} end,
                                  ?T, refusals)
    catch error:{timeout_waiting_for, refusals, {last, R}} -> R
    end.

bad_terms_test_() ->
    {setup,
     fun() -> httpdtest_server:start_server(#{max_users => ?MAX_USERS,
                                             max_message => ?MAX_MESSAGE}) end,
     fun httpdtest_server:stop_server/1,
     fun(S) ->
             [{lists:flatten(io_lib:format("refused: ~P", [summarize(B), 6])),
               {timeout, 20, fun() -> logged(S, fun() -> one_bad(S, B, I) end) end}}
              || {I, B} <- lists:zip(lists:seq(1, length(bad_terms())), bad_terms())]
                 ++ [{"message of exactly --max-message bytes is delivered",
                      {timeout, 20, fun() -> logged(S, fun() -> at_limit(S) end) end}},
                     {"all refused terms in a row, then good messages",
                      {timeout, 30, fun() -> logged(S, fun() -> all_bad(S) end) end}}]
     end}.

logged(S, F) -> httpdtest_server:logged(S, fun(_) -> F() end).

one_bad(S, Bad, I) ->
    C1 = open_stream(S, 1),
    C5 = open_stream(S, 5),
    N0 = refusals(stats(S)),
    send(S, Bad),
    Good = <<"good ", (integer_to_binary(I))/binary>>,
    send(S, {1, Good}),
    send(S, {5, Good}),
    ?assertEqual(Good, expect_chunk(C1, ?T)),
    ?assertEqual(Good, expect_chunk(C5, ?T)),
    ?assertEqual({refusals_added, 1}, {refusals_added, wait_refusals(S, N0 + 1) - N0}),
    close(C1),
    close(C5).

at_limit(S) ->
    C = open_stream(S, 5),
    B = binary:copy(<<"m">>, ?MAX_MESSAGE),
    send(S, {5, B}),
    send(S, {5, [binary:copy(<<"n">>, 1000), binary:copy(<<"o">>, ?MAX_MESSAGE - 1000)]}),
    ?assertEqual(B, expect_chunk(C, ?T)),
    ?assertEqual(iolist_to_binary([binary:copy(<<"n">>, 1000), binary:copy(<<"o">>, ?MAX_MESSAGE - 1000)]),
                 expect_chunk(C, ?T)),
    close(C).

all_bad(S) ->
    C1 = open_stream(S, 1),
    C5 = open_stream(S, 5),
    N0 = refusals(stats(S)),
    Bad = bad_terms(),
    [send(S, B) || B <- Bad],
    [send(S, {U, <<"after all">>}) || U <- [1, 5]],
    ?assertEqual(<<"after all">>, expect_chunk(C1, ?T)),
    ?assertEqual(<<"after all">>, expect_chunk(C5, ?T)),
    ?assertEqual({refusals_added, length(Bad)},
                 {refusals_added, wait_refusals(S, N0 + length(Bad)) - N0}),
    ?assert(lists:member(httpdtest_server:node_of(S), nodes(hidden))),
    close(C1),
    close(C5).
