%% SPDX-License-Identifier: Apache-2.0
%% A small JSON decoder for the black-box tests (/stats, the lines of the
%% browser drivers): objects, arrays, strings, numbers, literals; object keys
%% stay binaries.
-module(httpdtest_json).

-export([json_decode/1]).
%% for the other test helpers
-export([with_fraction/1]).

-import(httpdtest_wait, [summarize/1]).

%% A small JSON decoder (objects, arrays, strings, numbers, literals);
%% object keys stay binaries.
json_decode(Bin) ->
    {V, Rest} = json_value(json_ws(Bin)),
    case json_ws(Rest) of
        <<>> -> V;
        Junk -> erlang:error({json_trailing, summarize(Junk)})
    end.

json_ws(<<C, R/binary>>) when C =:= $\s; C =:= $\t; C =:= $\n; C =:= $\r -> json_ws(R);
json_ws(B) -> B.

json_value(<<${, R/binary>>) -> json_object(json_ws(R), #{});
json_value(<<$[, R/binary>>) -> json_array(json_ws(R), []);
json_value(<<$", R/binary>>) -> json_string(R, <<>>);
json_value(<<"true", R/binary>>) -> {true, R};
json_value(<<"false", R/binary>>) -> {false, R};
json_value(<<"null", R/binary>>) -> {null, R};
json_value(B) -> json_number(B, <<>>).

json_object(<<$}, R/binary>>, M) -> {M, R};
json_object(<<$", R/binary>>, M) ->
    {K, R1} = json_string(R, <<>>),
    <<$:, R2/binary>> = json_ws(R1),
    {V, R3} = json_value(json_ws(R2)),
    case json_ws(R3) of
        <<$,, R4/binary>> -> json_object(json_ws(R4), M#{K => V});
        <<$}, R4/binary>> -> {M#{K => V}, R4}
    end.

json_array(<<$], R/binary>>, Acc) -> {lists:reverse(Acc), R};
json_array(B, Acc) ->
    {V, R1} = json_value(B),
    case json_ws(R1) of
        <<$,, R2/binary>> -> json_array(json_ws(R2), [V | Acc]);
        <<$], R2/binary>> -> {lists:reverse([V | Acc]), R2}
    end.

json_string(<<$", R/binary>>, Acc) -> {Acc, R};
json_string(<<$\\, $u, H:4/binary, R/binary>>, Acc) ->
    C = binary_to_integer(H, 16),
    json_string(R, <<Acc/binary, (unicode:characters_to_binary([C]))/binary>>);
json_string(<<$\\, C, R/binary>>, Acc) ->
    E = case C of $n -> $\n; $t -> $\t; $r -> $\r; $b -> $\b; $f -> $\f; _ -> C end,
    json_string(R, <<Acc/binary, E>>);
json_string(<<C, R/binary>>, Acc) -> json_string(R, <<Acc/binary, C>>).

json_number(<<C, R/binary>>, Acc) when (C >= $0 andalso C =< $9); C =:= $-; C =:= $+;
                                       C =:= $.; C =:= $e; C =:= $E ->
    json_number(R, <<Acc/binary, C>>);
json_number(R, Acc) when Acc =/= <<>> ->
    V = try binary_to_integer(Acc)
        catch _:_ -> binary_to_float(with_fraction(Acc))
        end,
    {V, R}.

%% binary_to_float wants a fraction: "1e5" -> "1.0e5".
with_fraction(B) ->
    case {binary:match(B, <<".">>), binary:split(B, [<<"e">>, <<"E">>])} of
        {nomatch, [M, E]} -> <<M/binary, ".0e", E/binary>>;
        {nomatch, [M]} -> <<M/binary, ".0">>;
        _ -> B
    end.
