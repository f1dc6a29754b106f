%% SPDX-License-Identifier: Apache-2.0
%% The merge rule of subsmanager for one pair, given its state on each copy
%% ({LiveClocks, TombstoneClock | none}): the latest add or removal wins, a
%% removal on a tie, a copy that knows nothing loses. Pure: no mnesia, no
%% distribution; run by `make test` and by `rebar3 eunit` in tools/erlang.
-module(subsmanager_merge_rule_tests).
-include_lib("eunit/include/eunit.hrl").

-define(M(Copies), subsmanager:merge_pair(Copies)).

latest_wins_test() ->
    %% removed on one side after the add the other still has
    ?assertEqual({removed, 20}, ?M([{[], 20}, {[10], none}])),
    %% added again later on the other side
    ?assertEqual({live, 30}, ?M([{[], 20}, {[30], none}])),
    %% added on both: the later add's clock
    ?assertEqual({live, 12}, ?M([{[11], none}, {[12], none}])).

removal_wins_a_tie_test() ->
    ?assertEqual({removed, 7}, ?M([{[7], none}, {[], 7}])).

unknown_loses_test() ->
    ?assertEqual({live, 5}, ?M([{[5], none}, {[], none}])),
    ?assertEqual({removed, 5}, ?M([{[], none}, {[], 5}])),
    ?assertEqual(absent, ?M([{[], none}, {[], none}])).

several_rows_and_copies_test() ->
    %% two rows of one pair (two masters added it at once), three copies
    ?assertEqual({live, 9}, ?M([{[3, 9], none}, {[3], 4}, {[], 8}])),
    %% clock 0: a row of a table from before the clocks
    ?assertEqual({removed, 1}, ?M([{[0], none}, {[], 1}])).
