# SPDX-License-Identifier: Apache-2.0
# The tests run against the real server binary, with the project's own test
# helpers (tests/erlang/lib/, built into build/tests/ebin by make test), on
# a node that runs the httpdcnode application as the C-nodes' master, as a
# Phoenix node would.
root = Path.expand("../../..", __DIR__)
ebin = Path.join(root, "build/tests/ebin")

unless File.exists?(Path.join(ebin, "httpdtest_server.beam")) do
  raise "no #{ebin}/httpdtest_server.beam: build the test helpers first " <>
          "(make test does; or make all and make build/tests/ebin/{" <>
          "httpdtest_os,httpdtest_wait,httpdtest_json,httpdtest_http," <>
          "httpdtest_master,httpdtest_server,httpdtest_raw,httpdtest_inbox}.beam)"
end

Code.prepend_path(ebin)

# Distribution before the applications: mnesia takes the node's name.
{_, 0} = System.cmd("epmd", ["-daemon"])
name = :"httpdcnode_ex_#{System.pid()}@localhost"

case Node.start(name, :shortnames) do
  {:ok, _} -> :ok
  {:error, reason} -> raise "cannot start distribution as #{name}: #{inspect(reason)}"
end

Node.set_cookie(:"httpdcnode_ex_#{System.pid()}_#{System.unique_integer([:positive])}")
{:ok, _} = Application.ensure_all_started(:httpdcnode_ex)
{:ok, _} = Application.ensure_all_started(:httpdcnode)
ExUnit.start()
