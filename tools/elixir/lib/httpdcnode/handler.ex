# SPDX-License-Identifier: Apache-2.0
defmodule Httpdcnode.Handler do
  @moduledoc """
  What clients send: the behaviour of a module the inbox process calls
  (`Httpdcnode.Inbox`, the Erlang `httpdcnode_inbox`), the Elixir face of
  the Erlang behaviour `:httpdcnode_handler` (the same callbacks, checked
  by the tests). With `--inbox NAME` a C-node sends each message a client
  sends (a WebSocket frame, a `POST /send/N`) to the inbox registered as
  NAME on a master, which calls `handle_in/4`, in the order one connection
  sent them.

      defmodule MyApp.Echo do
        use Httpdcnode.Handler

        @impl true
        def init(_args), do: {:ok, 0}

        @impl true
        def handle_in(_uid, conn, data, n) do
          Httpdcnode.reply(conn, data)
          {:ok, n + 1}
        end
      end

  A crash in a callback is logged and the message counted as handled: the
  inbox keeps its state and goes on.
  """

  @doc "The inbox's state from the `args` it was started with."
  @callback init(args :: term) :: {:ok, state :: term}

  @doc """
  A message `data` from `uid`'s connection `conn`: a binary for a text
  message (valid UTF-8), `{:binary, bytes}` for a binary one (a binary
  frame, a POST of `application/octet-stream`);
  `Httpdcnode.reply(conn, ...)` answers that connection alone
  (`Httpdcnode.reply(conn, data)` sends it back as it came).
  """
  @callback handle_in(uid :: pos_integer, conn :: Httpdcnode.conn(),
              data :: binary | {:binary, binary}, state :: term) :: {:ok, new_state :: term}

  @doc """
  With `--presence-conns`: `uid`'s WebSocket `conn` ended (after its last
  `handle_in/4`), `reason` an atom (`:client`, `:kick`, `:ws_dead`,
  `:drain`, ...). Without this callback the message goes to `handle_info/2`.
  """
  @callback handle_conn_down(uid :: pos_integer, conn :: Httpdcnode.conn(), reason :: atom,
              state :: term) :: {:ok, new_state :: term}

  @doc """
  `uid` lost its last stream on every C-node, as this master's presence
  sees it (it may come back at any time): the place to free what the
  handler keeps for a uid. It comes after that uid's messages handled so
  far, but one that waited on its C-node may still follow, so check again
  later (`Httpdcnode.online/1`) before freeing for good. Without this
  callback the notice is dropped.
  """
  @callback handle_offline(uid :: pos_integer, state :: term) :: {:ok, new_state :: term}

  @doc """
  With the C-nodes' `--topic-auth handler`: may `uid`'s stream
  `meta.conn` join `topic` (a binary), a topic its subscriber token does
  not list? `meta.since` is the id the client resumes the topic from, or
  `:undefined`. `{:deny, reason}` (an atom or a binary of topic name
  characters and spaces) is told to the client. Without this callback
  every such join is refused. The subscription is made after it returns:
  a publish made here does not reach the joiner.
  """
  @callback authorize_join(uid :: pos_integer, topic :: binary,
              meta :: %{conn: Httpdcnode.conn(), since: binary | :undefined},
              state :: term) :: {:allow | {:deny, atom | binary}, new_state :: term}

  @doc """
  The same C-nodes: `uid`'s connection `conn` left `topic` (it asked; a
  stream that ends leaves its topics silently).
  """
  @callback handle_leave(uid :: pos_integer, conn :: Httpdcnode.conn(), topic :: binary,
              state :: term) :: {:ok, new_state :: term}

  @doc "Any other message the inbox process gets."
  @callback handle_info(msg :: term, state :: term) :: {:ok, new_state :: term}

  @optional_callbacks handle_conn_down: 4, handle_offline: 2, handle_info: 2,
                      authorize_join: 4, handle_leave: 4

  defmacro __using__(_opts) do
    quote do
      @behaviour Httpdcnode.Handler
    end
  end
end
