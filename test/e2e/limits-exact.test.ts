// The RPM and channel-capacity layers are exact through a running gateway: K of N concurrent
// requests pass, the rest are refused before any upstream call and leave no reservation behind.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { limitsConfig, startHarness, type Harness } from './harness.ts';

function files(mockUrl: string): Record<string, string> {
  return limitsConfig(mockUrl, 'cap3');
}

interface Answer {
  status: number;
  code: string | null;
  headers: Headers;
  requestId: string;
}

let h: Harness;

beforeAll(async () => {
  h = await startHarness({ files });
}, 60_000);
afterAll(async () => h?.close());

async function chat(key: string, model: string): Promise<Answer> {
  const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
  });
  const json = (await res.json()) as { error?: { code: string } };
  return {
    status: res.status,
    code: json.error?.code ?? null,
    headers: res.headers,
    requestId: res.headers.get('x-request-id') ?? '',
  };
}

/** Waits for every admitted request's settlement, then checks nothing is held or billed twice. */
async function expectNothingHeld(accountId: string, passed: Answer[], refused: Answer[]) {
  for (const a of passed) expect((await h.usage(a.requestId)).status).toBe('ok');
  expect((await h.store.getAccount(accountId))?.reservedNano).toBe(0n);
  for (const a of refused) {
    // RPM refuses before the reservation; capacity releases it (decision 0012): no row either way.
    expect(await h.store.getUsage(a.requestId)).toBeNull();
  }
  const ok = (await h.store.listUsage({ accountId, limit: 1000 })).filter((r) => r.status === 'ok');
  expect(ok.map((r) => r.requestId).sort()).toEqual(passed.map((a) => a.requestId).sort());
}

describe('per-model RPM on one gateway', () => {
  it('admits exactly 7 of 30 concurrent requests; the other 23 get 429 and reach no upstream', async () => {
    const { key, accountId } = await h.account({ balance: '10' });
    const before = h.mock.callCount();

    const answers = await Promise.all(Array.from({ length: 30 }, () => chat(key, 'rpm7')));

    const passed = answers.filter((a) => a.status === 200);
    const refused = answers.filter((a) => a.status !== 200);
    expect(passed).toHaveLength(7);
    expect(refused).toHaveLength(23);
    for (const a of refused) {
      expect(a.status).toBe(429);
      expect(a.code).toBe('rate_limited');
      expect(Number(a.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(a.headers.get('x-ratelimit-limit-requests')).toBe('7');
      expect(a.headers.get('x-ratelimit-remaining-requests')).toBe('0');
    }
    // Each admitted request saw a distinct count left: 6, 5, … 0 in some order.
    const remaining = passed.map((a) => Number(a.headers.get('x-ratelimit-remaining-requests')));
    expect(remaining.sort((x, y) => x - y)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(h.mock.callCount() - before).toBe(7);

    await expectNothingHeld(accountId, passed, refused);
  });

  it('counts per account: another account still gets its own 7', async () => {
    const other = await h.account({ balance: '10' });
    const answers = await Promise.all(Array.from({ length: 8 }, () => chat(other.key, 'rpm7')));
    expect(answers.filter((a) => a.status === 200)).toHaveLength(7);
    expect(answers.filter((a) => a.code === 'rate_limited')).toHaveLength(1);
  });
});

describe('channel capacity on one gateway', () => {
  it('holds at most 3 requests in flight at the upstream; the rest get 429 at once', async () => {
    const { key, accountId } = await h.account({ balance: '10' });
    // Slow enough that every request arrives while the first three are still at the upstream.
    h.mock.script({ model: 'cap3-up', delayMs: 1500, times: 12 });
    const before = h.mock.callCount();
    let completed = 0;
    let maxInFlight = 0;
    // Calls the mock received minus answers the client got is never below the calls the mock
    // still holds, so its maximum bounds the upstream's concurrency from above.
    const sample = (): void => {
      maxInFlight = Math.max(maxInFlight, h.mock.callCount() - before - completed);
    };
    const sampler = setInterval(sample, 5);

    const answers = await Promise.all(
      Array.from({ length: 12 }, () =>
        chat(key, 'cap3-model').then((a) => {
          sample();
          if (a.status === 200) completed++;
          return a;
        }),
      ),
    );
    clearInterval(sampler);

    const passed = answers.filter((a) => a.status === 200);
    const refused = answers.filter((a) => a.status !== 200);
    expect(maxInFlight).toBe(3);
    expect(passed).toHaveLength(3);
    for (const a of refused) {
      expect(a.status).toBe(429);
      expect(a.code).toBe('channel_capacity_exceeded');
    }
    expect(h.mock.callCount() - before).toBe(3);
    expect(await h.gateway.ctx.limiter.slotsInUse('cap3')).toBe(0);

    await expectNothingHeld(accountId, passed, refused);
  });
});
