// A strict WebSocket client (npm "ws") on URL, for the integration tests:
// it fails the connection on any framing error of the server. One JSON
// line on stdout per thing it sees; binary messages as base64. Optional
// second argument: the subprotocol to ask for. With WS_CLIENT_INSECURE=1 in
// its environment, a wss:// server's certificate is not checked (a test's
// self-signed one). It offers permessage-deflate (ws's default) and
// compresses what it sends of WS_CLIENT_DEFLATE_THRESHOLD bytes and more
// (ws's default: 1024); its open line says what the server agreed to
// ("extensions"). Lines on stdin: "send TEXT" sends a text message,
// "sendbin BASE64" a binary one. It ends when its stdin closes (the test
// is over) or after 120 s.
import WebSocket from 'ws';
import { createInterface } from 'node:readline';

const [url, protocol] = process.argv.slice(2);
const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const opts = process.env.WS_CLIENT_INSECURE === '1' ? { rejectUnauthorized: false } : {};
if (process.env.WS_CLIENT_DEFLATE_THRESHOLD) {
  opts.perMessageDeflate = { threshold: Number(process.env.WS_CLIENT_DEFLATE_THRESHOLD) };
}
const ws = protocol ? new WebSocket(url, protocol, opts) : new WebSocket(url, opts);

let extensions = null;                 // the server's Sec-WebSocket-Extensions, as it came
ws.on('upgrade', (res) => { extensions = res.headers['sec-websocket-extensions'] || null; });
ws.on('open', () => say({ ev: 'open', protocol: ws.protocol, extensions }));
ws.on('message', (data, isBinary) =>
  say(isBinary ? { ev: 'message', binary: true, data: data.toString('base64') }
               : { ev: 'message', binary: false, data: data.toString('utf8') }));
ws.on('ping', () => say({ ev: 'ping' }));
ws.on('close', (code, reason) => say({ ev: 'close', code, reason: reason.toString() }));
ws.on('error', (e) => say({ ev: 'error', message: e.message }));

const end = () => { ws.terminate(); process.exit(0); };
const input = createInterface({ input: process.stdin });
input.on('line', (line) => {
  const [cmd, ...rest] = line.split(' ');
  if (cmd === 'send') ws.send(rest.join(' '));
  else if (cmd === 'sendbin') ws.send(Buffer.from(rest.join(' '), 'base64'));
});
input.on('close', end);
setTimeout(end, 120000);
