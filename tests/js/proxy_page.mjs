// Many EventSource streams from one page in a real browser, for the tests of
// the nginx front (tests/erlang/ops/proxy_tests.erl): opens URL (a page served
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
import { say, end, fatal, endOnClose, launch } from './chromium_page.mjs';

const [url, ...uids] = process.argv.slice(2);

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
  const input = endOnClose(120);
  input.on('line', (l) => { if (l.trim() === 'quit') end(0); });
  const { context, page } = await launch(['--ignore-certificate-errors'], { ignoreHTTPSErrors: true });
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

main().catch((e) => fatal(String((e && e.stack) || e)));
