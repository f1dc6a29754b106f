// SPDX-License-Identifier: Apache-2.0
/* httpdcnode browser client: a uid's messages, and its topics', over
 * WebSocket, Server-Sent Events or long-poll, whichever works first,
 * resuming after the last id seen (the uid's, and each topic's) on every
 * reconnect. A classic script: it defines the global `httpdcnode`. No
 * dependencies.
 *
 *   var conn = httpdcnode.connect(location.origin, 123, {
 *     onmessage: function (m) { ... m.id, m.data (text), m.bytes ... },
 *     ongap: function (g) { ... g.last, g.first: reload from your database ... },
 *     onstatus: function (s) { ... s.state, s.transport, s.detail ... },
 *                              // "waiting" also: s.delay (ms), s.attempt (n)
 *     transports: ['ws', 'sse', 'poll'],     // the default order; or one name
 *     query: function () { return 'exp=...&sig=...'; },  // optional, on every request
 *     token: function () { return fetch('/token').then(r => r.text()); },
 *                              // optional: 'exp=...&sig=...' (or a Promise of it),
 *                              // asked before each (re)connect: a fresh token
 *     onend: function (e) { ... e.reason: "kicked", "replaced", "expired" ... },
 *     onreply: function (r) { ... r.data, r.bytes: {conn, Conn, Data} from Erlang ... },
 *     backoffBase: 500, backoffCap: 20000    // ms, the defaults (see lost below)
 *   });
 *   conn.send('hello');     // a Promise: to the --inbox process (below)
 *   conn.subscribe('room:lobby', function (m) { ... m.topic, m.id, m.data ... });
 *   conn.unsubscribe('room:lobby');
 *   conn.close();
 *
 * Topics: conn.subscribe(topic, onMessage) joins a topic (1 to 64 of A-Z
 * a-z 0-9 _ - . : /); its messages go to onMessage (else to onmessage),
 * each with m.topic and m.id (the topic's own id). Over an open WebSocket
 * the join is a message of its own; over SSE and long-poll the stream is
 * opened again with the topic in its ?topics=. Every (re)connect names
 * each topic with the last id seen there, so that each resumes where it
 * left off (or is told of a gap: g.topic in ongap). What the server says
 * of a topic goes to opts.ontopic({topic, event, reason}): event
 * 'joined', 'refused' (reason: why; the topic is dropped, not asked again)
 * or 'left' (the application unsubscribed it, or it was asked). A topic
 * the application subscribed the connection to is kept too, and named on
 * the next reconnect.
 *
 * conn.send(data) (a string, an ArrayBuffer or a typed array) goes over
 * the WebSocket when one is open, else as POST /send/N (text/plain for a
 * string, else application/octet-stream) with the streams' query (the
 * token) and, when the SSE stream got its id (it opens with ?conn=1),
 * conn=ID, so that Erlang's {conn, Conn, Data} reply comes back on it
 * (onreply). The Promise resolves once the server took the message (the
 * WebSocket had it, or 202) and rejects with an Error whose .reason is
 *   'too_big'  past the server's --max-client-message (413)
 *   'rate'     past its --client-rate (429): send less often
 *   'busy'     Erlang is not keeping up, or not linked (503): try later
 *   'refused'  any other refusal (403 origin or token, 404, 415, ...)
 *   'network'  no answer (offline, the server unreachable)
 * and .status the HTTP status (0 for 'network').
 *
 * A binary message (a WebSocket binary frame, SSE's "event: base64",
 * long-poll's "data_base64": Erlang sent it as {binary, Data}, or its
 * bytes are not UTF-8) comes as m.bytes, a Uint8Array of exactly what was
 * sent, and as m.data decoded as text the way EventSource would (invalid
 * bytes as U+FFFD); m.bytes is undefined for text messages. The same for
 * replies (onreply: r.bytes).
 *
 * The server says why it ended a stream (README "Endings"): "drain" (it
 * is going away) is reconnected with the backoff, as a lost connection;
 * "kicked" and "replaced" end the connection for good (onend, status
 * "ended"); "expired" (the token) reconnects only when a token callback
 * can give a fresh one, else ends it too.
 *
 * Every transport is one function below that turns the server's wire
 * format into calls on a small context (opened, message, gap, failed); the
 * core (connect) owns the last id, fallback, backoff and duplicates. */
(function (global) {
  'use strict';

  var SUBPROTOCOL = 'ws+meta.httpdcnode';
  /* The server's close codes for a stream it ended on purpose. */
  var WS_ENDINGS = { 1012: 'drain', 4001: 'kicked', 4002: 'replaced', 4003: 'expired' };
  var ORDER = ['ws', 'sse', 'poll'];
  /* Reconnect waits: full jitter, see backoffDelay. */
  var BACKOFF_BASE_MS = 500;
  var BACKOFF_CAP_MS = 20000;
  /* A connection that held this long (or brought a message) was healthy:
   * the next one starts the backoff afresh. */
  var HEALTHY_MS = 10000;
  /* Failures in a row, without opening, before a transport that worked
   * before is given up for the next one. */
  var RETRIES_BEFORE_FALLBACK = 3;
  /* Long-poll: an empty answer sooner than this waits the rest, so that a
   * server answering at once cannot make the loop spin. */
  var POLL_MIN_MS = 1000;

  /* "EPOCH:SEQ" (8 hex digits, a decimal) -> {epoch, seq}; null if not one. */
  function parseId(id) {
    var m = /^([0-9a-fA-F]{8}):([0-9]+)$/.exec(id || '');
    return m ? { epoch: m[1].toLowerCase(), seq: Number(m[2]) } : null;
  }

  var TOPIC = /^[A-Za-z0-9_.:\/-]{1,64}$/;

  /* A topic's message id "NAME@EPOCH:SEQ" -> {topic, id}; a uid's id -> {topic: null, id}. */
  function splitId(id) {
    var at = (id || '').lastIndexOf('@');
    return at < 0 ? { topic: null, id: id } : { topic: id.slice(0, at), id: id.slice(at + 1) };
  }

  /* The URL of path on the server at base (a path prefix in base is kept),
   * with the caller's query (a subscriber token), ?since=ID when an id
   * is known and the extra parameters; ws/wss for WebSocket. */
  function endpoint(base, path, query, since, websocket, extra, topics) {
    var b = new URL(base || '/', global.location ? global.location.href : undefined);
    var u = new URL(b.origin + b.pathname.replace(/\/+$/, '') + path);
    new URLSearchParams(query || '').forEach(function (v, k) { u.searchParams.set(k, v); });
    if (since) u.searchParams.set('since', since);
    if (topics) u.searchParams.set('topics', topics);
    for (var k in extra || {}) u.searchParams.set(k, extra[k]);
    if (websocket) u.protocol = b.protocol === 'https:' ? 'wss:' : 'ws:';
    return u.toString();
  }

  /* base64 -> Uint8Array; the text of bytes, as EventSource decodes. */
  function base64Bytes(b64) {
    var bin = global.atob(b64), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return bytes;
  }

  function bytesText(bytes) { return new TextDecoder().decode(bytes); }

  function parseGap(json) {
    var g = JSON.parse(json);
    return { last: g.last === undefined ? null : g.last, first: g.first === undefined ? null : g.first,
             next: g.next, topic: g.topic };
  }

  /* What the server says of a topic: {"topic":NAME[,"reason":WHY]}. */
  function topicEvent(ctx, event, json) {
    try { var t = JSON.parse(json); } catch (err) { return ctx.error('unreadable ' + event + ' event'); }
    ctx.topicEvent(event, t.topic, t.reason, t.id);
  }

  /* ---- WebSocket: GET /ws/N?since=ID, subprotocol ws+meta.httpdcnode.
   * Each frame is header lines ("id: EPOCH:SEQ"), a blank line, then the
   * payload; a gap is a frame with the header "event: gap" and the gap's
   * JSON as payload. A binary frame (a binary message) is split at its
   * first two \n bytes, its payload kept as bytes. */
  function parseMetaFrame(text) {
    var end = text.indexOf('\n\n');
    if (end < 0) return null;
    var headers = {};
    text.slice(0, end).split('\n').forEach(function (line) {
      var i = line.indexOf(':');
      if (i > 0) headers[line.slice(0, i)] = line.slice(i + 1).replace(/^ /, '');
    });
    return { headers: headers, body: text.slice(end + 2) };
  }

  function parseBinaryFrame(buf) {
    var u8 = new Uint8Array(buf);
    for (var i = 0; i + 1 < u8.length; i++) {
      if (u8[i] !== 10 || u8[i + 1] !== 10) continue;
      var f = parseMetaFrame(bytesText(u8.subarray(0, i + 2)));
      f.bytes = u8.slice(i + 2);
      f.body = bytesText(f.bytes);
      return f;
    }
    return null;
  }

  function wsTransport(ctx) {
    if (typeof global.WebSocket !== 'function') return ctx.failed('WebSocket not supported here');
    var ws = new global.WebSocket(ctx.url('/ws/' + ctx.uid, true), SUBPROTOCOL);
    var done = false;
    ws.binaryType = 'arraybuffer';
    ws.onopen = function () {
      if (ws.protocol !== SUBPROTOCOL) {
        done = true;
        ws.close(1000);
        return ctx.failed('the server did not take subprotocol ' + SUBPROTOCOL);
      }
      ctx.opened();
    };
    ws.onmessage = function (e) {
      var f = typeof e.data === 'string' ? parseMetaFrame(e.data) : parseBinaryFrame(e.data);
      if (!f) return ctx.error('a WebSocket frame without its id header');
      if (f.headers.event === 'gap') {
        try { var g = parseGap(f.body); } catch (err) { return ctx.error('unreadable gap frame'); }
        return ctx.gap(g.last, g.first, g.next, g.topic);
      }
      if (f.headers.event === 'conn') return ctx.reply(f.body, f.bytes);
      if (/^(joined|refused|left)$/.test(f.headers.event || ''))
        return topicEvent(ctx, f.headers.event, f.body);
      ctx.message(f.headers.id, f.body, f.bytes);
    };
    ws.onclose = function (e) {
      if (done) return;
      done = true;
      var why = 'closed (code ' + e.code + (e.reason ? ', ' + e.reason : '') + ')';
      if (WS_ENDINGS[e.code]) return ctx.ended(WS_ENDINGS[e.code], why);
      ctx.failed(why);
    };
    return {
      stop: function () { done = true; ws.close(1000); },
      /* To the server's --inbox process, in order; false when not open. */
      send: function (data) {
        if (done || ws.readyState !== 1) return false;
        ws.send(data);
        return true;
      },
      /* A topic joined (since: the last id seen there) or left, by a
       * message of its own; false when not open. */
      join: function (topic, since) {
        return this.send('event: join\n\n' + topic + (since ? '@' + since : ''));
      },
      leave: function (topic) { return this.send('event: leave\n\n' + topic); }
    };
  }

  /* ---- Server-Sent Events: GET /sse/N?since=ID. EventSource would
   * reconnect by itself after the server's retry: advice, never backing
   * off; it is closed at its first error instead, and the core
   * reconnects with its backoff and ?since= the last id, as for the other
   * transports. A binary message is the event "base64", its data the
   * payload's base64. Opened with ?conn=1: the first event,
   * "conn", gives the stream's id for POST /send/N?conn=ID, and Erlang's
   * replies to it come as "reply" (or "reply_base64"), without id. */
  function sseTransport(ctx) {
    if (typeof global.EventSource !== 'function') return ctx.failed('EventSource not supported here');
    var es = new global.EventSource(ctx.url('/sse/' + ctx.uid, false, { conn: '1' }));
    var connId = null;
    es.addEventListener('conn', function (e) {
      try { connId = String(JSON.parse(e.data).conn); } catch (err) { ctx.error('unreadable conn event'); }
    });
    es.addEventListener('reply', function (e) { ctx.reply(e.data); });
    es.addEventListener('reply_base64', function (e) {
      try { var b = base64Bytes(e.data); } catch (err) { return ctx.error('unreadable reply_base64 event'); }
      ctx.reply(bytesText(b), b);
    });
    es.onopen = function () { ctx.opened(); };
    es.onmessage = function (e) { ctx.message(e.lastEventId, e.data); };
    es.addEventListener('base64', function (e) {
      try { var b = base64Bytes(e.data); } catch (err) { return ctx.error('unreadable base64 event'); }
      ctx.message(e.lastEventId, bytesText(b), b);
    });
    es.addEventListener('gap', function (e) {
      try { var g = parseGap(e.data); } catch (err) { return ctx.error('unreadable gap event'); }
      ctx.gap(g.last, g.first, g.next, g.topic);
    });
    ['joined', 'refused', 'left'].forEach(function (ev) {
      es.addEventListener(ev, function (e) { topicEvent(ctx, ev, e.data); });
    });
    /* The server's last event when it ends the stream on purpose. */
    var reason = null;
    es.addEventListener('end', function (e) {
      try { reason = JSON.parse(e.data).reason || 'drain'; } catch (err) { reason = 'drain'; }
    });
    es.onerror = function () {
      var ended = es.readyState === global.EventSource.CONNECTING && ctx.hasOpened();
      es.close();
      if (reason) return ctx.ended(reason, 'stream ended (' + reason + ')');
      ctx.failed(ended ? 'stream ended' : ctx.hasOpened() ? 'stream refused' : 'could not open the stream');
    };
    /* A topic joined or left by POST /send/N?conn=ID (this stream); false
     * before its id came. */
    function control(body) {
      if (!connId) return false;
      ctx.post(body, connId).catch(function (err) { ctx.error('topic: ' + err.message); });
      return true;
    }
    return {
      stop: function () { es.close(); },
      /* The id POST /send/N?conn= names this stream by; null before it came. */
      conn: function () { return connId; },
      join: function (topic, since) {
        return control('event: join\n\n' + topic + (since ? '@' + since : ''));
      },
      leave: function (topic) { return control('event: leave\n\n' + topic); }
    };
  }

  /* ---- Long-poll: GET /poll/N?since=ID&topics=T@ID answers
   * {"messages":[{"id":ID,"data":TEXT},...], "gap":BOOL, "first":ID?, "next":ID,
   *  "topics":{T:ID,...}}
   * at once when something is newer, else when it comes or the server's
   * --poll-timeout passes (then with no messages). A binary message comes
   * as "data_base64"; a topic's message has its "topic", a topic's gap is
   * an entry {"gap":{"topic":T,...}} where it happened. */
  function applyPollAnswer(ctx, answer) {
    var messages = answer.messages || [];
    if (answer.gap) {
      var first = answer.first !== undefined ? answer.first : messages.length ? messages[0].id : null;
      ctx.gap(ctx.since(), first, answer.next);
    }
    messages.forEach(function (m) {
      if (m.gap) return ctx.gap(m.gap.last, m.gap.first, m.gap.next, m.gap.topic);
      var id = m.topic ? m.topic + '@' + m.id : m.id;
      if (m.data !== undefined) return ctx.message(id, m.data);
      var b = base64Bytes(m.data_base64 || '');
      ctx.message(id, bytesText(b), b);
    });
    for (var t in answer.topics || {}) ctx.topicAt(t, answer.topics[t]);
    return messages.length;
  }

  function pollTransport(ctx) {
    if (typeof global.fetch !== 'function') return ctx.failed('fetch not supported here');
    var stopped = false, abort = null, timer = null;
    function poll() {
      timer = null;
      abort = new AbortController();
      var started = Date.now();
      global.fetch(ctx.url('/poll/' + ctx.uid, false), { cache: 'no-store', signal: abort.signal })
        .then(function (res) {
          if (!res.ok) throw new Error('HTTP ' + res.status);
          /* The head comes at once, also when the poll waits: from here
           * the server keeps what comes for this poll or the next. */
          if (!stopped && !ctx.hasOpened()) ctx.opened();
          return res.json();
        })
        .then(function (answer) {
          if (stopped) return;
          var n = applyPollAnswer(ctx, answer);
          if (answer.ended) {           /* "drain", "kicked", ...; true from older servers */
            stopped = true;
            var reason = typeof answer.ended === 'string' ? answer.ended : 'drain';
            return ctx.ended(reason, 'poll ended (' + reason + ')');
          }
          var wait = n ? 0 : Math.max(0, POLL_MIN_MS - (Date.now() - started));
          if (!stopped) timer = setTimeout(poll, wait);
        })
        .catch(function (err) {
          if (stopped) return;
          stopped = true;
          ctx.failed(String((err && err.message) || err));
        });
    }
    poll();
    return {
      stop: function () {
        stopped = true;
        if (timer) clearTimeout(timer);
        if (abort) abort.abort();
      }
    };
  }

  /* A refused conn.send: .reason (see the header comment), .status. */
  function sendError(reason, status, detail) {
    var e = new Error('httpdcnode send: ' + reason + (detail ? ' (' + detail + ')' : ''));
    e.reason = reason;
    e.status = status;
    return e;
  }

  var TRANSPORTS = { ws: wsTransport, sse: sseTransport, poll: pollTransport };

  /* Full jitter: a random wait in [0, min(cap, base * 2^n)], n the
   * failures in a row. Clients that lost the server at the same moment
   * (it restarted) come back spread over the whole window rather than in
   * waves, and each one's waits still grow while the server stays away. */
  function backoffDelay(base, cap, n) {
    return Math.round(Math.random() * Math.min(cap, base * Math.pow(2, n)));
  }

  function positiveMs(v, dflt, name) {
    if (v === undefined || v === null) return dflt;
    if (typeof v !== 'number' || !(v > 0) || !isFinite(v))
      throw new Error('httpdcnode: ' + name + ' must be a positive number of ms, not "' + v + '"');
    return v;
  }

  function transportOrder(t) {
    var order = t === undefined || t === null ? ORDER : typeof t === 'string' ? t.split(',') : t;
    if (!order.length) throw new Error('httpdcnode: transports is empty');
    order.forEach(function (name) {
      if (!TRANSPORTS[name]) throw new Error('httpdcnode: unknown transport "' + name + '" (ws, sse, poll)');
    });
    return order.slice();
  }

  /* ---- The core. */
  function connect(url, uid, opts) {
    opts = opts || {};
    if (!/^[1-9][0-9]*$/.test(String(uid)))
      throw new Error('httpdcnode: the uid must be a positive integer, not "' + uid + '"');
    var order = transportOrder(opts.transports);
    var backoffBase = positiveMs(opts.backoffBase, BACKOFF_BASE_MS, 'backoffBase');
    var backoffCap = positiveMs(opts.backoffCap, BACKOFF_CAP_MS, 'backoffCap');
    var lastId = opts.since || null, last = parseId(lastId);
    var idx = 0, current = null, currentCtx = null, timer = null, closed = false;
    /* name -> {onmessage, lastId, last}: the topics subscribed, with the
     * last id seen in each (a topic's own), named on every connect. */
    var topics = {};
    var attempts = 0;          /* failures in a row since a healthy connection: n */
    var token = null;          /* the query the token callback gave for this connect */
    var streak = 0;            /* transports tried in a row without one opening */
    var worked = {}, failures = {};

    function call(fn, arg) { if (typeof fn === 'function') fn(arg); }
    function status(state, detail, extra) {
      var s = { state: state, transport: order[idx], detail: detail || '', lastId: lastId };
      for (var k in extra || {}) s[k] = extra[k];
      call(opts.onstatus, s);
    }

    function deliver(id, data, bytes) {
      var s = splitId(id), t = s.topic !== null ? topic(s.topic) : null;
      var p = parseId(s.id), seen = t ? t.last : last;
      if (p && seen && p.epoch === seen.epoch && p.seq <= seen.seq)
        return status('duplicate', id + ' was seen already: not shown again');
      if (p && t) { t.last = p; t.lastId = s.id; }
      else if (p) { last = p; lastId = id; }
      attempts = 0;
      var m = bytes ? { id: s.id, data: data, bytes: bytes } : { id: s.id, data: data };
      if (t) m.topic = s.topic;
      call(t && t.onmessage ? t.onmessage : opts.onmessage, m);
    }

    /* The topic's entry, made when the server names one this side did not
     * ask for (the application subscribed the connection). */
    function topic(name) {
      return topics[name] || (topics[name] = { onmessage: null, lastId: null, last: null });
    }

    /* ?topics=: each topic, with the last id seen there. */
    function topicsQuery() {
      return Object.keys(topics).map(function (t) {
        return topics[t].lastId ? t + '@' + topics[t].lastId : t;
      }).join(',');
    }

    /* The connection again, now (not after a backoff): a stream that
     * cannot join by message names its topics when it opens. */
    function reopen() {
      if (closed || timer || !current) return;
      currentCtx.live = false;
      current.stop();
      current = null;
      start();
    }

    /* The caller's query and the token: what every request carries. */
    function fullQuery() {
      var query = typeof opts.query === 'function' ? opts.query() : opts.query;
      return token ? (query ? query + '&' + token : token) : query;
    }

    /* data as POST /send/N: see send in the header comment (conn: the
     * stream it names, else the current one's). */
    function post(data, conn) {
      if (typeof global.fetch !== 'function') return Promise.reject(sendError('network', 0, 'fetch not supported here'));
      var id = conn || (current && typeof current.conn === 'function' ? current.conn() : null);
      var target = endpoint(url, '/send/' + uid, fullQuery(), null, false, id ? { conn: id } : null);
      var type = typeof data === 'string' ? 'text/plain;charset=UTF-8' : 'application/octet-stream';
      return global.fetch(target, { method: 'POST', body: data, cache: 'no-store',
                                    headers: { 'Content-Type': type } })
        .then(function (res) {
          if (res.status === 202) return undefined;
          var reason = { 413: 'too_big', 429: 'rate', 503: 'busy' }[res.status] || 'refused';
          return res.text().catch(function () { return ''; }).then(function (text) {
            throw sendError(reason, res.status, text || 'HTTP ' + res.status);
          });
        }, function (err) {
          throw sendError('network', 0, String((err && err.message) || err));
        });
    }

    /* Asks the token callback first, when there is one. */
    function start() {
      timer = null;
      if (typeof opts.token !== 'function') return launch();
      var ctx = currentCtx = context(order[idx]);
      new Promise(function (ok) { ok(opts.token()); }).then(function (q) {
        if (closed || currentCtx !== ctx) return;
        token = q === undefined || q === null ? null : String(q);
        launch();
      }, function (err) {
        ctx.failed('no token: ' + String((err && err.message) || err));
      });
    }

    function launch() {
      var name = order[idx];
      var ctx = currentCtx = context(name);
      status(worked[name] ? 'reconnecting' : 'connecting', lastId ? 'since ' + lastId : 'from now on');
      try {
        current = TRANSPORTS[name](ctx) || null;
      } catch (err) {
        ctx.failed(String((err && err.message) || err));
      }
      if (!ctx.live) current = null;
    }

    /* What a transport may call; calls from one already replaced are ignored. */
    function context(name) {
      var opened = false, openedAt = 0;
      var ctx = {
        live: true,
        uid: uid,
        url: function (path, websocket, extra) {
          return endpoint(url, path, fullQuery(), lastId, websocket, extra, topicsQuery());
        },
        since: function () { return lastId; },
        hasOpened: function () { return opened; },
        opened: function () {
          if (!ctx.live) return;
          opened = true;
          openedAt = Date.now();
          worked[name] = true;
          failures[name] = 0;
          streak = 0;
          status('open', lastId ? 'resumed after ' + lastId : '');
        },
        message: function (id, data, bytes) { if (ctx.live) deliver(id, data, bytes); },
        post: function (data, conn) { return post(data, conn); },
        /* {conn, Conn, Data} from Erlang: to this connection alone, no id. */
        reply: function (data, bytes) { if (ctx.live) call(opts.onreply, { data: data, bytes: bytes }); },
        gap: function (l, f, next, t) {
          if (!ctx.live) return;
          /* Come back from the gap's next id: else every reconnect would
           * be told the same gap again. */
          var p = parseId(next);
          if (p && t) { topic(t).last = p; topics[t].lastId = next; }
          else if (p) { last = p; lastId = next; }
          status('gap', (t ? t + ': ' : '') + 'missed after ' + l + '; kept from ' + f);
          call(opts.ongap, t ? { topic: t, last: l, first: f } : { last: l, first: f });
        },
        /* A long-poll answer says where a topic stands. */
        topicAt: function (t, id) {
          var p = parseId(id);
          if (ctx.live && p && topics[t]) { topics[t].last = p; topics[t].lastId = id; }
        },
        topicEvent: function (event, t, reason, id) {
          if (!ctx.live) return;
          /* Joined from now: where it stands, to resume from should the
           * connection drop before a message of it came. */
          var p = event === 'joined' ? parseId(id) : null;
          if (event === 'joined' && !topic(t).lastId && p) { topics[t].last = p; topics[t].lastId = id; }
          else if (event === 'refused' || event === 'left') delete topics[t];
          call(opts.ontopic, reason ? { topic: t, event: event, reason: reason }
                                    : { topic: t, event: event });
        },
        error: function (why) { if (ctx.live) status('error', why); },
        /* The server ended the stream on purpose, saying why. */
        ended: function (reason, why) {
          if (!ctx.live) return;
          var again = reason === 'drain' || (reason === 'expired' && typeof opts.token === 'function');
          if (again) return ctx.failed(why);
          ctx.live = false;
          current = null;
          if (closed) return;
          closed = true;
          status('ended', reason);
          call(opts.onend, { reason: reason });
        },
        failed: function (why) {
          if (!ctx.live) return;
          ctx.live = false;
          current = null;
          if (openedAt && Date.now() - openedAt >= HEALTHY_MS) attempts = 0;
          lost(name, why, opened);
        }
      };
      return ctx;
    }

    /* A connection dropped or failed. A transport given up (it did not
     * open: once, or RETRIES_BEFORE_FALLBACK times if it worked before)
     * hands over to the next one at once, until each was tried in a row;
     * every other retry waits backoffDelay. */
    function lost(name, why, opened) {
      if (closed) return;
      if (!opened) failures[name] = (failures[name] || 0) + 1;
      var giveUp = order.length > 1 && !opened &&
        failures[name] >= (worked[name] ? RETRIES_BEFORE_FALLBACK : 1);
      if (giveUp) {
        failures[name] = 0;
        idx = (idx + 1) % order.length;
        streak++;
        status('fallback', name + ': ' + why + '; trying ' + order[idx]);
        if (streak < order.length) {
          timer = setTimeout(start, 0);
          return;
        }
        streak = 0;
      } else {
        status('lost', name + ': ' + why);
      }
      var n = attempts;
      if (attempts < 64) attempts++;          /* 2^n stays finite; the cap rules long before */
      var d = backoffDelay(backoffBase, backoffCap, n);
      status('waiting', 'next try in ' + d + ' ms', { delay: d, attempt: n });
      timer = setTimeout(start, d);
    }

    start();
    return {
      close: function () {
        if (closed) return;
        closed = true;
        if (timer) clearTimeout(timer);
        timer = null;
        if (currentCtx) currentCtx.live = false;
        if (current) current.stop();
        current = null;
        status('closed', '');
      },
      /* data to the server's --inbox process: over the open WebSocket,
       * else POST /send/N (see the header comment). */
      send: function (data) {
        var ok = current && typeof current.send === 'function' && current.send(data);
        return ok ? Promise.resolve() : post(data);
      },
      /* Topic: see the header comment. */
      subscribe: function (name, onmessage) {
        if (!TOPIC.test(String(name)))
          throw new Error('httpdcnode: a topic is 1 to 64 of A-Z a-z 0-9 _ - . : /, not "' + name + '"');
        var t = topic(name), fresh = !t.joining;
        t.onmessage = typeof onmessage === 'function' ? onmessage : null;
        t.joining = true;
        if (!fresh) return;
        if (!(current && typeof current.join === 'function' && current.join(name, t.lastId))) reopen();
      },
      unsubscribe: function (name) {
        if (!topics[name]) return;
        delete topics[name];
        if (current && typeof current.leave === 'function' && current.leave(name)) return;
        reopen();                 /* the new stream does not name it: left, told here */
        call(opts.ontopic, { topic: name, event: 'left' });
      },
            get transport() { return order[idx]; },
      get lastId() { return lastId; }
    };
  }

  global.httpdcnode = {
    connect: connect,
    /* For tests and for whoever adapts a transport. */
    parseId: parseId,
    parseMetaFrame: parseMetaFrame,
    splitId: splitId,
    transports: ORDER.slice()
  };
})(typeof window !== 'undefined' ? window : this);
