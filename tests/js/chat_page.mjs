// The demo page's chat in a real browser, for tests/erlang/client/chat_browser_tests:
// headless Chromium (chromium_page.mjs) with several tabs of the page, each
// under a tag, driven through its form as a user would. Says on stdout, one
// JSON line each:
//   {"ev":"browser","pid":P,"profile":DIR}   the browser process, at once
//   {"ev":"started"}                         commands are read from now on
//   {"ev":"ready","tag":TAG}                 the tab is loaded and watched
//   {"ev":"chat","tag":TAG,"kind":K,"uid":U,"room":R,"text":T}
//                                            a row the tab added to #chat
//                                            (kind line, mine, joined, left, error, reply)
//   {"ev":"log","tag":TAG,"kind":K,"text":T} a row the tab added to its log
//   {"ev":"dump","tag":TAG,"chat":[...],"hint":H}  the answer to "dump TAG": #chat now,
//                                            each row {kind, uid, room, who, text};
//                                            the footer's hint (#hint) text
//   {"ev":"pageerror"|"console","tag":TAG,"text":T}  a script error in a tab
//   {"ev":"fatal","text":T}                  then it exits 1
// Commands on stdin, a line each, run in order:
//   "open TAG URL"       a new tab on URL
//   "join TAG ROOM"      types ROOM into the room box, clicks Join
//   "room TAG ROOM"      types ROOM into the room box only
//   "say TAG TEXT..."    types TEXT (the rest of the line) into the text box, clicks Send
//   "dump TAG", "screenshot TAG PATH" (says {"ev":"screenshot","path":PATH}), "quit"
// When stdin closes (the test is over, or its node died), or after 300 s, it
// closes the browser and exits.
import { say, end, fatal, endOnClose, launch } from './chromium_page.mjs';

// Runs in the tab: every row of #chat and #log, each as it is added.
function watchTab(tag) {
  const describe = (li) => (li.parentNode.id === 'chat'
    ? { ev: 'chat', tag, kind: li.dataset.kind, uid: li.dataset.uid || null,
        room: li.dataset.room || null, text: li.querySelector('.data').textContent }
    : { ev: 'log', tag, kind: li.dataset.kind, text: li.querySelector('.data').textContent });
  const lists = ['chat', 'log'].map((id) => document.getElementById(id));
  for (const list of lists) for (const li of list.children) window.__report(describe(li));
  const observer = new MutationObserver((records) => records.forEach(
    (r) => r.addedNodes.forEach((li) => window.__report(describe(li)))));
  for (const list of lists) observer.observe(list, { childList: true });
}

function dumpChat() {
  return Array.from(document.getElementById('chat').children).map((li) => ({
    kind: li.dataset.kind, uid: li.dataset.uid || null, room: li.dataset.room || null,
    who: li.querySelector('.who').textContent, text: li.querySelector('.data').textContent,
  }));
}

const tabs = new Map();
let browser = null;

async function open(tag, url) {
  const page = tabs.size === 0 ? browser.page : await browser.context.newPage();
  tabs.set(tag, page);
  page.on('pageerror', (e) => say({ ev: 'pageerror', tag, text: String(e) }));
  page.on('console', (m) => { if (m.type() === 'error') say({ ev: 'console', tag, text: m.text() }); });
  await page.exposeFunction('__report', (o) => say(o));
  await page.goto(url);
  await page.evaluate(watchTab, tag);
  say({ ev: 'ready', tag });
}

function tab(tag) {
  const page = tabs.get(tag);
  if (!page) throw new Error('no tab ' + tag);
  return page;
}

async function command(line) {
  const [cmd, tag, ...rest] = line.trim().split(' ');
  if (cmd === 'quit') return end(0);
  if (cmd === 'open') return open(tag, rest[0]);
  if (cmd === 'join') {
    await tab(tag).fill('#room', rest.join(' '));
    return tab(tag).click('#join');
  }
  if (cmd === 'room') return tab(tag).fill('#room', rest.join(' '));
  if (cmd === 'say') {
    await tab(tag).fill('#text', rest.join(' '));
    return tab(tag).click('#say');
  }
  if (cmd === 'screenshot') {
    await tab(tag).screenshot({ path: rest.join(' ') });
    return say({ ev: 'screenshot', path: rest.join(' ') });
  }
  if (cmd === 'dump') {
    return say({ ev: 'dump', tag, chat: await tab(tag).evaluate(dumpChat),
                 hint: await tab(tag).textContent('#hint') });
  }
  if (cmd) say({ ev: 'fatal', text: 'unknown command: ' + cmd });
}

async function main() {
  const input = endOnClose(300);
  // One command at a time, in order; those that come while the browser
  // starts wait for it.
  let queue = launch([], { viewport: { width: 1000, height: 600 } }).then((b) => { browser = b; });
  input.on('line', (line) => {
    queue = queue.then(() => command(line)).catch((e) => fatal(String(e)));
  });
  await queue;
  say({ ev: 'started' });
}

main().catch((e) => fatal(String((e && e.stack) || e)));
