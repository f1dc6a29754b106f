#!/usr/bin/env escript
%% Writes term_to_binary of every message shape the C-node accepts or
%% refuses (README "Messages from Erlang") into the directory given, one
%% file per term: the seed corpus of build/fuzz/fuzz_term.
main([Dir]) ->
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    Pid = self(),
    Ref = make_ref(),
    Terms = accepted(Pid, Ref) ++ refused(Pid, Ref),
    lists:foreach(
      fun({Name, Term}) ->
              write(Dir, Name, term_to_binary(Term)),
              write(Dir, Name ++ "-utf8", term_to_binary(Term, [{minor_version, 2}]))
      end, Terms),
    write(Dir, "compressed", term_to_binary({1, binary:copy(<<"z">>, 200)}, [{compressed, 9}])),
    io:format("term_seeds: ~b files in ~s~n", [2 * length(Terms) + 1, Dir]).

write(Dir, Name, Bin) ->
    ok = file:write_file(filename:join(Dir, Name), Bin).

accepted(Pid, Ref) ->
    [{"unicast-binary", {123, <<"Hello Libevent World">>}},
     {"unicast-string", {7, "hello"}},
     {"unicast-iolist", {7, [<<"a">>, "bc", [$d, [<<"ef">>]] | <<"g">>]}},
     {"unicast-max-uid", {1114112, <<"x">>}},
     {"unicast-int32-uid", {70000, <<"x">>}},
     {"multicast-string-form", {[1, 2, 3], <<"x">>}},
     {"multicast-list-form", {[1000, 70000, 5], <<"x">>}},
     {"multicast-twice", {[9, 9], <<"x">>}},
     {"multicast-empty", {[], <<"x">>}},
     {"broadcast", {broadcast, <<"to all">>}},
     {"broadcast-iolist", {broadcast, ["a", <<"b">>]}},
     {"kick", {kick, 5}},
     {"ack-unicast", {Pid, Ref, 7, <<"x">>}},
     {"ack-multicast", {Pid, Ref, [7, 300], <<"x">>}},
     {"ack-multicast-string", {Pid, Ref, [7, 8], "xy"}},
     {"stats", {Pid, Ref, stats}},
     {"snapshot", {Pid, Ref, snapshot}},
     {"numbered", {httpdcnode_seq, 'm1@host', 3, 7, {5, <<"x">>}}},
     {"numbered-topic", {httpdcnode_seq, 'm1@host', 3, 8, {topic, <<"news">>, <<"x">>}}},
     {"numbered-ack-topic", {httpdcnode_seq, 'm1@host', 3, 9,
                             {Pid, Ref, topic, <<"news">>, <<"x">>}}},
     {"numbered-gap", {httpdcnode_seq, 'm1@host', 3, 10, {httpdcnode_gap, 12, [4, 6]}}},
     {"numbered-gap-topics", {httpdcnode_seq, 'm1@host', 3, 13,
                              {httpdcnode_gap, 14, [4], [<<"a">>, <<"room:1">>]}}},
     {"numbered-base", {httpdcnode_seq_base, 'm1@host', 3, 0, httpdcnode_outq}},
     {"deep-iolist", {3, deep(500, <<"x">>)}},
     {"wide-iolist", {3, lists:duplicate(300, <<"ab">>)}},
     {"payload-64", {3, binary:copy(<<"p">>, 64)}},
     {"tagged-binary-utf8", {3, {binary, <<"hello">>}}},
     {"tagged-binary-bytes", {3, {binary, <<255, 0>>}}},
     {"tagged-text", {3, {text, <<"caf", 16#c3, 16#a9>>}}},
     {"tagged-text-split", {3, {text, [<<"caf", 16#c3>>, [16#a9]]}}},
     {"tagged-multicast", {[1, 2], {binary, "xy"}}},
     {"tagged-broadcast", {broadcast, {binary, [<<"a">>]}}},
     {"tagged-ack", {Pid, Ref, 7, {binary, <<"x">>}}},
     {"tagged-conn", {conn, 5, {binary, <<"x">>}}},
     {"tagged-ack-conn", {Pid, Ref, conn, 5, {text, <<"x">>}}},
     {"untagged-split-utf8", {3, [<<16#e2, 16#82>>, 16#ac]}}].

refused(Pid, Ref) ->
    [{"uid-zero", {0, <<"x">>}},
     {"uid-negative", {-1, <<"x">>}},
     {"uid-over-max", {1114113, <<"x">>}},
     {"uid-bigint", {1 bsl 70, <<"x">>}},
     {"uid-bigint-64", {1 bsl 40, <<"x">>}},
     {"uid-large-big", {1 bsl 2100, <<"x">>}},
     {"uid-negative-big", {-(1 bsl 70), <<"x">>}},
     {"uid-float", {1.5, <<"x">>}},
     {"uid-atom", {foo, <<"x">>}},
     {"uid-binary", {<<"12">>, <<"x">>}},
     {"uids-bad-member", {[1, foo], <<"x">>}},
     {"uids-zero-in-string", {[1, 0], <<"x">>}},
     {"uids-improper", {[1 | 2], <<"x">>}},
     {"uids-nested", {[[1]], <<"x">>}},
     {"payload-empty-binary", {1, <<>>}},
     {"payload-empty-list", {1, []}},
     {"payload-empty-iolist", {1, [[], <<>>, [[]]]}},
     {"payload-65", {1, binary:copy(<<"a">>, 65)}},        % too big under the small limits
     {"payload-bitstring", {1, <<1:3>>}},
     {"payload-unicode", {1, [256, 257]}},
     {"payload-atom", {1, hello}},
     {"payload-int", {1, 42}},
     {"payload-tuple-in-list", {1, [<<"a">>, {b}]}},
     {"payload-map", {1, #{a => 1}}},
     {"payload-fun", {1, fun() -> ok end}},
     {"payload-export", {1, fun lists:sort/1}},
     {"payload-pid", {1, Pid}},
     {"payload-deep-tuple", {1, deep_tuple(300)}},
     {"tagged-text-not-utf8", {1, {text, <<"caf", 16#e9>>}}},
     {"tagged-text-cut", {1, {text, [<<"a">> | <<16#c3>>]}}},
     {"tagged-empty", {1, {binary, <<>>}}},
     {"tagged-nested", {1, {binary, {text, <<"x">>}}}},
     {"tagged-unknown", {1, {bytes, <<"x">>}}},
     {"tagged-three", {1, {binary, <<"x">>, extra}}},
     {"tagged-int", {1, {binary, 5}}},
     {"broadcast-int", {broadcast, 1}},
     {"broadcast-empty", {broadcast, <<>>}},
     {"kick-atom", {kick, foo}},
     {"kick-zero", {kick, 0}},
     {"kick-list", {kick, [1]}},
     {"stats-no-ref", {Pid, stats}},
     {"reply-other-atom", {Pid, Ref, other}},
     {"reply-swapped", {Ref, Pid, stats}},
     {"reply-five", {Pid, Ref, 1, <<"x">>, extra}},
     {"tuple-1", {1}},
     {"tuple-0", {}},
     {"tuple-6", {1, 2, 3, 4, 5, 6}},
     {"large-tuple", list_to_tuple(lists:seq(1, 300))},
     {"atom", hello},
     {"list", [1, <<"x">>]},
     {"nil", []},
     {"map", #{1 => <<"x">>}},
     {"float", 3.14},
     {"string-only", "12"},
     {"port", hd(erlang:ports())},
     {"ref-only", Ref}].

deep(0, Leaf) -> Leaf;
deep(N, Leaf) -> [deep(N - 1, Leaf)].

deep_tuple(0) -> x;
deep_tuple(N) -> {deep_tuple(N - 1)}.
