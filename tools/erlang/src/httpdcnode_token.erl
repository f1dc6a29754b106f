%% SPDX-License-Identifier: Apache-2.0
%% Subscriber tokens for C-nodes started with --auth-secret-file.
%%
%% A client opens /sse/Uid?token=Jwt (or sends "Authorization: Bearer
%% Jwt"): a JSON Web Token, HS256 under the secret, whose claims are sub
%% (the uid, a decimal string), exp (the Unix second it stops opening
%% streams), iat, and optionally nbf and claims of your own (jwt/3).
%% Or the older form: /test/Uid?exp=Exp&sig=Hex (or "Authorization: Bearer
%% Uid.Exp.Hex"), Hex being HMAC-SHA256(Secret, "Uid:Exp") in lowercase hex.
%%
%% The secret comes from the httpdcnode application env: `auth_secret' (the
%% secret itself, binary or string) or `auth_secret_file' (a path, read as
%% the server reads it: mode without group or other bits, one trailing
%% newline removed, not empty). Errors raise
%% error({httpdcnode_token, Reason}), Reason one of:
%%   no_secret                  neither key is set
%%   both_secret_and_file       both are set: say which one
%%   empty_secret               the secret (after the newline) is empty
%%   {secret_file, Path, Why}   Why: a file:read_file_info/read_file error,
%%                              not_regular, or {mode, Octal} (a string, e.g.
%%                              "640") when group or others may access it:
%%                              chmod 600 it
%%   bad_secret                 auth_secret is not a binary or string
%%   {bad_uid, Uid} | {bad_ttl, Ttl} | {bad_base_url, Url}
%%   {bad_claim, Key, Value}    a claim of jwt/3 that JSON cannot carry
%%                              (keys: atoms or binaries; values: integers,
%%                              UTF-8 binaries, true, false, null, lists
%%                              and maps of these)
-module(httpdcnode_token).

-include_lib("kernel/include/file.hrl").

-export([token/2, token_url/3, jwt/2, jwt/3]).
-export([query/3, sign/3, sign_jwt/2, secret/0, read_secret_file/1]).

%% The query string for Uid, valid for TtlSeconds from now.
-spec token(pos_integer(), pos_integer()) -> binary().
token(Uid, TtlSeconds) ->
    check_uid(Uid),
    check_ttl(TtlSeconds),
    query(secret(), Uid, erlang:system_time(second) + TtlSeconds).

%% BaseUrl ("http://host:8000", a trailing slash allowed) ++ "/test/Uid?" ++ token.
-spec token_url(iodata(), pos_integer(), pos_integer()) -> binary().
token_url(BaseUrl, Uid, TtlSeconds) ->
    Base = try iolist_to_binary(BaseUrl)
           catch error:badarg -> fail({bad_base_url, BaseUrl})
           end,
    Trimmed = case Base of
                  <<>> -> fail({bad_base_url, BaseUrl});
                  _ -> string:trim(Base, trailing, "/")
              end,
    Query = token(Uid, TtlSeconds),
    <<Trimmed/binary, "/test/", (integer_to_binary(Uid))/binary, "?", Query/binary>>.

%% <<"exp=Exp&sig=Hex">> for an explicit secret and expiry (Unix seconds).
-spec query(binary(), pos_integer(), integer()) -> binary().
query(Secret, Uid, Exp) ->
    <<"exp=", (integer_to_binary(Exp))/binary, "&sig=", (sign(Secret, Uid, Exp))/binary>>.

%% Lowercase hex of HMAC-SHA256(Secret, "Uid:Exp").
-spec sign(binary(), pos_integer(), integer()) -> binary().
sign(Secret, Uid, Exp) ->
    Mac = crypto:mac(hmac, sha256, Secret,
                     [integer_to_binary(Uid), $:, integer_to_binary(Exp)]),
    << <<(hex_digit(N))>> || <<N:4>> <= Mac >>.

%% A JWT for Uid, valid for TtlSeconds from now: claims sub, iat and exp.
-spec jwt(pos_integer(), pos_integer()) -> binary().
jwt(Uid, TtlSeconds) ->
    jwt(Uid, TtlSeconds, #{}).

%% The same with Claims of your own beside them (nbf, or what a later
%% server version checks); sub, iat and exp are always jwt/2's.
-spec jwt(pos_integer(), pos_integer(), #{atom() | binary() => term()}) -> binary().
jwt(Uid, TtlSeconds, Claims) when is_map(Claims) ->
    check_uid(Uid),
    check_ttl(TtlSeconds),
    Now = erlang:system_time(second),
    Std = #{<<"sub">> => integer_to_binary(Uid), <<"iat">> => Now,
            <<"exp">> => Now + TtlSeconds},
    Own = maps:from_list([{key_bin(K, V), V} || {K, V} <- maps:to_list(Claims)]),
    sign_jwt(secret(), maps:merge(Own, Std)).

%% header.claims.signature for an explicit secret and claims map (no check
%% that the server would take them: a test can make any token).
-spec sign_jwt(binary(), map()) -> binary().
sign_jwt(Secret, Claims) ->
    Input = <<(b64url(<<"{\"alg\":\"HS256\",\"typ\":\"JWT\"}">>))/binary, ".",
              (b64url(iolist_to_binary(json(Claims))))/binary>>,
    <<Input/binary, ".", (b64url(crypto:mac(hmac, sha256, Secret, Input)))/binary>>.

b64url(Bin) ->
    << <<(case C of $+ -> $-; $/ -> $_; _ -> C end)>>
       || <<C>> <= base64:encode(Bin), C =/= $= >>.

key_bin(K, _) when is_binary(K) -> K;
key_bin(K, _) when is_atom(K) -> atom_to_binary(K, utf8);
key_bin(K, V) -> fail({bad_claim, K, V}).

%% JSON of claims, in key order so that a token is a function of its claims.
json(M) when is_map(M) ->
    Pairs = lists:sort([{key_bin(K, V), V} || {K, V} <- maps:to_list(M)]),
    [${, lists:join($,, [[json_string(K), $:, json_value(K, V)] || {K, V} <- Pairs]), $}].

json_value(_, I) when is_integer(I) -> integer_to_binary(I);
json_value(_, true) -> <<"true">>;
json_value(_, false) -> <<"false">>;
json_value(_, null) -> <<"null">>;
json_value(K, B) when is_binary(B) ->
    case unicode:characters_to_binary(B) of
        B -> json_string(B);
        _ -> fail({bad_claim, K, B})
    end;
json_value(K, L) when is_list(L) -> [$[, lists:join($,, [json_value(K, V) || V <- L]), $]];
json_value(_, M) when is_map(M) -> json(M);
json_value(K, V) -> fail({bad_claim, K, V}).

json_string(B) ->
    [$", [case C of
              $" -> <<"\\\"">>;
              $\\ -> <<"\\\\">>;
              _ when C < 16#20 -> io_lib:format("\\u~4.16.0b", [C]);
              _ -> C
          end || <<C>> <= B], $"].

%% The secret from the application env (loading the application's env
%% first, so -httpdcnode auth_secret_file '"..."' works before it starts).
-spec secret() -> binary().
secret() ->
    _ = application:load(httpdcnode),
    case {application:get_env(httpdcnode, auth_secret),
          application:get_env(httpdcnode, auth_secret_file)} of
        {undefined, undefined} -> fail(no_secret);
        {{ok, _}, {ok, _}} -> fail(both_secret_and_file);
        {{ok, S}, undefined} -> non_empty(to_bin(S, bad_secret));
        {undefined, {ok, Path}} -> read_secret_file(Path)
    end.

%% The secret file as the server reads it: refused when group or others
%% may access it, one trailing newline removed, refused when empty.
-spec read_secret_file(file:name_all()) -> binary().
read_secret_file(Path) ->
    case file:read_file_info(Path) of
        {ok, #file_info{type = regular, mode = Mode}} when Mode band 8#077 =/= 0 ->
            fail({secret_file, Path, {mode, integer_to_list(Mode band 8#7777, 8)}});
        {ok, #file_info{type = regular}} ->
            case file:read_file(Path) of
                {ok, Bin} -> non_empty(drop_newline(Bin));
                {error, Why} -> fail({secret_file, Path, Why})
            end;
        {ok, _} -> fail({secret_file, Path, not_regular});
        {error, Why} -> fail({secret_file, Path, Why})
    end.

drop_newline(Bin) ->
    case binary:last(<<0, Bin/binary>>) of
        $\n -> binary:part(Bin, 0, byte_size(Bin) - 1);
        _ -> Bin
    end.

non_empty(<<>>) -> fail(empty_secret);
non_empty(Bin) -> Bin.

to_bin(B, _) when is_binary(B) -> B;
to_bin(L, What) ->
    try iolist_to_binary(L)
    catch error:badarg -> fail(What)
    end.

check_uid(Uid) when is_integer(Uid), Uid > 0 -> ok;
check_uid(Uid) -> fail({bad_uid, Uid}).

check_ttl(T) when is_integer(T), T > 0 -> ok;
check_ttl(T) -> fail({bad_ttl, T}).

hex_digit(N) when N < 10 -> $0 + N;
hex_digit(N) -> $a + N - 10.

fail(Reason) -> erlang:error({httpdcnode_token, Reason}).
