// The demo page in a real browser, for the integration tests: opens URL in
// headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core)
// with a fresh profile, and says on stdout, one JSON line each:
//   {"ev":"browser","pid":P,"profile":DIR}  the browser process, at once
//   {"ev":"ready"}                          the page is loaded and watched
//   {"ev":"message","id":ID,"data":TEXT}    a row the page added to its messages
//   {"ev":"log","kind":K,"text":TEXT}       a row the page added to its log
//   {"ev":"pageerror"|"console","text":T}   a script error in the page
//   {"ev":"dump","messages":[...],"log":[...]}  the answer to "dump"
//   {"ev":"screenshot","path":PATH}         the answer to "screenshot PATH"
//   {"ev":"fatal","text":T}                 then it exits 1
// and for the connections the page opens on "connect" (tagged TAG):
//   {"ev":"msg","tag":TAG,"id":ID,"data":TEXT,"hex":HEX|null}  m.bytes in hex
//   {"ev":"status","tag":TAG,"state":S,"detail":D,"delay":MS,"attempt":N}
//   {"ev":"reply","tag":TAG,"data":TEXT}    onreply: {conn, Conn, Data} from Erlang
//   {"ev":"sent","tag":TAG,"ok":B,"reason":R,"status":N}  the end of a "send"
// Commands on stdin, a line each: "dump", "screenshot PATH", "quit",
// "send TAG TEXT" (conn.send(TEXT) of that connection),
// "connect TAG TRANSPORTS UID [OPTIONS-JSON]" (httpdcnode.connect in the
// page, the options added to the callbacks; "tokens":[Q1, Q2, ...] becomes
// a token callback giving Q1, then Q2, ..., the last one from then on, each
// as a Promise). When stdin closes (the test
// is over, or its node died), or after 300 s, it closes the browser and
// exits.
import { say, end, fatal, endOnClose, launch } from './chromium_page.mjs';

const url = process.argv[2];

// Runs in the page: every row of #messages and #log, the present ones
// first, then each one as it is added (one observer: rows of both lists
// come in the order the page added them).
function watchPage() {
  const describe = (li) => li.parentNode.id === 'messages'
    ? { ev: 'message', id: li.dataset.id, data: li.querySelector('.data').textContent }
    : { ev: 'log', kind: li.dataset.kind, text: li.querySelector('.data').textContent };
  const lists = ['messages', 'log'].map((id) => document.getElementById(id));
  for (const list of lists) for (const li of list.children) window.__report(describe(li));
  const observer = new MutationObserver((records) => records.forEach(
    (r) => r.addedNodes.forEach((li) => window.__report(describe(li)))));
  for (const list of lists) observer.observe(list, { childList: true });
}

function dumpPage() {
  const rows = (id) => Array.from(document.getElementById(id).children);
  return {
    messages: rows('messages').map((li) => ({ id: li.dataset.id, data: li.querySelector('.data').textContent })),
    log: rows('log').map((li) => ({ kind: li.dataset.kind, text: li.querySelector('.data').textContent })),
  };
}

// Runs in the page: a connection of the page's own client, each callback
// reported with the tag.
function connectInPage([tag, transports, uid, opts]) {
  const hex = (b) => (b ? Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('') : null);
  window.__conns = window.__conns || {};
  if (opts.tokens) {
    const left = opts.tokens.slice();
    opts = Object.assign({}, opts, {
      token: () => new Promise((ok) => setTimeout(() => ok(left.length > 1 ? left.shift() : left[0]), 10)),
    });
    delete opts.tokens;
  }
  window.__conns[tag] = httpdcnode.connect(location.origin, uid, Object.assign({}, opts, {
    transports,
    onmessage: (m) => window.__report({ ev: 'msg', tag, id: m.id, data: m.data, hex: hex(m.bytes) }),
    onstatus: (s) => window.__report({ ev: 'status', tag, state: s.state, detail: s.detail,
                                       delay: s.delay, attempt: s.attempt }),
    onreply: (r) => window.__report({ ev: 'reply', tag, data: r.data }),
  }));
}

async function command(page, line) {
  const [cmd, ...rest] = line.trim().split(' ');
  if (cmd === 'quit') return end(0);
  if (cmd === 'connect') {
    const [tag, transports, uid, ...json] = rest;
    return page.evaluate(connectInPage, [tag, transports, uid, JSON.parse(json.join(' ') || '{}')]);
  }
  if (cmd === 'send') {
    const [tag, ...text] = rest;
    return say({ ev: 'sent', tag, ...(await page.evaluate(([t, d]) => window.__conns[t].send(d).then(
      () => ({ ok: true }), (e) => ({ ok: false, reason: e.reason, status: e.status })), [tag, text.join(' ')])) });
  }
  if (cmd === 'dump') return say({ ev: 'dump', ...(await page.evaluate(dumpPage)) });
  if (cmd === 'screenshot') {
    await page.screenshot({ path: rest.join(' ') });
    return say({ ev: 'screenshot', path: rest.join(' ') });
  }
  if (cmd) say({ ev: 'fatal', text: 'unknown command: ' + cmd });
}

async function main() {
  const input = endOnClose(300);
  const { page } = await launch([], { viewport: { width: 1000, height: 380 } });
  page.on('console', (m) => { if (m.type() === 'error') say({ ev: 'console', text: m.text() }); });
  await page.exposeFunction('__report', (o) => say(o));
  await page.goto(url);
  await page.evaluate(watchPage);
  say({ ev: 'ready' });
  // One command at a time, in order.
  let queue = Promise.resolve();
  input.on('line', (line) => {
    queue = queue.then(() => command(page, line)).catch((e) => fatal(String(e)));
  });
}

main().catch((e) => fatal(String((e && e.stack) || e)));
