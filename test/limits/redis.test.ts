// The Redis limiter against the shared conformance suite (on Redis' real clock), plus what only a
// shared store has: two gateway processes sharing limits, and the unreachable policy.
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { createLimiter } from '../../src/limits/create-limiter.ts';
import { ROOMY_LEASES, WAKE_MS } from '../../src/limits/local-grants.ts';
import { LimiterUnavailableError } from '../../src/limits/limiter.ts';
import type { BlacklistEntry, LimiterState, SlotLease } from '../../src/limits/limiter.ts';
import { connectLimiterRedis, whenRedisReady } from '../../src/limits/redis-client.ts';
import { RedisLimiter } from '../../src/limits/redis-limiter.ts';
import { redisAnswers, redisForTests } from '../redis-reachable.ts';
import { limiterConformance } from './conformance.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const RUN_PREFIX = `switchyard-test:${randomBytes(4).toString('hex')}:`;
const WINDOW_MS = 2000;

const redisUp = await redisForTests(REDIS_URL, 'limits', 'skipping the Redis limiter tests');
const haveRedisServer = spawnSync('redis-server', ['--version']).status === 0;
if (!haveRedisServer) {
  if (process.env.CI) throw new Error('redis-server is required in CI for the recovery test');
  console.warn('[limits] no redis-server binary: skipping the Redis recovery test');
}

const SYNC_MS = 50;

/** Polls `check` until it holds, for at most 40 sync periods. */
async function eventually(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 80; i++) {
    if (await check()) return;
    await sleep(SYNC_MS / 2);
  }
  throw new Error('the change never reached the other process');
}

let harnesses = 0;
/** A limiter with its own connection, as one gateway process would have. */
async function limiterAt(
  prefix: string,
  options: {
    leaseMs?: number | undefined;
    windowMs?: number;
    blacklistSyncMs?: number;
    url?: string;
  } = {},
): Promise<RedisLimiter> {
  const client = connectLimiterRedis(options.url ?? REDIS_URL);
  await whenRedisReady(client);
  return new RedisLimiter({
    client,
    keyPrefix: prefix,
    windowMs: options.windowMs ?? WINDOW_MS,
    ownsClient: true,
    blacklistSyncMs: options.blacklistSyncMs ?? SYNC_MS,
    ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }),
  });
}

afterAll(async () => {
  if (!redisUp) return;
  const admin = new Redis(REDIS_URL);
  let cursor = '0';
  do {
    const [next, keys] = await admin.scan(cursor, 'MATCH', `${RUN_PREFIX}*`, 'COUNT', 1000);
    if (keys.length > 0) await admin.del(...keys);
    cursor = next;
  } while (cursor !== '0');
  await admin.quit();
});

// The suite with blocks on (the default) and off (lease_ms: 0, every hit and slot its own call).
for (const [backend, leaseMs] of [
  ['redis', undefined],
  ['redis, no blocks', 0],
] as const) {
  limiterConformance(
    backend,
    async () => {
      const limiter = await limiterAt(`${RUN_PREFIX}${harnesses++}:`, { leaseMs });
      return {
        limiter,
        windowMs: WINDOW_MS,
        advance: async (ms) => {
          await sleep(ms);
        },
        close: () => limiter.close(),
      };
    },
    !redisUp,
  );
}

const LEASE_MS = 100;
// Waits for a hot entry's blocks to go back once calls stop: the sweep may renew one for up to
// 2 leases after the last call (decision 0033), that block ends a lease later, and the next sweep
// (every quarter lease) returns it: ~3.25 leases, with room for a loaded host's late timers.
const GIVE_BACK_MS = 6 * LEASE_MS;
// The same for an entry far from its limits (at most a quarter used), whose blocks last
// ROOMY_LEASES leases (decision 0049): renewed up to a block's lease after the last call, ended a
// block's lease later, returned by the next sweep.
const ROOMY_GIVE_BACK_MS = (2 * ROOMY_LEASES + 4) * LEASE_MS;
// The same once calls stop for good: such an entry keeps a block at hand while it remembers the
// hot spell (WAKE_MS after its last hot call, decision 0059), then stops as above.
const KEPT_GIVE_BACK_MS = WAKE_MS + ROOMY_GIVE_BACK_MS;

/** Fires `total` calls in waves of `wave` concurrent ones, as a busy gateway would. */
async function inWaves<T>(total: number, wave: number, call: () => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  for (let done = 0; done < total; done += wave) {
    out.push(...(await Promise.all(Array.from({ length: Math.min(wave, total - done) }, call))));
  }
  return out;
}

/** 40 acquire-and-release in waves of 10: the channel is hot, so what follows is lent from blocks. */
async function makeHot(limiter: RedisLimiter, capacity: number): Promise<void> {
  await inWaves(40, 10, async () => {
    const lease = await limiter.acquireSlot('ch', capacity, 60_000);
    if (lease !== null) await limiter.releaseSlot(lease);
  });
}

type Sent = { reply: Promise<unknown>; rpmC0: number; slotC0: number; leaseMs: number };
/**
 * Passes the reply of each script call the limiter sends with `ahead` (1: a block asked ahead; 0:
 * a call a request waits on) through `change`, with the slots the call asks for (0: none).
 */
function onSend(
  limiter: RedisLimiter,
  ahead: 0 | 1,
  change: (reply: Promise<unknown>, slotWant: number) => Promise<unknown>,
): void {
  const inside = limiter as unknown as { send: (...args: unknown[]) => Sent };
  const send = inside.send.bind(limiter);
  inside.send = (...args: unknown[]) => {
    const sent = send(...args);
    const slotWant = (args[1] as { want: number } | null)?.want ?? 0;
    return args[3] === ahead ? { ...sent, reply: change(sent.reply, slotWant) } : sent;
  };
}

/** Passes the reply of each block the limiter asks for ahead through `change`. */
function onAhead(
  limiter: RedisLimiter,
  change: (reply: Promise<unknown>) => Promise<unknown>,
): void {
  onSend(limiter, 1, change);
}

(redisUp ? describe : describe.skip)('redis limiter blocks for hot buckets and channels', () => {
  const admin = redisUp ? new Redis(REDIS_URL) : null;
  afterAll(async () => {
    await admin?.quit();
  });

  it('goes to Redis about once a block for a hot bucket, and once a hit with blocks off', async () => {
    const prefix = `${RUN_PREFIX}blocks-calls:`;
    const [hot, cold] = await Promise.all([limiterAt(prefix), limiterAt(prefix, { leaseMs: 0 })]);

    const a = await inWaves(2000, 50, () => hot.hitRpm('rpm:m:acct:hot', 1_000_000));
    const b = await inWaves(500, 50, () => cold.hitRpm('rpm:m:acct:cold', 1_000_000));
    expect(a.every((r) => r.allowed)).toBe(true);
    expect(b.every((r) => r.allowed)).toBe(true);
    expect(cold.counts.calls).toBe(500);
    // Cold start is exact (3 calls), then blocks double with demand up to the rate.
    expect(hot.counts.calls).toBeLessThan(100);
    expect(hot.counts.blockHits).toBe(2000 - hot.counts.calls);
    await Promise.all([hot.close(), cold.close()]);
  });

  it('never admits more than the limit across two processes, and Redis counts exactly the hits admitted once blocks end', async () => {
    const prefix = `${RUN_PREFIX}blocks-exact:`;
    const windowMs = 60_000;
    const [a, b] = await Promise.all([
      limiterAt(prefix, { windowMs }),
      limiterAt(prefix, { windowMs }),
    ]);
    const limit = 3000;
    const [ra, rb] = await Promise.all([
      inWaves(2500, 64, () => a.hitRpm('rpm:m:acct:1', limit)),
      inWaves(2500, 64, () => b.hitRpm('rpm:m:acct:1', limit)),
    ]);
    const admitted = [...ra, ...rb].filter((r) => r.allowed).length;
    expect(admitted).toBeLessThanOrEqual(limit);
    // Blocks near the limit shrink to an eighth of what is free, so little is held back.
    expect(admitted).toBeGreaterThan(limit * 0.9);
    await sleep(GIVE_BACK_MS);
    expect(await admin!.zcard(`${prefix}rpm:m:acct:1`)).toBe(admitted);
    // What the blocks held back is admitted again now.
    const after = await a.hitRpm('rpm:m:acct:1', limit);
    expect(after.allowed).toBe(admitted < limit);
    await Promise.all([a.close(), b.close()]);
  });

  it('serves a warm bucket and channel (~20 requests a second, one at a time) mostly from blocks, and gives back what they did not use', async () => {
    const prefix = `${RUN_PREFIX}blocks-warm:`;
    const limiter = await limiterAt(prefix);
    let admitted = 0;
    const leases: SlotLease[] = [];
    // ~2 s of requests 50 ms apart (slower under load): never 4 in a 100 ms period (hot), up to
    // 20 a second (warm).
    for (let i = 0; i < 32; i++) {
      const r = await limiter.hitRpmAndAcquire('rpm:m:acct:warm', 1_000_000, {
        channelId: 'warm-ch',
        capacity: 1_000,
        ttlMs: 60_000,
      });
      expect(r.rpm.allowed).toBe(true);
      expect(typeof r.slot).toBe('object');
      admitted++;
      leases.push(r.slot as SlotLease);
      // Each request holds its slot for ~4 requests' time, as a stream would.
      if (leases.length > 4) await limiter.releaseSlot(leases.shift()!);
      await sleep(50);
    }
    // The first ~8 calls are cold (exact); after them a warm block covers ~10 requests: 10-12
    // calls in five runs, 32 before warm blocks.
    expect(limiter.counts.calls).toBeLessThan(16);
    expect(limiter.counts.blockHits).toBeGreaterThan(16);
    expect(limiter.counts.lentSlots).toBeGreaterThan(16);
    for (const lease of leases) await limiter.releaseSlot(lease);
    // A warm block lives 5 lease periods, and the sweep may renew it once more within that time of
    // the last call; after those the sweep gives back what they held unused.
    await sleep(12 * LEASE_MS);
    expect(await admin!.zcard(`${prefix}rpm:m:acct:warm`)).toBe(admitted);
    expect(await admin!.zcard(`${prefix}slots:warm-ch`)).toBe(0);
    await limiter.close();
  });

  it('has the next block at hand when requests come in waves (8 at once every ~100 ms): after the first waves none waits for Redis', async () => {
    const prefix = `${RUN_PREFIX}blocks-waves:`;
    const limiter = await limiterAt(prefix, { windowMs: 60_000 });
    const slot = { channelId: 'waves-ch', capacity: 1_000, ttlMs: 60_000 };
    let admitted = 0;
    let callsAfterWarmUp = 0;
    for (let wave = 0; wave < 16; wave++) {
      const before = limiter.counts.calls;
      const results = await Promise.all(
        Array.from({ length: 8 }, () =>
          limiter.hitRpmAndAcquire('rpm:m:acct:waves', 1_000_000, slot),
        ),
      );
      for (const r of results) {
        expect(r.rpm.allowed).toBe(true);
        admitted++;
        // Each request holds its slot until the next wave, as 8 streams back to back do.
        if (typeof r.slot === 'object')
          setTimeout(() => void limiter.releaseSlot(r.slot as SlotLease), 90);
      }
      if (wave >= 4) callsAfterWarmUp += limiter.counts.calls - before;
      await sleep(100);
    }
    // Each wave found its block ended and made a call before the sweep asked ahead (16 waves, 16+
    // calls); now the sweep renews blocks between waves: 0-1 calls after warm-up in five runs.
    expect(callsAfterWarmUp).toBeLessThan(4);
    expect(limiter.counts.ahead).toBeGreaterThan(4);
    // Far from their limits, the bucket and channel keep a block through an idle spell (decision
    // 0059); close gives back what the blocks hold: Redis holds exactly the hits admitted, no slot.
    await limiter.close();
    expect(await admin!.zcard(`${prefix}rpm:m:acct:waves`)).toBe(admitted);
    expect(await admin!.zcard(`${prefix}slots:waves-ch`)).toBe(0);
  });

  it('after an idle spell, the first call to a bucket near its limit that was hot brings a block for the calls behind it (one script call, not one a call until hot)', async () => {
    const prefix = `${RUN_PREFIX}blocks-wake:`;
    const limiter = await limiterAt(prefix, { windowMs: 60_000 });
    const once = async (): Promise<void> => {
      // 200 hits of 600 in the window: past a quarter, so no block is kept through the spell
      // (decision 0059) and the first call after it must go to Redis.
      expect((await limiter.hitRpm('rpm:m:acct:wake', 600)).allowed).toBe(true);
    };
    await inWaves(200, 20, once);
    // Past two long periods (2 s): neither hot nor warm, and its blocks long gone back.
    await sleep(2_500);
    const before = limiter.counts.calls;
    for (let i = 0; i < 8; i++) await once();
    // Before decision 0047: 4 calls, one for each of the first requests until four made it hot.
    expect(limiter.counts.calls - before).toBe(1);
    // What the wake-up block did not hand out goes back when its lease ends.
    await sleep(GIVE_BACK_MS);
    expect(await admin!.zcard(`${prefix}rpm:m:acct:wake`)).toBe(208);
    await limiter.close();
  });

  it('keeps a block at hand through an idle spell for a bucket and channel far from their limits: a burst 3 s later waits for no script call, and the blocks go back once it forgets the hot spell', async () => {
    const prefix = `${RUN_PREFIX}blocks-keep:`;
    const limiter = await limiterAt(prefix, { windowMs: 60_000 });
    const slot = { channelId: 'keep-ch', capacity: 1_000, ttlMs: 60_000 };
    const once = async (): Promise<void> => {
      const r = await limiter.hitRpmAndAcquire('rpm:m:acct:keep', 1_000_000, slot);
      expect(r.rpm.allowed).toBe(true);
      expect(typeof r.slot).toBe('object');
      await limiter.releaseSlot(r.slot as SlotLease);
    };
    await inWaves(200, 20, once);
    const renewed = limiter.counts.ahead;
    // Idle 3 s, as each gateway is between its turns of the benchmark's streams.
    const sweeps = vi.spyOn(RedisLimiter.prototype as unknown as { sweep(): void }, 'sweep');
    try {
      await sleep(3_000);
      // Every lease while it only keeps blocks (~30, and a few more around each renewal), not
      // every quarter lease (~120).
      expect(sweeps.mock.calls.length).toBeLessThan(70);
    } finally {
      sweeps.mockRestore();
    }
    // Small blocks of ROOMY_LEASES (or warm) leases, about one a second each: not one a lease.
    expect(limiter.counts.ahead - renewed).toBeLessThanOrEqual(16);
    const before = limiter.counts.calls;
    await Promise.all(Array.from({ length: 8 }, once));
    // Before decision 0059 the first call waited for a script call and the 7 behind it for its
    // reply: 0.8 ms of the Postgres+Redis gateway's TTFT at each turn's first wave.
    expect(limiter.counts.calls - before).toBe(0);
    // WAKE_MS after the burst it no longer remembers being hot: it stops renewing, and what its
    // blocks did not hand out goes back.
    await sleep(KEPT_GIVE_BACK_MS);
    expect(await admin!.zcard(`${prefix}rpm:m:acct:keep`)).toBe(208);
    expect(await admin!.zcard(`${prefix}slots:keep-ch`)).toBe(0);
    const stopped = limiter.counts.ahead;
    await sleep(1_000);
    expect(limiter.counts.ahead).toBe(stopped);
    await limiter.close();
  }, 40_000);

  it('sweeps once a second, not every quarter lease, while a bucket only remembers being hot', async () => {
    const prefix = `${RUN_PREFIX}blocks-idle-sweep:`;
    const limiter = await limiterAt(prefix, { windowMs: 60_000 });
    // Near its limit (200 of 600), so no block is kept through the spell (decision 0059).
    const once = async (): Promise<void> => {
      await limiter.hitRpm('rpm:m:acct:idle-sweep', 600);
    };
    await inWaves(200, 20, once);
    // Its blocks have ended and gone back (those asked while it was still far from its limit last
    // ROOMY_LEASES); it is kept 10 s for remembering the hot spell.
    await sleep(ROOMY_GIVE_BACK_MS);
    const sweeps = vi.spyOn(RedisLimiter.prototype as unknown as { sweep(): void }, 'sweep');
    try {
      await sleep(1_500);
      // At a quarter lease (25 ms) that was ~60 wake-ups of the process for nothing to do.
      expect(sweeps.mock.calls.length).toBeLessThanOrEqual(3);
      // A call brings a block (decision 0047): the sweep is back at its quick pace, to end it.
      sweeps.mockClear();
      await once();
      await sleep(200);
      expect(sweeps.mock.calls.length).toBeGreaterThanOrEqual(4);
    } finally {
      sweeps.mockRestore();
      await limiter.close();
    }
  });

  it('dates every hit of a block asked ahead at grant + lease, and asks ahead for nothing when fewer than 2 fit', async () => {
    const prefix = `${RUN_PREFIX}blocks-ahead-script:`;
    const limiter = await limiterAt(prefix);
    const key = `${prefix}rpm:ahead`;
    const slots = `${prefix}slots:ahead`;
    const ahead = (limit: number, capacity: number, c0: number): Promise<number[]> =>
      limiter.client.syHitAndTake(
        key,
        slots,
        limit,
        WINDOW_MS,
        16,
        'T:',
        c0,
        LEASE_MS,
        capacity,
        60_000,
        8,
        c0 + 100,
        1,
      ) as Promise<number[]>;
    const before = Date.now();
    // [allowed, remaining, resetMs, rpmGrant, expiry, slotGrant, held]
    const granted = await ahead(1_000, 400, 0);
    expect(granted[3]).toBe(16);
    expect(granted[5]).toBe(8);
    expect(granted[6]).toBe(8);
    // No hit is counted at now: all 16 are dated a lease later (same host, same clock).
    const scores = (await admin!.zrange(key, '0', '-1', 'WITHSCORES')).filter(
      (_, i) => i % 2 === 1,
    );
    expect(scores).toHaveLength(16);
    for (const score of scores) expect(Number(score)).toBeGreaterThanOrEqual(before + LEASE_MS - 5);
    // 16 counted against a limit of 26, 8 slots held of 20: an eighth of what is free is below 2
    // for both, so nothing is added.
    const refused = await ahead(26, 20, 200);
    expect(refused[3]).toBe(0);
    expect(refused[4]).toBe(-2);
    expect(refused[5]).toBe(0);
    expect(refused[6]).toBe(8);
    expect(await admin!.zcard(key)).toBe(16);
    expect(await admin!.zcard(slots)).toBe(8);
    await limiter.close();
  });

  it('gives back on close what a block asked ahead was granted while the call was out', async () => {
    const prefix = `${RUN_PREFIX}blocks-ahead-close:`;
    const limiter = await limiterAt(prefix);
    // Blocks asked ahead answer 60 ms late: close() comes while one is out.
    onAhead(limiter, (reply) => reply.then(async (r) => (await sleep(60), r)));
    let admitted = 0;
    const asked = limiter.counts.ahead;
    while (limiter.counts.ahead === asked) {
      const wave = await Promise.all(
        Array.from({ length: 8 }, () => limiter.hitRpm('rpm:m:acct:close', 1_000_000)),
      );
      admitted += wave.filter((r) => r.allowed).length;
      await sleep(20);
    }
    await limiter.close();
    // Every hit held for a block, the one granted to the call out at close included, went back.
    expect(await admin!.zcard(`${prefix}rpm:m:acct:close`)).toBe(admitted);
  });

  it('keeps admitting, one call a request, when blocks asked ahead fail', async () => {
    const prefix = `${RUN_PREFIX}blocks-ahead-fail:`;
    const limiter = await limiterAt(prefix);
    // Blocks asked ahead fail on their way back (Redis ran them: their hits go back by ZREM).
    onAhead(limiter, (reply) => reply.then(() => Promise.reject(new Error('ask-ahead failed'))));
    let admitted = 0;
    for (let wave = 0; wave < 12; wave++) {
      const results = await Promise.all(
        Array.from({ length: 8 }, () => limiter.hitRpm('rpm:m:acct:fail', 1_000_000)),
      );
      expect(results.every((r) => r.allowed)).toBe(true);
      admitted += results.length;
      await sleep(50);
    }
    // The failures were met (no unhandled rejection fails the run) and the counts stay exact.
    expect(limiter.counts.ahead).toBeGreaterThan(0);
    await sleep(GIVE_BACK_MS);
    expect(await admin!.zcard(`${prefix}rpm:m:acct:fail`)).toBe(admitted);
    await limiter.close();
  });

  it('gives back the hits and slots a block request may have taken when its reply is lost', async () => {
    const prefix = `${RUN_PREFIX}blocks-remote-fail:`;
    const limiter = await limiterAt(prefix);
    // The first three calls a request waits on that ask for a block of slots fail on their way
    // back, as a command timeout does after Redis ran the script.
    let failed = 0;
    onSend(limiter, 0, (reply, slotWant) => {
      if (slotWant < 2 || failed >= 3) return reply;
      failed++;
      return reply.then(() => Promise.reject(new Error('reply lost')));
    });
    const slot = { channelId: 'lost', capacity: 10_000, ttlMs: 60_000 };
    let admitted = 0;
    let refused = 0;
    for (let wave = 0; wave < 12 && failed < 3; wave++) {
      await Promise.all(
        Array.from({ length: 20 }, async () => {
          try {
            const r = await limiter.hitRpmAndAcquire('rpm:m:acct:lost', 1_000_000, slot);
            admitted++;
            await sleep(1);
            await limiter.releaseSlot(r.slot as SlotLease);
          } catch {
            refused++;
          }
        }),
      );
      await sleep(50);
    }
    expect(failed).toBe(3);
    expect(refused).toBeGreaterThan(0);
    // Close gives back every block it holds (far from their limits, they would be kept through an
    // idle spell, decision 0059): only the admitted requests' hits are counted, and no slot is
    // held for the lost replies.
    await limiter.close();
    expect(await admin!.zcard(`${prefix}rpm:m:acct:lost`)).toBe(admitted);
    expect(await admin!.zcard(`${prefix}slots:lost`)).toBe(0);
  });

  it('gives back the hits of a block it did not use when the lease ends', async () => {
    const prefix = `${RUN_PREFIX}blocks-return:`;
    const limiter = await limiterAt(prefix, { windowMs: 60_000 });
    // 300 of 1,000: past a quarter, so no block is kept through the idle spell (decision 0059;
    // one far from its limit gives back later, as the keep test shows).
    const results = await inWaves(300, 30, () => limiter.hitRpm('rpm:m:acct:1', 1_000));
    const key = `${prefix}rpm:m:acct:1`;
    // The last block's unused hits are held (counted) while it may still hand them out.
    expect(await admin!.zcard(key)).toBeGreaterThan(results.length);
    await sleep(ROOMY_GIVE_BACK_MS);
    expect(await admin!.zcard(key)).toBe(results.length);
    await limiter.close();
  });

  it('does not admit from a block made for another limit (a reload lowered it)', async () => {
    const prefix = `${RUN_PREFIX}blocks-limit:`;
    const limiter = await limiterAt(prefix);
    await inWaves(200, 20, () => limiter.hitRpm('rpm:m:acct:1', 1_000_000));
    const lowered = await limiter.hitRpm('rpm:m:acct:1', 50);
    expect(lowered.allowed).toBe(false);
    expect(lowered.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    await limiter.close();
  });

  it('lends a hot channel its slots from a block, holds at most capacity across processes, and frees all at close', async () => {
    const prefix = `${RUN_PREFIX}blocks-slots:`;
    const [a, b] = await Promise.all([limiterAt(prefix), limiterAt(prefix)]);
    const capacity = 200;
    let peak = 0;
    const held = new Set<string>();
    const oneRequest = async (limiter: RedisLimiter): Promise<boolean> => {
      const lease = await limiter.acquireSlot('ch', capacity, 60_000);
      if (lease === null) return false;
      expect(held.has(lease.token)).toBe(false); // no token lent twice at once
      held.add(lease.token);
      peak = Math.max(peak, held.size);
      await sleep(1);
      held.delete(lease.token);
      await limiter.releaseSlot(lease);
      return true;
    };
    const [ga, gb] = await Promise.all([
      inWaves(3000, 150, () => oneRequest(a)),
      inWaves(3000, 150, () => oneRequest(b)),
    ]);
    expect(peak).toBeLessThanOrEqual(capacity);
    expect(await a.slotsInUse('ch')).toBeLessThanOrEqual(capacity);
    expect([...ga, ...gb].filter(Boolean).length).toBeGreaterThan(3000);
    // As the last waves drain, a reply may find the channel at most a quarter held: its block is
    // then a roomy one (decision 0049), kept through the idle spell (0059) until close.
    await Promise.all([a.close(), b.close()]);
    expect(await admin!.zcard(`${prefix}slots:ch`)).toBe(0);
  });

  it('lends most slots of a channel far from its capacity without a call', async () => {
    const prefix = `${RUN_PREFIX}blocks-lend:`;
    const limiter = await limiterAt(prefix);
    await inWaves(3000, 100, async () => {
      const lease = await limiter.acquireSlot('ch', 10_000, 60_000);
      await sleep(1);
      if (lease !== null) await limiter.releaseSlot(lease);
    });
    expect(limiter.counts.lentSlots + limiter.counts.calls).toBe(3000);
    expect(limiter.counts.calls).toBeLessThan(300);
    // Its block is kept through the idle spell (decision 0059); close gives back every slot.
    await limiter.close();
    expect(await admin!.zcard(`${prefix}slots:ch`)).toBe(0);
  });

  it('takes a block about once a second, not once a lease, for a bucket and channel far from their limits; near one, once a lease', async () => {
    const run = async (name: string, limit: number): Promise<number> => {
      const prefix = `${RUN_PREFIX}blocks-roomy-${name}:`;
      const limiter = await limiterAt(prefix, { windowMs: 60_000 });
      const slot = { channelId: 'roomy-ch', capacity: 1_000, ttlMs: 60_000 };
      // 8 requests every 25 ms for 2 s (320 a second), each holding its slot 20 ms.
      for (let wave = 0; wave < 80; wave++) {
        for (const r of await Promise.all(
          Array.from({ length: 8 }, () => limiter.hitRpmAndAcquire('rpm:m:acct:r', limit, slot)),
        )) {
          expect(r.rpm.allowed).toBe(true);
          if (typeof r.slot === 'object')
            setTimeout(() => void limiter.releaseSlot(r.slot as SlotLease), 20);
        }
        await sleep(25);
      }
      const scriptCalls = limiter.counts.calls + limiter.counts.ahead;
      await limiter.close();
      return scriptCalls;
    };
    // Far from both limits: ~2 s of blocks of ROOMY_LEASES leases, one each for the bucket and
    // the channel, plus the first calls before a reply said so. 100 ms blocks took ~40.
    const roomy = await run('far', 100_000_000);
    expect(roomy).toBeLessThan(16);
    // 640 hits of a limit of 1,000: past a quarter after the first waves, so 100 ms blocks.
    const near = await run('near', 1_000);
    expect(near).toBeGreaterThan(roomy + 8);
  });

  it('fills at most half a channel with blocks, and gives unused slots back once past half', async () => {
    const prefix = `${RUN_PREFIX}blocks-half:`;
    // B makes one call a slot (lease_ms 0), as an instance without blocks would.
    const [a, b] = await Promise.all([limiterAt(prefix), limiterAt(prefix, { leaseMs: 0 })]);
    const take = (l: RedisLimiter, n: number): Promise<Array<SlotLease | null>> =>
      Promise.all(Array.from({ length: n }, () => l.acquireSlot('ch', 40, 60_000)));
    // A is hot and keeps 10 slots: what Redis holds (lent or not) stays within half of 40.
    await makeHot(a, 40);
    const held = await take(a, 10);
    expect(held.every((l) => l !== null)).toBe(true);
    expect(await a.slotsInUse('ch')).toBeLessThanOrEqual(20);
    // B takes 15 more: the channel is past half now.
    expect((await take(b, 15)).every((l) => l !== null)).toBe(true);
    // A's next call to Redis sees it, and A's blocks end at once: Redis holds exactly the leases.
    const calls = a.counts.calls;
    let leases = held.length;
    while (a.counts.calls === calls) {
      expect(await a.acquireSlot('ch', 40, 60_000)).not.toBeNull();
      leases++;
    }
    expect(await a.slotsInUse('ch')).toBe(leases + 15);
    // And the slots A's requests release go back to Redis, not to A's blocks.
    for (const lease of held) await a.releaseSlot(lease!);
    expect(await a.slotsInUse('ch')).toBe(leases - held.length + 15);
    await Promise.all([a.close(), b.close()]);
  });

  it('releasing a lent lease twice does not free the slot it is lent to next', async () => {
    const prefix = `${RUN_PREFIX}blocks-double:`;
    const limiter = await limiterAt(prefix);
    // Make the channel hot, so the next acquisitions are lent from a block.
    await makeHot(limiter, 1000);
    const first = (await limiter.acquireSlot('ch', 1000, 60_000))!;
    await limiter.releaseSlot(first);
    const next = (await limiter.acquireSlot('ch', 1000, 60_000))!;
    expect(next.token).toBe(first.token); // lent again from the block
    await limiter.releaseSlot(first); // a stale second release
    expect(await admin!.zscore(`${prefix}slots:ch`, next.token)).not.toBeNull();
    await limiter.releaseSlot(next);
    await limiter.close();
  });
});

(redisUp ? describe : describe.skip)('redis limiter shared by two gateway processes', () => {
  it('admits exactly 7 of 50 requests split across two processes against a limit of 7', async () => {
    const prefix = `${RUN_PREFIX}shared-rpm:`;
    const [a, b] = await Promise.all([limiterAt(prefix), limiterAt(prefix)]);
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => (i % 2 === 0 ? a : b).hitRpm('rpm:m:acct:1', 7)),
    );
    expect(results.filter((r) => r.allowed)).toHaveLength(7);
    await Promise.all([a.close(), b.close()]);
  });

  it('admits exactly 3 of 20 requests split across two processes to a channel of capacity 3', async () => {
    const prefix = `${RUN_PREFIX}shared-slots:`;
    const [a, b] = await Promise.all([limiterAt(prefix), limiterAt(prefix)]);
    const leases = await Promise.all(
      Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b).acquireSlot('ch', 3, 60_000)),
    );
    const held = leases.filter((l) => l !== null);
    expect(held).toHaveLength(3);
    // A slot taken by one process is freed by the other's release of that lease.
    await b.releaseSlot(held[0]!);
    expect(await a.slotsInUse('ch')).toBe(2);
    await Promise.all([a.close(), b.close()]);
  });

  it('sees a restriction added through the other process', async () => {
    const prefix = `${RUN_PREFIX}shared-bl:`;
    const [a, b] = await Promise.all([limiterAt(prefix), limiterAt(prefix)]);
    const entry = await a.addToBlacklist('ip:5', 60_000, 'abuse');
    expect(await b.isBlacklisted('ip:5')).toEqual(entry);
    await Promise.all([a.close(), b.close()]);
  });

  it('checks the blacklist from its synced copy, and sees changes made elsewhere within a sync', async () => {
    const prefix = `${RUN_PREFIX}mirror-bl:`;
    const [a, b] = await Promise.all([limiterAt(prefix), limiterAt(prefix)]);
    const banned = await a.addToBlacklist('ip:6', 60_000, 'abuse');
    await b.isBlacklisted('ip:6'); // starts b's copy
    await eventually(async () => (await b.isBlacklisted('ip:7')) === null);
    await sleep(SYNC_MS * 2);

    // Synced: a thousand checks, not one Redis command for them.
    const hmget = vi.spyOn(b.client, 'hmget');
    const checks = await Promise.all(
      Array.from({ length: 1000 }, (_, i) => b.isBlacklisted(i % 2 === 0 ? 'ip:6' : 'ip:7')),
    );
    expect(checks.filter((e) => e !== null)).toHaveLength(500);
    expect(checks[0]).toEqual(banned);
    expect(hmget).not.toHaveBeenCalled();

    // A restriction added, then lifted, through the other process reaches b's copy.
    const later = await a.addToBlacklist('ip:7', 60_000, 'more abuse');
    await eventually(async () => (await b.isBlacklisted('ip:7')) !== null);
    expect(await b.isBlacklisted('ip:7')).toEqual(later);
    await a.removeFromBlacklist('ip:6');
    await eventually(async () => (await b.isBlacklisted('ip:6')) === null);
    // And one tripped by a rule there.
    const rule = { name: 'auth_failure', max: 1, windowMs: 60_000, banMs: 60_000 };
    const tripped = await a.recordStrike('ip:8', rule);
    await eventually(async () => (await b.isBlacklisted('ip:8')) !== null);
    expect(await b.isBlacklisted('ip:8')).toEqual(tripped);
    // Changes made through b itself apply to its copy at once.
    await b.removeFromBlacklist('ip:8');
    expect(await b.isBlacklisted('ip:8')).toBeNull();
    expect(hmget).not.toHaveBeenCalled();
    await Promise.all([a.close(), b.close()]);
  });

  it('hears of a change made elsewhere when it is made, not at its next poll', async () => {
    const prefix = `${RUN_PREFIX}pushed-bl:`;
    // Polls a minute apart: only the published change can reach b within the test.
    const [a, b] = await Promise.all([
      limiterAt(prefix, { blacklistSyncMs: 60_000 }),
      limiterAt(prefix, { blacklistSyncMs: 60_000 }),
    ]);
    await b.isBlacklisted('ip:9'); // starts b's copy
    await untilSubscribed(`${prefix}blacklist-mirror`);
    const hmget = vi.spyOn(b.client, 'hmget');
    const fromCopy = async (source: string): Promise<BlacklistEntry | null | undefined> => {
      hmget.mockClear();
      const seen = await b.isBlacklisted(source);
      return hmget.mock.calls.length === 0 ? seen : undefined;
    };
    const entry = await a.addToBlacklist('ip:9', 60_000, 'abuse');
    // Until the sync a message starts has answered, b asks Redis; then its copy has the change.
    await eventually(async () => (await fromCopy('ip:9')) != null);
    expect(await fromCopy('ip:9')).toEqual(entry);
    await a.removeFromBlacklist('ip:9');
    await eventually(async () => (await fromCopy('ip:9')) === null);
    await Promise.all([a.close(), b.close()]);
  });

  it('catches up on a change published while its subscription was down', async () => {
    const prefix = `${RUN_PREFIX}resub-bl:`;
    const name = `${prefix}blacklist-mirror`;
    const [a, b] = await Promise.all([
      limiterAt(prefix, { blacklistSyncMs: 60_000 }),
      limiterAt(prefix, { blacklistSyncMs: 60_000 }),
    ]);
    await b.isBlacklisted('ip:10');
    await untilSubscribed(name);
    const admin = new Redis(REDIS_URL);
    try {
      const killed = await clientId(admin, name);
      await admin.call('CLIENT', 'KILL', 'ID', String(killed));
      // Published while b's subscriber is gone: the message is lost, the version stays.
      const entry = await a.addToBlacklist('ip:10', 60_000, 'abuse');
      // ioredis reconnects within ~50 ms; b subscribes again and reads the version (not at its
      // next poll, a minute away).
      await eventually(async () => {
        const id = await clientId(admin, name);
        return id !== null && id !== killed;
      });
      // Its copy has the change, answering without Redis.
      expect(await listedInCopy(b, 'ip:10')).toEqual(entry);
    } finally {
      await admin.quit();
      await Promise.all([a.close(), b.close()]);
    }
  });
  it('subscribes once Redis lets it, trying again after a refused SUBSCRIBE', async () => {
    const prefix = `${RUN_PREFIX}acl-bl:`;
    const name = `${prefix}blacklist-mirror`;
    // A user whose ACL grants the keys and commands but no channel: SUBSCRIBE fails (NOPERM).
    const user = `switchyard-test-${randomBytes(4).toString('hex')}`;
    const admin = new Redis(REDIS_URL);
    await admin.call('ACL', 'SETUSER', user, 'on', '>pw', `~${prefix}*`, 'resetchannels', '+@all');
    const warned = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    const url = new URL(REDIS_URL);
    url.username = user;
    url.password = 'pw';
    const [a, b] = await Promise.all([
      limiterAt(prefix, { blacklistSyncMs: 60_000 }),
      limiterAt(prefix, { blacklistSyncMs: 60_000, url: url.href }),
    ]);
    const refusals = (): number =>
      warned.mock.calls.filter((c) => String(c[0]).includes('subscribe failed')).length;
    try {
      await b.isBlacklisted('ip:11'); // starts b's copy
      await eventually(async () => refusals() === 1);
      expect(await clientId(admin, name)).toBeNull();
      // The ACL is fixed: the copy subscribes at its next try (1 s after the first refusal, 2 s
      // after the second), with no restart and no second warning.
      await admin.call('ACL', 'SETUSER', user, `&${prefix}bl-version`);
      for (let i = 0; i < 100 && (await clientId(admin, name)) === null; i++) await sleep(50);
      expect(await clientId(admin, name)).not.toBeNull();
      expect(refusals()).toBe(1);
      // A change made elsewhere now reaches b's copy by message (its poll is a minute away).
      const entry = await a.addToBlacklist('ip:11', 60_000, 'abuse');
      expect(await listedInCopy(b, 'ip:11')).toEqual(entry);
    } finally {
      warned.mockRestore();
      await Promise.all([a.close(), b.close()]);
      await admin.call('ACL', 'DELUSER', user);
      await admin.quit();
    }
  });
});

/** Waits until `limiter` answers `source` from its copy (no HMGET) with an entry; that entry. */
async function listedInCopy(limiter: RedisLimiter, source: string): Promise<BlacklistEntry> {
  const hmget = vi.spyOn(limiter.client, 'hmget');
  let seen: BlacklistEntry | null = null;
  try {
    await eventually(async () => {
      hmget.mockClear();
      seen = await limiter.isBlacklisted(source);
      return seen !== null && hmget.mock.calls.length === 0;
    });
  } finally {
    hmget.mockRestore();
  }
  return seen!;
}

/** The id of the connection named `name` (CLIENT LIST), or null. */
async function clientId(admin: Redis, name: string): Promise<number | null> {
  const list = String(await admin.call('CLIENT', 'LIST', 'TYPE', 'pubsub'));
  for (const line of list.split('\n')) {
    if (!line.includes(` name=${name} `)) continue;
    const id = /(?:^|\s)id=(\d+)/.exec(line);
    if (id !== null) return Number(id[1]);
  }
  return null;
}

/** Waits until the connection named `name` is a subscriber. */
async function untilSubscribed(name: string): Promise<void> {
  const admin = new Redis(REDIS_URL);
  try {
    await eventually(async () => (await clientId(admin, name)) !== null);
  } finally {
    await admin.quit();
  }
}

describe('when Redis is unreachable', () => {
  const DEAD = 'redis://127.0.0.1:1';

  it('fail_open serves requests from a per-process limiter and reports degraded', async () => {
    const states: LimiterState[] = [];
    const limiter = createLimiter({
      redisUrl: DEAD,
      onUnreachable: 'fail_open',
      onStateChange: (s) => states.push(s),
    });
    const first = await limiter.hitRpm('rpm:m:acct:1', 1);
    expect(first.allowed).toBe(true);
    // Still limited, by the local fallback.
    expect((await limiter.hitRpm('rpm:m:acct:1', 1)).allowed).toBe(false);
    const lease = await limiter.acquireSlot('ch', 1, 60_000);
    expect(lease).not.toBeNull();
    await limiter.releaseSlot(lease!);
    expect(await limiter.slotsInUse('ch')).toBe(0);
    expect(limiter.state()).toBe('degraded');
    expect(states).toEqual(['degraded']);
    await limiter.close();
  });

  it('fail_closed rejects requests with LimiterUnavailableError and reports degraded', async () => {
    const states: LimiterState[] = [];
    const limiter = createLimiter({
      redisUrl: DEAD,
      onUnreachable: 'fail_closed',
      onStateChange: (s) => states.push(s),
    });
    await expect(limiter.hitRpm('rpm:m:acct:1', 1)).rejects.toBeInstanceOf(LimiterUnavailableError);
    await expect(limiter.acquireSlot('ch', 1, 60_000)).rejects.toBeInstanceOf(
      LimiterUnavailableError,
    );
    await expect(limiter.isBlacklisted('ip:1')).rejects.toBeInstanceOf(LimiterUnavailableError);
    // A release after the response never throws; the slot expires by its ttl.
    await limiter.releaseSlot({ channelId: 'ch', token: 'gone', expiresAtMs: 0 });
    expect(limiter.state()).toBe('degraded');
    expect(states).toEqual(['degraded']);
    await limiter.close();
  });
});

(redisUp && haveRedisServer ? describe : describe.skip)(
  'when Redis goes away and comes back',
  () => {
    async function freePort(): Promise<number> {
      return new Promise((resolve, reject) => {
        const server = createServer();
        server.once('error', reject);
        server.listen(0, '127.0.0.1', () => {
          const address = server.address();
          server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
        });
      });
    }

    async function startRedis(port: number): Promise<ChildProcess> {
      const child = spawn(
        'redis-server',
        // DEBUG SLEEP (off by default since Redis 7) stalls the server for the timeout test.
        [
          '--port',
          String(port),
          '--save',
          '',
          '--appendonly',
          'no',
          '--enable-debug-command',
          'yes',
        ],
        {
          stdio: 'ignore',
        },
      );
      await waitFor(() => redisAnswers(`redis://127.0.0.1:${port}`), 10_000);
      return child;
    }

    async function stopRedis(child: ChildProcess): Promise<void> {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    }

    async function waitFor(
      check: () => boolean | Promise<boolean>,
      timeoutMs: number,
    ): Promise<void> {
      const deadline = Date.now() + timeoutMs;
      while (!(await check())) {
        if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
        await sleep(50);
      }
    }

    it('degrades under each policy while it is down and returns to shared limits after', async () => {
      const port = await freePort();
      const url = `redis://127.0.0.1:${port}`;
      let server = await startRedis(port);
      const openStates: LimiterState[] = [];
      const closedStates: LimiterState[] = [];
      const open = createLimiter({
        redisUrl: url,
        onUnreachable: 'fail_open',
        onStateChange: (s) => openStates.push(s),
      });
      const closed = createLimiter({
        redisUrl: url,
        onUnreachable: 'fail_closed',
        onStateChange: (s) => closedStates.push(s),
      });
      try {
        // Shared: a hit through one is counted by the other.
        expect((await open.hitRpm('rpm:before', 1)).allowed).toBe(true);
        expect((await closed.hitRpm('rpm:before', 1)).allowed).toBe(false);
        expect([open.state(), closed.state()]).toEqual(['ok', 'ok']);

        await stopRedis(server);
        await waitFor(() => open.state() === 'degraded' && closed.state() === 'degraded', 10_000);
        expect((await open.hitRpm('rpm:during', 1)).allowed).toBe(true);
        await expect(closed.hitRpm('rpm:during', 1)).rejects.toBeInstanceOf(
          LimiterUnavailableError,
        );

        server = await startRedis(port);
        await waitFor(() => open.state() === 'ok' && closed.state() === 'ok', 10_000);
        // Shared again: the fresh server counts hits from both.
        expect((await closed.hitRpm('rpm:after', 1)).allowed).toBe(true);
        expect((await open.hitRpm('rpm:after', 1)).allowed).toBe(false);
        expect(openStates).toEqual(['degraded', 'ok']);
        expect(closedStates).toEqual(['degraded', 'ok']);
      } finally {
        await Promise.all([open.close(), closed.close()]);
        await stopRedis(server);
      }
    });

    it('serves from the fallback while a connected Redis stops answering, then returns', async () => {
      const port = await freePort();
      const server = await startRedis(port);
      const states: LimiterState[] = [];
      const limiter = createLimiter({
        redisUrl: `redis://127.0.0.1:${port}`,
        onUnreachable: 'fail_open',
        onStateChange: (s) => states.push(s),
      });
      const admin = new Redis(port);
      try {
        expect((await limiter.hitRpm('rpm:stall', 2)).remaining).toBe(1);
        const stalled = admin.call('DEBUG', 'SLEEP', '1');
        await sleep(20);
        // The command times out (250 ms); the hit is admitted by the local fallback instead.
        expect((await limiter.hitRpm('rpm:stall', 2)).remaining).toBe(1);
        expect(limiter.state()).toBe('degraded');
        await stalled;
        // One call per second probes Redis; once it answers, the shared limits apply again.
        await waitFor(async () => {
          await limiter.hitRpm('rpm:probe', 1000);
          return limiter.state() === 'ok';
        }, 10_000);
        expect(states).toEqual(['degraded', 'ok']);
      } finally {
        await limiter.close();
        await admin.quit();
        await stopRedis(server);
      }
    });
  },
);
