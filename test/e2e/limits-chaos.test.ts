// Channel-capacity slots come back on every way a request can end: upstream 500, a stalled
// upstream timing out, a cut body, a stream cut after its first chunk, a client leaving before or
// during the stream, and success. Also the RPM window sliding (a 1 s window in this file).
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLimiter } from '../../src/limits/create-limiter.ts';
import type { GatewayLimiter } from '../../src/limits/resilient-limiter.ts';
import { E2E_CONFIG, startHarness, type Harness } from './harness.ts';

const CHANNEL = 'chaos';
/** One gateway model per way of ending, so each upstream model is scripted on its own. */
const MODELS = ['c-500', 'c-stall', 'c-halfbody', 'c-cut', 'c-abort', 'c-early', 'c-ok'] as const;
type ChaosModel = (typeof MODELS)[number];

/** E2E_CONFIG plus a capacity-2 channel with an 800 ms first-byte timeout, and a 2-RPM model. */
function files(mockUrl: string): Record<string, string> {
  const base = E2E_CONFIG(mockUrl);
  const models = MODELS.map(
    (m) => `  - name: ${m}
    owned_by: acme
    endpoints: [chat]
    max_output_tokens: 100
    channels: [{ channel: ${CHANNEL}, upstream_model: ${m}-up }]
`,
  ).join('');
  const prices = MODELS.map((m) => `  - { model: ${m}, input: 1, output: 1 }\n`).join('');
  return {
    ...base,
    'channels.yaml': `${base['channels.yaml']}  - id: ${CHANNEL}
    protocol: openai
    base_url: ${mockUrl}/v1
    api_keys: ["\${E2E_MOCK_KEY}"]
    capacity: 2
    timeouts: { connect_ms: 1000, first_byte_ms: 800, total_ms: 3000 }
`,
    'models.yaml': `${base['models.yaml']}${models}  - name: sliding
    owned_by: acme
    endpoints: [chat]
    max_output_tokens: 100
    channels: [{ channel: oa-main, upstream_model: sliding-up }]
`,
    'prices.yaml': `${base['prices.yaml']}${prices}  - { model: sliding, input: 1, output: 1 }\n`,
    'limits.yaml': `limits:
  rpm:
    scope: account
    models: { limited: 2, sliding: 2 }
`,
  };
}

interface Outcome {
  /** HTTP status, or 'aborted' when this client went away. */
  status: number | 'aborted';
  body: string;
  id: string;
}

interface CallOptions {
  stream?: boolean;
  /** Leave as soon as the first chunk of the stream arrives. */
  abortAfterFirstChunk?: boolean;
  /** Leave once this turns true (polled every 10 ms) while waiting for the answer. */
  abortWhen?: () => boolean;
}

let h: Harness;
let limiter: GatewayLimiter;
let key: string;
let accountId: string;
/** Every request sent, to check afterwards that none holds a reservation. */
const sent: Outcome[] = [];

beforeAll(async () => {
  // A 1 s RPM window so the window visibly slides within the test.
  limiter = createLimiter({ redisUrl: null, onUnreachable: 'fail_open', windowMs: 1000 });
  h = await startHarness({ files, limiter });
  ({ key, accountId } = await h.account({ balance: '10' }));
}, 60_000);
afterAll(async () => {
  await h?.close();
  await limiter?.close();
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Upstream calls the mock received for a gateway model. */
function callsFor(model: string): number {
  const up = `${model}-up`;
  return h.mock.calls.filter((c) => (c.body as { model?: unknown } | null)?.model === up).length;
}

async function call(model: string, opts: CallOptions = {}): Promise<Outcome> {
  const id = `limits-chaos-${model}-${randomBytes(6).toString('hex')}`;
  const ac = new AbortController();
  let watching = opts.abortWhen !== undefined;
  const watch = (async () => {
    while (watching && !ac.signal.aborted) {
      if (opts.abortWhen?.() === true) ac.abort();
      await sleep(10);
    }
  })();
  let outcome: Outcome;
  try {
    const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      signal: ac.signal,
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        'x-request-id': id,
      },
      body: JSON.stringify({
        model,
        stream: opts.stream ?? false,
        messages: [{ role: 'user', content: 'hi' }],
      }),
    });
    if (opts.abortAfterFirstChunk === true && res.status === 200 && res.body !== null) {
      const reader = res.body.getReader();
      await reader.read();
      ac.abort();
      await reader.read().catch(() => undefined);
      outcome = { status: 'aborted', body: '', id };
    } else {
      outcome = { status: res.status, body: await res.text(), id };
    }
  } catch (err) {
    if (!ac.signal.aborted) throw err;
    outcome = { status: 'aborted', body: '', id };
  } finally {
    watching = false;
    await watch;
  }
  sent.push(outcome);
  return outcome;
}

/** Slots still held on the chaos channel once releases ran; polled for at most 1 s. */
async function slotsAfterRelease(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    if ((await limiter.slotsInUse(CHANNEL)) === 0) return 0;
    await sleep(20);
  }
  return limiter.slotsInUse(CHANNEL);
}

/** What each ending looks like to its client when it got a slot. */
const EXPECTED: Record<ChaosModel, number | 'aborted'> = {
  'c-500': 502,
  'c-stall': 504,
  'c-halfbody': 502,
  'c-cut': 200,
  'c-abort': 'aborted',
  'c-early': 'aborted',
  'c-ok': 200,
};

/** Scripts the mock for one request of the scenario and sends it. */
async function scenario(model: ChaosModel): Promise<Outcome> {
  const up = `${model}-up`;
  switch (model) {
    case 'c-500':
      h.mock.script({ model: up, status: 500 });
      return call(model);
    case 'c-stall':
      h.mock.script({ model: up, stall: true });
      return call(model);
    case 'c-halfbody':
      h.mock.script({ model: up, cutAfterChunks: 1 });
      return call(model);
    case 'c-cut':
      h.mock.script({ model: up, cutAfterChunks: 2 });
      return call(model, { stream: true });
    case 'c-abort':
      h.mock.script({ model: up, chunkDelayMs: 200 });
      return call(model, { stream: true, abortAfterFirstChunk: true });
    case 'c-early': {
      h.mock.script({ model: up, delayMs: 600 });
      const seen = callsFor(model);
      return call(model, { stream: true, abortWhen: () => callsFor(model) > seen });
    }
    case 'c-ok':
      return call(model, { stream: sent.length % 2 === 0 });
  }
}

describe('capacity slots come back on every way a request ends', () => {
  const cases: [ChaosModel, string, (o: Outcome) => void, string][] = [
    ['c-500', 'an upstream 500', (o) => expect(o.status).toBe(502), 'failed'],
    [
      'c-stall',
      'an upstream stalled past first_byte_ms',
      (o) => expect(o.status).toBe(504),
      'failed',
    ],
    ['c-halfbody', 'an answer cut halfway', (o) => expect(o.status).toBe(502), 'failed'],
    [
      'c-cut',
      'a stream cut after its first chunk',
      (o) => {
        expect(o.status).toBe(200);
        expect(o.body).toContain('"code":"upstream_error"');
      },
      'aborted',
    ],
    [
      'c-abort',
      'a client leaving mid-stream',
      (o) => expect(o.status).toBe('aborted'),
      'client_aborted',
    ],
    [
      'c-early',
      'a client leaving before the first byte',
      (o) => expect(o.status).toBe('aborted'),
      'client_aborted',
    ],
    ['c-ok', 'a success', (o) => expect(o.status).toBe(200), 'ok'],
  ];
  for (const [model, what, check, settled] of cases) {
    it(`${what}: the slot is free again and the request is recorded as ${settled}`, async () => {
      const outcome = await scenario(model);
      check(outcome);
      expect(await slotsAfterRelease()).toBe(0);
      const row = await h.usage(outcome.id);
      expect(row.status).toBe(settled);
      if (settled === 'failed') expect(row.costNano).toBe(0n);
    });
  }

  it('three clients cycling through every ending keep no slot, and both slots serve after', async () => {
    // 21 requests, rotated per round so each ending meets different neighbours, sent by three
    // clients at once on two slots: slots churn, and whoever finds both taken gets a 429.
    const queue = [0, 3, 5].flatMap((r) => [...MODELS.slice(r), ...MODELS.slice(0, r)]);
    const outcomes: [ChaosModel, Outcome][] = [];
    const client = async (): Promise<void> => {
      for (let m = queue.shift(); m !== undefined; m = queue.shift()) {
        outcomes.push([m, await scenario(m)]);
      }
    };
    await Promise.all([client(), client(), client()]);

    for (const [model, o] of outcomes) {
      if (o.status === 429) expect(o.body).toContain('channel_capacity_exceeded');
      else expect(o.status).toBe(EXPECTED[model]);
    }
    expect(outcomes.filter(([, o]) => o.status !== 429).length).toBeGreaterThan(0);
    expect(await slotsAfterRelease()).toBe(0);
    const [a, b] = await Promise.all([call('c-ok'), call('c-ok', { stream: true })]);
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    expect(await slotsAfterRelease()).toBe(0);
  });
});

describe('RPM window', () => {
  it('refuses the third request in the window and admits again once the window slid', async () => {
    expect((await call('sliding')).status).toBe(200);
    expect((await call('sliding')).status).toBe(200);
    const before = h.mock.callCount();
    const refused = await call('sliding');
    expect(refused.status).toBe(429);
    expect(refused.body).toContain('rate_limited');
    expect(h.mock.callCount()).toBe(before);

    // The window is 1 s: within 5 s of polling the oldest hit has long left it.
    let again = await call('sliding');
    for (let i = 0; i < 50 && again.status === 429; i++) {
      await sleep(100);
      again = await call('sliding');
    }
    expect(again.status).toBe(200);
  });
});

describe('rejected requests hold nothing', () => {
  it('leaves no reservation, and no ok row for any refused or failed request', async () => {
    const admitted = sent.filter((o) => o.status !== 429);
    for (const o of admitted) await h.usage(o.id);
    expect((await h.store.getAccount(accountId))?.reservedNano).toBe(0n);
    // Refused by RPM or at channel choice: the hold was never made or was released, no row.
    for (const o of sent.filter((s) => s.status === 429)) {
      expect(await h.store.getUsage(o.id)).toBeNull();
    }
    const rows = await h.store.listUsage({ accountId, limit: 1000 });
    for (const r of rows.filter((x) => x.status === 'failed')) expect(r.costNano).toBe(0n);
    const okIds = rows.filter((r) => r.status === 'ok').map((r) => r.clientRequestId);
    const served = sent.filter((o) => o.status === 200 && !o.body.includes('upstream_error'));
    expect(okIds.sort()).toEqual(served.map((o) => o.id).sort());
  });
});
