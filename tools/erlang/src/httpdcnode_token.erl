%% Subscriber tokens for C-nodes started with --auth-secret-file.
%%
%% A client opens /test/Uid?exp=Exp&sig=Hex (or sends "Authorization:
%% Bearer Uid.Exp.Hex"): Hex is HMAC-SHA256(Secret, "Uid:Exp") in lowercase
%% hex, Exp the Unix second the token stops opening streams.
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
-module(httpdcnode_token).

-include_lib("kernel/include/file.hrl").

-export([token/2, token_url/3]).
-export([query/3, sign/3, secret/0, read_secret_file/1]).

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
