# SPDX-License-Identifier: Apache-2.0
# The httpdcnode Erlang application as a Mix project, so that an Elixir
# project can depend on it ({:httpdcnode, path: ...} or git with sparse:
# "tools/erlang") without rebar3. Its metadata is read from
# src/httpdcnode.app.src, so make, rebar3 and Mix build the same
# application. tools/elixir (the Elixir wrapper) depends on it by path.
defmodule Httpdcnode.ErlangApp.MixProject do
  use Mix.Project

  {:ok, [{:application, :httpdcnode, props}]} =
    :file.consult(Path.join(__DIR__, "src/httpdcnode.app.src"))

  @app props
  @external_resource Path.join(__DIR__, "src/httpdcnode.app.src")

  def project do
    [
      app: :httpdcnode,
      version: to_string(@app[:vsn]),
      language: :erlang,
      erlc_paths: ["src"],
      erlc_options: [:debug_info],
      deps: []
    ]
  end

  def application do
    Keyword.take(@app, [:description, :registered, :applications, :mod, :env])
  end
end
