// A WHATWG-conformant EventSource (npm "eventsource") on URL, for the
// integration tests: one JSON line on stdout per thing it sees. It ends
// when its stdin closes (the test is over) or after 120 s.
import { EventSource } from 'eventsource';

const url = process.argv[2];
const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const es = new EventSource(url);

es.onopen = () => say({ ev: 'open' });
es.onmessage = (e) => say({ ev: 'message', id: e.lastEventId, data: e.data });
es.addEventListener('gap', (e) => say({ ev: 'gap', id: e.lastEventId, data: JSON.parse(e.data) }));
es.onerror = () => say({ ev: 'error', readyState: es.readyState });

const end = () => { es.close(); process.exit(0); };
process.stdin.on('end', end);
process.stdin.resume();
setTimeout(end, 120000);
