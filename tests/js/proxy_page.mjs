// Many EventSource streams from one page in a real browser, for the tests of
// the nginx front (tests/erlang/proxy_tests.erl): opens URL (a page served
// through the proxy) in headless Chromium (Debian's /usr/bin/chromium, driven
// by playwright-core) with a fresh profile, taking the proxy's self-signed
// certificate, then one EventSource on /sse/UID for each UID given, all at
// once. One JSON line on stdout each:
//   {"ev":"browser","pid":P,"profile":DIR}   the browser process, at once
//   {"ev":"ready","protocol":P}              the page loaded, over P ("h2")
//   {"ev":"response","url":U,"protocol":P,"connection":C}  a response head as
//        Chromium's network layer saw it (CDP): the protocol, the connection id
//   {"ev":"open","uid":N} / {"ev":"error","uid":N,"state":S}
//   {"ev":"message","uid":N,"id":ID,"data":TEXT}
//   {"ev":"pageerror","text":T} / {"ev":"fatal","text":T} (then it exits 1)
// It ends (browser closed) when stdin closes or says "quit", or after 120 s.
import { chromium } from 'playwright-core';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const [url, ...uids] = process.argv.slice(2);
const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const profile = mkdtempSync(join(tmpdir(), 'httpdcnode-chromium-'));
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
              '--disable-background-networking', '--disable-component-update', '--disable-sync',
              '--ignore-certificate-errors'];
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

// Our child processes: the browser, whose pid the test notes so that it is
// ended even if this script is killed before it could close it.
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

// Runs in the page: every stream opened in the same turn, so that the
// browser has all of them pending at once.
function openStreams(list) {
  for (const uid of list) {
    const es = new EventSource('/sse/' + uid);
    es.onopen = () => window.__report({ ev: 'open', uid: Number(uid) });
    es.onmessage = (e) => window.__report({ ev: 'message', uid: Number(uid), id: e.lastEventId,
                                            data: e.data });
    es.onerror = () => window.__report({ ev: 'error', uid: Number(uid), state: es.readyState });
  }
}

async function main() {
  setTimeout(() => { say({ ev: 'fatal', text: 'still running after 120 s' }); end(1); }, 120000);
  const input = createInterface({ input: process.stdin });
  input.on('close', () => end(0));
  input.on('line', (l) => { if (l.trim() === 'quit') end(0); });
  context = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium', headless: true, args: ARGS, ignoreHTTPSErrors: true,
  });
  for (const pid of children()) say({ ev: 'browser', pid, profile });
  const page = context.pages()[0] || await context.newPage();
  page.on('pageerror', (e) => say({ ev: 'pageerror', text: String(e) }));
  const cdp = await context.newCDPSession(page);
  cdp.on('Network.responseReceived', ({ response: r }) =>
    say({ ev: 'response', url: r.url, protocol: r.protocol, connection: r.connectionId }));
  await cdp.send('Network.enable');
  await page.exposeFunction('__report', (o) => say(o));
  await page.goto(url);
  const protocol = await page.evaluate(() => performance.getEntriesByType('navigation')[0].nextHopProtocol);
  say({ ev: 'ready', protocol });
  await page.evaluate(openStreams, uids);
}

main().catch((e) => { say({ ev: 'fatal', text: String((e && e.stack) || e) }); end(1); });
