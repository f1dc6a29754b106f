// A strict WebSocket client (npm "ws") on URL, for the integration tests:
// it fails the connection on any framing error of the server. One JSON
// line on stdout per thing it sees; binary messages as base64. Optional
// second argument: the subprotocol to ask for. With WS_CLIENT_INSECURE=1 in
// its environment, a wss:// server's certificate is not checked (a test's
// self-signed one). It ends when its stdin closes (the test is over) or
// after 120 s.
import WebSocket from 'ws';

const [url, protocol] = process.argv.slice(2);
const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const opts = process.env.WS_CLIENT_INSECURE === '1' ? { rejectUnauthorized: false } : {};
const ws = protocol ? new WebSocket(url, protocol, opts) : new WebSocket(url, opts);

ws.on('open', () => say({ ev: 'open', protocol: ws.protocol }));
ws.on('message', (data, isBinary) =>
  say(isBinary ? { ev: 'message', binary: true, data: data.toString('base64') }
               : { ev: 'message', binary: false, data: data.toString('utf8') }));
ws.on('ping', () => say({ ev: 'ping' }));
ws.on('close', (code, reason) => say({ ev: 'close', code, reason: reason.toString() }));
ws.on('error', (e) => say({ ev: 'error', message: e.message }));

const end = () => { ws.terminate(); process.exit(0); };
process.stdin.on('end', end);
process.stdin.resume();
setTimeout(end, 120000);
