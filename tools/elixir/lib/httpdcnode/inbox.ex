# SPDX-License-Identifier: Apache-2.0
defmodule Httpdcnode.Inbox do
  @moduledoc """
  The inbox process for a supervision tree of your own: registered as
  `:name` (the C-nodes' `--inbox NAME`, default `:httpdcnode_inbox`), it
  calls the `Httpdcnode.Handler` module `:handler`, started with `:args`.

      children = [{Httpdcnode.Inbox, name: :httpdcnode_inbox, handler: MyApp.Chat}]

  (The Erlang application starts one itself from its env
  `inbox: {name, handler, args}`; use one way or the other.)
  """

  @doc false
  def child_spec(opts) do
    {name, handler, args} = options(opts)
    :httpdcnode_inbox.child_spec(name, handler, args)
  end

  @doc "Starts the inbox linked to the caller: `{:ok, pid}`."
  @spec start_link(keyword) :: {:ok, pid} | {:error, term}
  def start_link(opts) do
    {name, handler, args} = options(opts)
    :httpdcnode_inbox.start_link(name, handler, args)
  end

  defp options(opts) do
    {Keyword.get(opts, :name, :httpdcnode_inbox), Keyword.fetch!(opts, :handler),
     Keyword.get(opts, :args, [])}
  end
end
