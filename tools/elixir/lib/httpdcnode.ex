# SPDX-License-Identifier: Apache-2.0
defmodule Httpdcnode do
  @moduledoc """
  Push messages to the users connected to httpdcnode C-nodes, from Elixir.

  A thin wrapper over the Erlang application `:httpdcnode` (module
  `:httpdcnode`, docs/erlang.md): each function calls the one of the same
  name there and returns what it returns. Call them on a node running that
  application, a master the C-nodes were started with (`--master`), or a
  node of role `client`, which forwards each call to a master.

  A uid is a positive integer. A message is a binary (an Elixir string) or
  iodata; a charlist holding a character above 255 is sent as UTF-8.
  A connection (`t:conn/0`) is `{c_node, id}`, as `handle_in/4` of a
  `Httpdcnode.Handler` gets it.

  A topic (`t:topic/0`) is a named channel streams subscribe to:
  `publish/2` sends one Erlang message per C-node holding it, not a list
  of uids (docs/erlang.md, Topics). `multicast/2` sends to a list of
  uids.
  """

  # send/2 here is httpdcnode's, not Kernel's.
  import Kernel, except: [send: 2]

  @type uid :: pos_integer
  @type msg :: iodata | String.t()
  @type conn :: {node, pos_integer}
  @type topic :: binary | String.t() | atom

  @default_timeout 5000

  @doc "Sends `msg` to every stream of `uid`, on whichever C-nodes hold it. Async."
  @spec send(uid, msg) :: :ok
  def send(uid, msg), do: :httpdcnode.send(uid, msg)

  @doc """
  Like `send/2`, but waits for the C-nodes: `{:ok, n}`, n the connections
  written to. A C-node that does not answer within `timeout` ms counts 0.
  """
  @spec send_sync(uid, msg, timeout) :: {:ok, non_neg_integer}
  def send_sync(uid, msg, timeout \\ @default_timeout),
    do: :httpdcnode.send_sync(uid, msg, timeout)

  @doc "Sends `msg` to every uid of `uids`: one Erlang message per C-node."
  @spec multicast([uid], msg) :: :ok
  def multicast(uids, msg), do: :httpdcnode.multicast(uids, msg)

  @doc "Like `multicast/2`, acknowledged: `{:ok, n}`, the connections written to."
  @spec multicast_sync([uid], msg, timeout) :: {:ok, non_neg_integer}
  def multicast_sync(uids, msg, timeout \\ @default_timeout),
    do: :httpdcnode.multicast_sync(uids, msg, timeout)

  @doc "Sends `msg` to every stream on every known C-node."
  @spec broadcast(msg) :: :ok
  def broadcast(msg), do: :httpdcnode.broadcast(msg)

  @doc "Sends `msg` to the one connection `conn` (from `c:Httpdcnode.Handler.handle_in/4`)."
  @spec reply(conn, msg) :: :ok
  def reply(conn, msg), do: :httpdcnode.reply(conn, msg)

  @doc "Like `reply/2`, waiting: `{:ok, 1}` when written, `{:ok, 0}` when `conn` is gone."
  @spec reply_sync(conn, msg, timeout) :: {:ok, 0 | 1}
  def reply_sync(conn, msg, timeout \\ @default_timeout),
    do: :httpdcnode.reply_sync(conn, msg, timeout)

  @doc """
  Sends `msg` to every stream subscribed to `topic` (1 to 64 of
  `A-Z a-z 0-9 _ - . : /`), one message per C-node that holds it. Async.
  """
  @spec publish(topic, msg) :: :ok
  def publish(topic, msg), do: :httpdcnode.publish(topic, msg)

  @doc "Like `publish/2`, waiting for the C-nodes: `{:ok, n}`, the streams written to."
  @spec publish_sync(topic, msg, timeout) :: {:ok, non_neg_integer}
  def publish_sync(topic, msg, timeout \\ @default_timeout),
    do: :httpdcnode.publish_sync(topic, msg, timeout)

  @doc "The connection `conn` joins `topic`, live from now (its client is told). Async."
  @spec subscribe(conn, topic) :: :ok
  def subscribe(conn, topic), do: :httpdcnode.subscribe(conn, topic)

  @doc "The connection `conn` leaves `topic` (its client is told). Async."
  @spec unsubscribe(conn, topic) :: :ok
  def unsubscribe(conn, topic), do: :httpdcnode.unsubscribe(conn, topic)

  @doc "Streams subscribed to `topic` on every C-node, as their presence last told."
  @spec topic_count(topic) :: non_neg_integer
  def topic_count(topic), do: :httpdcnode.topic_count(topic)

  @doc "`[{uid, conn}]` subscribed to `topic`: needs the C-nodes' `--presence-topics`."
  @spec topic_members(topic) :: [{uid, conn}]
  def topic_members(topic), do: :httpdcnode.topic_members(topic)

  @doc "Ends every stream of `uid`; its clients are told not to come back."
  @spec kick(uid) :: :ok
  def kick(uid), do: :httpdcnode.kick(uid)

  @doc "The C-nodes holding `uid` now, as they last reported: `[]` when offline."
  @spec online(uid) :: [node]
  def online(uid), do: :httpdcnode.online(uid)

  @doc "Whether `uid` has a stream on some C-node now."
  @spec online?(uid) :: boolean
  def online?(uid), do: online(uid) != []

  @doc "The uids one C-node holds, ascending."
  @spec online_uids(node) :: [uid]
  def online_uids(c_node), do: :httpdcnode.online_uids(c_node)

  @doc "The known C-nodes."
  @spec nodes() :: [node]
  def nodes, do: :httpdcnode.nodes()

  @doc "The counters of every known C-node, and the application's own under `:app`."
  @spec stats() :: map
  def stats, do: :httpdcnode.stats()

  @doc """
  A subscriber token (a JWT, HS256) for `uid`, valid for `ttl_seconds`,
  signed with the secret of the application env `auth_secret` or
  `auth_secret_file` (docs/security.md). `claims` adds claims of your own.
  The browser sends it as `?token=JWT` or `Authorization: Bearer JWT`.
  """
  @spec token(uid, pos_integer, map) :: String.t()
  def token(uid, ttl_seconds, claims \\ %{}),
    do: :httpdcnode_token.jwt(uid, ttl_seconds, claims)

  @doc "The same as a query string, `\"token=...\"`: what the browser client's `token` callback returns."
  @spec token_query(uid, pos_integer) :: String.t()
  def token_query(uid, ttl_seconds), do: "token=" <> token(uid, ttl_seconds)
end
