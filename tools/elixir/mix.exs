# SPDX-License-Identifier: Apache-2.0
# httpdcnode for Elixir: a thin wrapper over the httpdcnode Erlang
# application (docs/elixir.md). As a dependency of your project, by path:
#   {:httpdcnode_ex, path: "/path/to/httpdcnode/tools/elixir"}
# or from git (two sparse checkouts of the one repository; override: the
# wrapper names the Erlang application by its path in the checkout):
#   {:httpdcnode_ex, git: URL, sparse: "tools/elixir"},
#   {:httpdcnode, git: URL, sparse: "tools/erlang", override: true}
# It has no other dependency: nothing is fetched from hex.
defmodule HttpdcnodeEx.MixProject do
  use Mix.Project

  def project do
    [
      app: :httpdcnode_ex,
      version: "0.1.0",
      elixir: "~> 1.14",
      deps: [{:httpdcnode, path: "../erlang"}],
      # The tests start distribution first, then the applications (mnesia
      # needs the node's name): test_helper.exs does it.
      aliases: [test: "test --no-start"]
    ]
  end

  def application do
    [extra_applications: [:logger]]
  end
end
