// An upstream that quotes the key it was sent: whatever the key's shape, the client never sees it.
// Regression (session 21): errors were scrubbed only of key-shaped text (`sk-…`, `AIza…`, bearer
// tokens), so a channel key of another shape reached the client in a 502 and in a 400.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startHarness, type Harness } from './harness.ts';

const UPSTREAM_KEY = 'zk0upstream0KEY0a1b2c3d4e5f6a7b8c9d';
let h: Harness;
let key: string;

beforeAll(async () => {
  h = await startHarness({ upstreamKey: UPSTREAM_KEY });
  ({ key } = await h.account({ balance: '1' }));
}, 60_000);
afterAll(async () => h?.close());

async function chat(): Promise<{ status: number; text: string }> {
  const r = await fetch(`${h.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'plain', messages: [{ role: 'user', content: 'x' }] }),
  });
  return { status: r.status, text: await r.text() };
}

it('a 401 that quotes the channel key: 502 without the key', async () => {
  h.mock.script({
    model: 'plain-up',
    status: 401,
    body: { error: { message: `Incorrect API key provided: ${UPSTREAM_KEY}` } },
  });
  const r = await chat();
  expect(r.status).toBe(502);
  expect(r.text).toContain('Incorrect API key provided');
  expect(r.text).not.toContain(UPSTREAM_KEY);
});

it('a 400 that quotes the channel key: 400 without the key', async () => {
  h.mock.script({
    model: 'plain-up',
    status: 400,
    body: { error: { message: `bad request for key ${UPSTREAM_KEY}` } },
  });
  const r = await chat();
  expect(r.status).toBe(400);
  expect(r.text).toContain('bad request for key');
  expect(r.text).not.toContain(UPSTREAM_KEY);
});

it('an error event inside a 200 stream that quotes the channel key: the event without the key', async () => {
  h.mock.script({
    model: 'plain-up',
    status: 200,
    body:
      'data: {"id":"c1","object":"chat.completion.chunk","model":"plain-up","choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n' +
      `data: {"error":{"message":"quota exceeded for ${UPSTREAM_KEY}"}}\n\n`,
  });
  const r = await fetch(`${h.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'plain',
      stream: true,
      messages: [{ role: 'user', content: 'x' }],
    }),
  });
  const text = await r.text();
  expect(r.status).toBe(200);
  expect(text).toContain('quota exceeded for');
  expect(text).not.toContain(UPSTREAM_KEY);
});
