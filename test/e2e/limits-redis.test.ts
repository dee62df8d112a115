// Two gateways sharing one Redis enforce ONE per-model RPM and ONE channel capacity, not one each.
// Both run in this test process, but as separate servers with separate limiter clients, so they
// share nothing but Redis and the store; the cross-process case (separate OS processes) is covered
// by the Redis conformance suite in test/limits/redis.test.ts.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLimiter } from '../../src/limits/create-limiter.ts';
import type { GatewayLimiter } from '../../src/limits/resilient-limiter.ts';
import { redisForTests } from '../redis-reachable.ts';
import { e2eStore, limitsConfig, startHarness, withChatModel, type Harness } from './harness.ts';

const REDIS_URL = 'redis://127.0.0.1:6379';
const PREFIX = `sy-e2e-${randomBytes(4).toString('hex')}:`;

const redisUp = await redisForTests(REDIS_URL, 'limits e2e', 'skipping the shared-limit tests');

/** The limits config plus `rpm300`: a limit high enough that hot buckets take blocks (0031). */
function files(mockUrl: string): Record<string, string> {
  const base = withChatModel(limitsConfig(mockUrl, 'shared3'), 'rpm300');
  return {
    ...base,
    'limits.yaml': base['limits.yaml']!.replace('rpm7: 7 }', 'rpm7: 7, rpm300: 300 }'),
  };
}

interface Answer {
  status: number;
  code: string | null;
  requestId: string;
}

const limiters: GatewayLimiter[] = [];
let a: Harness;
let b: Harness;

beforeAll(async () => {
  if (!redisUp) return;
  // Each gateway gets its own client, as a separate process would; only the prefix is shared.
  const limiter = (): GatewayLimiter => {
    const l = createLimiter({
      redisUrl: REDIS_URL,
      onUnreachable: 'fail_closed',
      keyPrefix: PREFIX,
    });
    limiters.push(l);
    return l;
  };
  const store = await e2eStore();
  a = await startHarness({ files, store, limiter: limiter() });
  b = await startHarness({ files, store, limiter: limiter() });
}, 60_000);

afterAll(async () => {
  await a?.close();
  await b?.close();
  for (const l of limiters) await l.close();
  if (!redisUp) return;
  const admin = new Redis(REDIS_URL);
  let cursor = '0';
  do {
    const [next, keys] = await admin.scan(cursor, 'MATCH', `${PREFIX}*`, 'COUNT', 500);
    if (keys.length > 0) await admin.del(...keys);
    cursor = next;
  } while (cursor !== '0');
  admin.disconnect();
});

async function chat(h: Harness, key: string, model: string): Promise<Answer> {
  const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
  });
  const json = (await res.json()) as { error?: { code: string } };
  return {
    status: res.status,
    code: json.error?.code ?? null,
    requestId: res.headers.get('x-request-id') ?? '',
  };
}

const upstreamCalls = (): number => a.mock.callCount() + b.mock.callCount();

/** Polls `check` until it holds, for at most 5 s (the blacklist copies sync every 250 ms). */
async function until(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('the change never reached the other gateway');
}

describe.skipIf(!redisUp)('two gateways sharing Redis', () => {
  it('admit exactly 7 of 30 requests spread over both against one RPM of 7', async () => {
    const { key, accountId } = await a.account({ balance: '10' });
    const before = upstreamCalls();

    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) => chat(i % 2 === 0 ? a : b, key, 'rpm7')),
    );

    const passed = answers.filter((x) => x.status === 200);
    expect(passed).toHaveLength(7);
    for (const x of answers.filter((y) => y.status !== 200)) {
      expect(x.status).toBe(429);
      expect(x.code).toBe('rate_limited');
    }
    expect(upstreamCalls() - before).toBe(7);
    for (const x of passed) await a.usage(x.requestId);
    expect((await a.store.getAccount(accountId))?.reservedNano).toBe(0n);
  });

  it('admit no more than an RPM of 300 over both while blocks hand hits out, and charge exactly those', async () => {
    const { key, accountId } = await a.account({ balance: '100' });
    const before = upstreamCalls();
    const answers: Answer[] = [];
    // Waves of 40 make the bucket hot on both gateways, so each takes blocks of hits.
    for (let wave = 0; wave < 10; wave++) {
      answers.push(
        ...(await Promise.all(
          Array.from({ length: 40 }, (_, i) => chat(i % 2 === 0 ? a : b, key, 'rpm300')),
        )),
      );
    }
    const passed = answers.filter((x) => x.status === 200);
    expect(passed.length).toBeLessThanOrEqual(300);
    // Near the limit blocks shrink to an eighth of what is free: little is held back.
    expect(passed.length).toBeGreaterThanOrEqual(270);
    for (const x of answers.filter((y) => y.status !== 200)) {
      expect(x.status).toBe(429);
      expect(x.code).toBe('rate_limited');
    }
    expect(upstreamCalls() - before).toBe(passed.length);
    for (const x of passed) await a.usage(x.requestId);
    expect((await a.store.getAccount(accountId))?.reservedNano).toBe(0n);
    // Once the blocks' leases end, Redis counts exactly the requests admitted.
    const admin = new Redis(REDIS_URL);
    try {
      await until(
        async () => (await admin.zcard(`${PREFIX}rpm:rpm300:acct:${accountId}`)) === passed.length,
      );
    } finally {
      admin.disconnect();
    }
  });

  it('hold at most 3 requests in flight over both on a channel of capacity 3', async () => {
    const { key, accountId } = await a.account({ balance: '10' });
    for (const h of [a, b]) h.mock.script({ model: 'cap3-up', delayMs: 1500, times: 12 });
    const before = upstreamCalls();
    let completed = 0;
    let maxInFlight = 0;
    // Calls received by both mocks minus answers received bounds what the upstreams still hold.
    const sample = (): void => {
      maxInFlight = Math.max(maxInFlight, upstreamCalls() - before - completed);
    };
    const sampler = setInterval(sample, 5);

    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        chat(i % 2 === 0 ? a : b, key, 'cap3-model').then((x) => {
          sample();
          if (x.status === 200) completed++;
          return x;
        }),
      ),
    );
    clearInterval(sampler);

    const passed = answers.filter((x) => x.status === 200);
    expect(maxInFlight).toBe(3);
    expect(passed).toHaveLength(3);
    for (const x of answers.filter((y) => y.status !== 200)) {
      expect(x.status).toBe(429);
      expect(x.code).toBe('channel_capacity_exceeded');
    }
    expect(upstreamCalls() - before).toBe(3);
    expect(await a.gateway.ctx.limiter.slotsInUse('shared3')).toBe(0);
    expect(await b.gateway.ctx.limiter.slotsInUse('shared3')).toBe(0);
    for (const x of passed) await a.usage(x.requestId);
    expect((await a.store.getAccount(accountId))?.reservedNano).toBe(0n);
  });

  it('a restriction added on one gateway is enforced by the other once its copy syncs', async () => {
    const { key } = await a.account({ balance: '10' });
    await a.gateway.ctx.limiter.addToBlacklist('ip:127.0.0.1', 60_000, 'e2e shared ban');
    try {
      // Each gateway checks a local copy of the blacklist, synced every 250 ms.
      await until(async () => (await b.gateway.ctx.limiter.isBlacklisted('ip:127.0.0.1')) !== null);
      const before = upstreamCalls();
      const refused = await chat(b, key, 'plain');
      expect(refused.status).toBe(403);
      expect(refused.code).toBe('temp_blacklisted');
      expect(upstreamCalls()).toBe(before);
    } finally {
      await b.gateway.ctx.limiter.removeFromBlacklist('ip:127.0.0.1');
    }
    await until(async () => (await a.gateway.ctx.limiter.isBlacklisted('ip:127.0.0.1')) === null);
    expect((await chat(a, key, 'plain')).status).toBe(200);
  });
});
