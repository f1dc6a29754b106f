# SPDX-License-Identifier: Apache-2.0
defmodule Httpdcnode.HandlerTest do
  use ExUnit.Case, async: true

  test "Httpdcnode.Handler has the callbacks of :httpdcnode_handler, the same optional" do
    assert Enum.sort(Httpdcnode.Handler.behaviour_info(:callbacks)) ==
             Enum.sort(:httpdcnode_handler.behaviour_info(:callbacks))

    assert Enum.sort(Httpdcnode.Handler.behaviour_info(:optional_callbacks)) ==
             Enum.sort(:httpdcnode_handler.behaviour_info(:optional_callbacks))
  end

  test "token/2 is an HS256 JWT for the uid, signed with the application's secret" do
    secret = "test secret #{System.unique_integer()}"
    Application.put_env(:httpdcnode, :auth_secret, secret)

    try do
      now = System.system_time(:second)
      jwt = Httpdcnode.token(42, 60)
      [head, claims, sig] = String.split(jwt, ".")
      assert Base.url_decode64!(head, padding: false) == ~s({"alg":"HS256","typ":"JWT"})
      %{"sub" => "42", "exp" => exp, "iat" => iat} = decode(claims)
      assert exp - iat == 60 and iat >= now and iat <= now + 5
      mac = :crypto.mac(:hmac, :sha256, secret, head <> "." <> claims)
      assert Base.url_encode64(mac, padding: false) == sig
      assert "token=" <> _ = Httpdcnode.token_query(42, 60)
      assert %{"nbf" => 7} = decode(Enum.at(String.split(Httpdcnode.token(42, 60, %{nbf: 7}), "."), 1))
    after
      Application.delete_env(:httpdcnode, :auth_secret)
    end
  end

  # The claims' JSON, read with the test helpers' decoder (Elixir 1.14 has none).
  defp decode(b64), do: :httpdtest_json.json_decode(Base.url_decode64!(b64, padding: false))
end
