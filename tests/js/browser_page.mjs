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
// Commands on stdin, a line each: "dump", "screenshot PATH", "quit",
// "connect TAG TRANSPORTS UID [OPTIONS-JSON]" (httpdcnode.connect in the
// page, the options added to the callbacks; "tokens":[Q1, Q2, ...] becomes
// a token callback giving Q1, then Q2, ..., the last one from then on, each
// as a Promise). When stdin closes (the test
// is over, or its node died), or after 300 s, it closes the browser and
// exits.
import { chromium } from 'playwright-core';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const url = process.argv[2];
const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const profile = mkdtempSync(join(tmpdir(), 'httpdcnode-chromium-'));
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
              '--disable-background-networking', '--disable-component-update', '--disable-sync'];
let context = null;
let ending = false;

async function end(code) {
  if (ending) return;
  ending = true;
  try {
    if (context) await context.close();
  } catch (e) {
    say({ ev: 'fatal', text: 'closing the browser: ' + e.message });
  }
  rmSync(profile, { recursive: true, force: true });
  process.exit(code);
}

async function fatal(text) {
  say({ ev: 'fatal', text });
  await end(1);
}

// Our child processes: the browser (the test notes its pid, so that it is
// ended even if this script is killed before it could close it).
function children() {
  const pids = [];
  for (const d of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === process.pid) pids.push(Number(d));
    } catch { /* gone meanwhile */ }
  }
  return pids;
}

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
  }));
}

async function command(page, line) {
  const [cmd, ...rest] = line.trim().split(' ');
  if (cmd === 'quit') return end(0);
  if (cmd === 'connect') {
    const [tag, transports, uid, ...json] = rest;
    return page.evaluate(connectInPage, [tag, transports, uid, JSON.parse(json.join(' ') || '{}')]);
  }
  if (cmd === 'dump') return say({ ev: 'dump', ...(await page.evaluate(dumpPage)) });
  if (cmd === 'screenshot') {
    await page.screenshot({ path: rest.join(' ') });
    return say({ ev: 'screenshot', path: rest.join(' ') });
  }
  if (cmd) say({ ev: 'fatal', text: 'unknown command: ' + cmd });
}

async function main() {
  setTimeout(() => fatal('still running after 300 s'), 300000);
  const input = createInterface({ input: process.stdin });
  input.on('close', () => end(0));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium', headless: true, args: ARGS,
    viewport: { width: 1000, height: 380 },
  });
  for (const pid of children()) say({ ev: 'browser', pid, profile });
  const page = context.pages()[0] || await context.newPage();
  page.on('pageerror', (e) => say({ ev: 'pageerror', text: String(e) }));
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
