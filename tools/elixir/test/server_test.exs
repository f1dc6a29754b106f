# SPDX-License-Identifier: Apache-2.0
defmodule Httpdcnode.ServerTest do
  # Against the real binary: a C-node whose --master is this node, with
  # tokens (--auth-secret-file) and an inbox whose handler is Elixir.
  use ExUnit.Case, async: false

  @t 10_000
  @inbox :httpdcnode_inbox

  defmodule Echo do
    use Httpdcnode.Handler

    @impl true
    def init(test), do: {:ok, test}

    @impl true
    def handle_in(uid, conn, data, test) do
      send(test, {:in, uid, conn, data})
      :ok = Httpdcnode.reply(conn, "echo: " <> data)
      {:ok, test}
    end

    @impl true
    def handle_conn_down(uid, conn, reason, test) do
      send(test, {:down, uid, conn, reason})
      {:ok, test}
    end
  end

  setup_all do
    dir = Path.join(System.tmp_dir!(), "httpdcnode_ex_#{System.pid()}")
    File.mkdir_p!(dir)
    secret = Path.join(dir, "secret")
    File.write!(secret, Base.encode64(:crypto.strong_rand_bytes(32)) <> "\n")
    File.chmod!(secret, 0o600)
    Application.put_env(:httpdcnode, :auth_secret_file, secret)

    s =
      :httpdtest_server.start_server(%{
        master: node(),
        presence: :httpdcnode_presence,
        extra_args: [~c"--auth-secret-file", String.to_charlist(secret),
                     ~c"--inbox", Atom.to_charlist(@inbox), ~c"--presence-conns"]
      })

    c_node = :httpdtest_server.node_of(s)
    wait(fn -> c_node in Httpdcnode.nodes() end, :master_knows_the_c_node)

    on_exit(fn ->
      :httpdtest_server.stop_server(s)
      Application.delete_env(:httpdcnode, :auth_secret_file)
      File.rm_rf!(dir)
    end)

    %{s: s, c_node: c_node}
  end

  setup do
    start_supervised!({Httpdcnode.Inbox, name: @inbox, handler: Echo, args: self()})
    :ok
  end

  defp wait(fun, what), do: :httpdtest_wait.wait_until(fun, @t, what)

  # An SSE stream for uid with a token from Httpdcnode.token_query/2; its head read.
  defp sse(s, uid) do
    {:ok, sock} =
      :gen_tcp.connect({127, 0, 0, 1}, :httpdtest_server.port_of(s), [:binary, active: false])

    path = ~c"/sse/#{uid}?" ++ String.to_charlist(Httpdcnode.token_query(uid, 60))
    :ok = :gen_tcp.send(sock, :httpdtest_http.request_bytes(~c"GET", path, ~c"HTTP/1.1"))
    {head, rest} = :httpdtest_raw.read_until(sock, "\r\n\r\n", "")
    assert "HTTP/1.1 200 OK\r\n" <> _ = head
    Process.put({:buf, sock}, rest)
    sock
  end

  # The data of the next SSE event that carries a message.
  defp next_message(sock) do
    event = :httpdtest_raw.read_event(sock)

    case Regex.run(~r/^id: .*\ndata: (.*)\n\n$/s, event) do
      [_, data] -> data
      nil -> next_message(sock)
    end
  end

  test "send/2 reaches an SSE stream opened with token_query/2; online/1 and online_uids/1 see it",
       %{s: s, c_node: c_node} do
    sock = sse(s, 501)
    wait(fn -> Httpdcnode.online(501) == [c_node] end, :online)
    assert Httpdcnode.online?(501)
    assert 501 in Httpdcnode.online_uids(c_node)
    :ok = Httpdcnode.send(501, "hello from Elixir")
    assert next_message(sock) == "hello from Elixir"
    :gen_tcp.close(sock)
    wait(fn -> not Httpdcnode.online?(501) end, :offline)
  end

  test "send_sync/2, multicast_sync/2 and broadcast/1 count and deliver", %{s: s, c_node: c_node} do
    socks = for uid <- [502, 503, 503], do: {uid, sse(s, uid)}
    wait(fn -> [c_node] == Httpdcnode.online(502) and [c_node] == Httpdcnode.online(503) end, :online)
    assert {:ok, 2} = Httpdcnode.send_sync(503, "two streams")
    assert {:ok, 3} = Httpdcnode.multicast_sync([502, 503], ["io", "data"])
    :ok = Httpdcnode.broadcast("to all")

    for {uid, sock} <- socks do
      want = if uid == 503, do: ["two streams", "iodata", "to all"], else: ["iodata", "to all"]
      assert Enum.map(want, fn _ -> next_message(sock) end) == want
      :gen_tcp.close(sock)
    end
  end

  test "a WebSocket client's message reaches the Elixir handler, whose reply/2 answers that " <>
         "connection; handle_conn_down/4 hears it go; kick/1 ends a uid's streams",
       %{s: s, c_node: c_node} do
    bearer = ~c"Authorization: Bearer " ++ String.to_charlist(Httpdcnode.token(504, 60))
    ws = :httpdtest_inbox.ws_open(s, 504, [bearer])
    :ok = :gen_tcp.send(ws, :httpdtest_inbox.frame("ping"))
    assert_receive {:in, 504, {^c_node, id} = conn, "ping"}, @t
    assert is_integer(id)
    assert {1, 1, "echo: ping"} = next_text(ws)
    assert {:ok, 1} = Httpdcnode.reply_sync(conn, "once more")
    assert {1, 1, "once more"} = next_text(ws)
    :ok = :gen_tcp.close(ws)
    assert_receive {:down, 504, ^conn, :client}, @t

    sock = sse(s, 505)
    wait(fn -> Httpdcnode.online?(505) end, :online)
    :ok = Httpdcnode.kick(505)
    assert ending(sock) == ~s(event: end\ndata: {"reason":"kicked"}\n\n)
    :gen_tcp.close(sock)
  end

  # The event that ends an SSE stream.
  defp ending(sock) do
    case :httpdtest_raw.read_event(sock) do
      "event: end\n" <> _ = event -> event
      _ -> ending(sock)
    end
  end

  # The next text frame (the server pings now and then).
  defp next_text(ws) do
    case :httpdtest_inbox.recv_frame(ws) do
      {_, 9, _} -> next_text(ws)
      frame -> frame
    end
  end
end
