// The memory limiter against the shared conformance suite (on a fake clock), plus its sweep.
import { describe, expect, it } from 'vitest';
import { createLimiter } from '../../src/limits/create-limiter.ts';
import { MemoryLimiter } from '../../src/limits/memory-limiter.ts';
import { limiterConformance } from './conformance.ts';

function fakeClock(): { now: () => number; advance: (ms: number) => void } {
  let t = Date.now();
  return {
    now: () => t,
    advance: (ms) => {
      t += ms;
    },
  };
}

limiterConformance('memory', async () => {
  const clock = fakeClock();
  const limiter = new MemoryLimiter({ windowMs: 60_000, now: clock.now, sweepIntervalMs: 0 });
  return {
    limiter,
    windowMs: 60_000,
    advance: async (ms) => clock.advance(ms),
    close: () => limiter.close(),
  };
});

describe('memory limiter upkeep', () => {
  it('stays flat over 200,000 requests whose buckets keep changing', async () => {
    const clock = fakeClock();
    const limiter = new MemoryLimiter({ windowMs: 60_000, now: clock.now, sweepIntervalMs: 0 });
    const rule = { name: 'r', max: 5, windowMs: 10_000, banMs: 1_000 };
    let peak = 0;
    for (let i = 0; i < 200_000; i++) {
      // A request every 30 ms, 10 per account, then a new account: 20,000 buckets in all, of
      // which a 60 s window (2,000 requests) holds 200.
      await limiter.hitRpm(`rpm:m:acct:${Math.floor(i / 10)}`, 100);
      if (i % 10 === 0) await limiter.recordStrike(`ip:${Math.floor(i / 100)}`, rule);
      const lease = await limiter.acquireSlot(`ch:${i % 50}`, 10, 30_000);
      if (lease !== null && i % 7 !== 0) await limiter.releaseSlot(lease);
      clock.advance(30);
      if (i % 2_000 === 1_999) {
        peak = Math.max(peak, limiter.stats().rpmBuckets);
        limiter.sweep();
      }
    }
    // Before each sweep: the 200 live buckets plus the 200 that went idle since the last one.
    expect(peak).toBeGreaterThanOrEqual(200);
    expect(peak).toBeLessThanOrEqual(400);
    clock.advance(60_001);
    limiter.sweep();
    expect(limiter.stats()).toEqual({
      rpmBuckets: 0,
      slotChannels: 0,
      strikeLogs: 0,
      blacklisted: 0,
    });
    await limiter.close();
  });

  it('is what createLimiter returns without a Redis URL, always in state ok', async () => {
    const limiter = createLimiter({ redisUrl: null, onUnreachable: 'fail_closed' });
    expect(limiter.state()).toBe('ok');
    expect((await limiter.hitRpm('rpm:x', 1)).allowed).toBe(true);
    expect(limiter).toBeInstanceOf(MemoryLimiter);
    await limiter.close();
  });
});
