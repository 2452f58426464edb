import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { cardsFor } from '../src/mock-api/data.js';

// The benchmark's API: every pipeline talks to this one process, which answers as cheaply as a
// node:http server can, so that the API's CPU per subscriber is the same whoever asks. Each answer
// is the mock API's (`cards-sync mock-api --cards-per-subscriber k`): status 200, `content-type:
// application/json`, the body JSON.stringify(cardsFor(id)) byte for byte. It is serialised once
// (subscribers 1..n before listening, any other id on first ask), so a request costs a header
// check, a map lookup and one write. Unlike the mock API it sends a Content-Length instead of a
// chunked body and no Date header; the client reads neither.
//
//   node dist-bench/bench/raw-api.js --key K --cards 5 --subscribers 20000 [--port 0]
// prints `raw API listening on http://127.0.0.1:<port>` once it listens.

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    key: { type: 'string' },
    cards: { type: 'string', default: '5' },
    subscribers: { type: 'string', default: '0' },
  },
});
const cardsPerSubscriber = Number(values.cards);
const authorization = `Apikey ${values.key}`;
/** The path of an id lookup in the client's default (`standard`) style, up to the id. */
const PREFIX = '/api/saved-cards/subscriber/';

interface Answer {
  status: number;
  headers: string[];
  body: Buffer;
}

function answer(status: number, contentType: string, text: string): Answer {
  const body = Buffer.from(text);
  return { status, headers: ['content-type', contentType, 'content-length', String(body.length)], body };
}

// The mock API's error answers (src/mock-api/server.ts), in case the set-up is wrong.
const problem = (status: number, title: string, detail: string) =>
  answer(status, 'application/problem+json', JSON.stringify({ title, status, detail }));
const UNAUTHORIZED = problem(401, 'Unauthorized', 'missing or unknown API key');
const NO_ROUTE = problem(404, 'Not Found', 'no such route');
const NOT_GET = problem(405, 'Method Not Allowed', 'use GET');
const BAD_ID = problem(400, 'Bad Request', 'the subscriber id must be an integer');

/** Answers by the id as it stands in the path. */
const answers = new Map<string, Answer>();
const cardsAnswer = (id: number) =>
  answer(200, 'application/json', JSON.stringify(cardsFor(id, { cardsPerSubscriber })));
for (let id = 1; id <= Number(values.subscribers); id++) answers.set(String(id), cardsAnswer(id));

function send(res: ServerResponse, a: Answer): void {
  res.writeHead(a.status, a.headers);
  res.end(a.body);
}

const server = createServer((req, res) => {
  res.sendDate = false;
  const url = req.url ?? '';
  if (!url.startsWith(PREFIX)) return send(res, NO_ROUTE);
  if (req.method !== 'GET') return send(res, NOT_GET);
  if (req.headers.authorization !== authorization) return send(res, UNAUTHORIZED);
  const id = url.slice(PREFIX.length);
  let a = answers.get(id);
  if (a === undefined) {
    if (id === '' || id.includes('/') || id.includes('?')) return send(res, NO_ROUTE);
    if (!/^\d+$/.test(id) || !Number.isSafeInteger(Number(id))) return send(res, BAD_ID);
    a = cardsAnswer(Number(id));
    answers.set(id, a);
  }
  send(res, a);
});
server.keepAliveTimeout = 60_000;
server.listen(Number(values.port), '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`raw API listening on http://127.0.0.1:${port}\n`);
});
process.on('SIGTERM', () => process.exit(0));
