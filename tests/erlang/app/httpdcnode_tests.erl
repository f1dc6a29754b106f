%% SPDX-License-Identifier: Apache-2.0
%% Pure functions of the API module: message encoding and grouping by node.
-module(httpdcnode_tests).
-include_lib("eunit/include/eunit.hrl").

to_binary_test_() ->
    [?_assertEqual(<<"abc">>, httpdcnode:to_binary(<<"abc">>)),
     ?_assertEqual(<<"abc">>, httpdcnode:to_binary("abc")),
     ?_assertEqual(<<"ab\ncd">>, httpdcnode:to_binary(["ab", $\n, [<<"c">>, "d"]])),
     %% bytes stay bytes
     ?_assertEqual(<<233>>, httpdcnode:to_binary([233])),
     %% characters above 255 make it a Unicode string, sent as UTF-8
     ?_assertEqual(<<"h", 195, 169, 226, 130, 172>>, httpdcnode:to_binary([$h, 233, 8364])),
     ?_assertError(badarg, httpdcnode:to_binary(<<>>)),
     ?_assertError(badarg, httpdcnode:to_binary("")),
     ?_assertError(badarg, httpdcnode:to_binary([<<>>, []])),
     ?_assertError(badarg, httpdcnode:to_binary(hello)),
     ?_assertError(badarg, httpdcnode:to_binary([-1]))].

%% {binary, Data} and {text, Data} say what the client gets; untagged, the
%% C-node judges by the bytes.
to_wire_test_() ->
    [?_assertEqual(<<"abc">>, httpdcnode:to_wire("abc")),
     ?_assertEqual({binary, <<"abc">>}, httpdcnode:to_wire({binary, <<"abc">>})),
     ?_assertEqual({binary, <<"abcd">>}, httpdcnode:to_wire({binary, ["ab", [$c | <<"d">>]]})),
     ?_assertEqual({binary, <<255>>}, httpdcnode:to_wire({binary, [255]})),
     ?_assertEqual({text, <<"caf", 195, 169>>}, httpdcnode:to_wire({text, "caf" ++ [233]})),
     ?_assertEqual({text, <<"caf", 195, 169>>}, httpdcnode:to_wire({text, <<"caf", 195, 169>>})),
     ?_assertEqual({text, <<226, 130, 172>>}, httpdcnode:to_wire({text, [<<>>, [8364]]})),
     %% text that is not UTF-8 (a Latin-1 byte, a surrogate), empty, or no text
     ?_assertError(badarg, httpdcnode:to_wire({text, <<"caf", 233>>})),
     ?_assertError(badarg, httpdcnode:to_wire({text, <<237, 160, 128>>})),
     ?_assertError(badarg, httpdcnode:to_wire({text, <<>>})),
     ?_assertError(badarg, httpdcnode:to_wire({text, hello})),
     ?_assertError(badarg, httpdcnode:to_wire({binary, <<>>})),
     ?_assertError(badarg, httpdcnode:to_wire({binary, hello})),
     ?_assertError(badarg, httpdcnode:to_wire({bytes, <<"x">>}))].

group_by_node_test_() ->
    Online = fun(1) -> [a]; (2) -> [b]; (3) -> [a, b]; (4) -> [a]; (_) -> [] end,
    [?_assertEqual([{a, [1, 3, 4]}, {b, [2, 3]}],
                   httpdcnode:group_by_node([4, 3, 2, 1, 9], Online)),
     ?_assertEqual([{a, [1]}], httpdcnode:group_by_node([1, 1, 1], Online)),
     ?_assertEqual([], httpdcnode:group_by_node([9, 10], Online)),
     ?_assertEqual([], httpdcnode:group_by_node([], Online))].

bad_uid_test_() ->
    [?_assertError(function_clause, httpdcnode:send(0, "x")),
     ?_assertError(function_clause, httpdcnode:send(-3, "x")),
     ?_assertError(function_clause, httpdcnode:kick(foo))].
