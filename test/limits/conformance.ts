// The one conformance suite both limiter backends pass (DESIGN invariant 9). A backend supplies a
// harness: a fresh limiter and a way to let time pass (a fake clock, or real sleeping for Redis).
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Limiter } from '../../src/limits/limiter.ts';

export type LimiterHarness = {
  limiter: Limiter;
  /** The RPM window the limiter was built with. */
  windowMs: number;
  /** Lets `ms` pass on the limiter's clock. */
  advance(ms: number): Promise<void>;
  close(): Promise<void>;
};

export function limiterConformance(
  backend: string,
  makeHarness: () => Promise<LimiterHarness>,
  skip = false,
): void {
  (skip ? describe.skip : describe)(`limiter conformance: ${backend}`, () => {
    let h: LimiterHarness;
    let limiter: Limiter;

    beforeEach(async () => {
      h = await makeHarness();
      limiter = h.limiter;
    });
    afterEach(async () => {
      await h.close();
    });

    describe('requests per minute', () => {
      it('admits exactly 7 of 50 concurrent requests against a limit of 7', async () => {
        const results = await Promise.all(
          Array.from({ length: 50 }, () => limiter.hitRpm('rpm:m:acct:1', 7)),
        );
        const allowed = results.filter((r) => r.allowed);
        const rejected = results.filter((r) => !r.allowed);
        expect(allowed).toHaveLength(7);
        expect(allowed.map((r) => r.remaining).sort()).toEqual([0, 1, 2, 3, 4, 5, 6]);
        for (const r of allowed) {
          expect(r.retryAfterSeconds).toBe(0);
          expect(r.limit).toBe(7);
        }
        for (const r of rejected) {
          expect(r.remaining).toBe(0);
          expect(r.resetMs).toBeGreaterThan(0);
          expect(r.resetMs).toBeLessThanOrEqual(h.windowMs);
          expect(r.retryAfterSeconds).toBeGreaterThanOrEqual(1);
          expect(r.retryAfterSeconds).toBeLessThanOrEqual(Math.ceil(h.windowMs / 1000));
        }
      });

      it('keeps buckets apart, so one account at its limit does not block another', async () => {
        expect((await limiter.hitRpm('rpm:m:acct:a', 1)).allowed).toBe(true);
        expect((await limiter.hitRpm('rpm:m:acct:a', 1)).allowed).toBe(false);
        expect((await limiter.hitRpm('rpm:m:acct:b', 1)).allowed).toBe(true);
      });

      it('admits again once the window slides past the oldest request', async () => {
        const w = h.windowMs;
        expect((await limiter.hitRpm('rpm:slide', 2)).allowed).toBe(true);
        await h.advance(w * 0.5);
        expect((await limiter.hitRpm('rpm:slide', 2)).allowed).toBe(true);
        const full = await limiter.hitRpm('rpm:slide', 2);
        expect(full.allowed).toBe(false);
        // The first request leaves the window in about half a window, not a whole one.
        expect(full.resetMs).toBeLessThanOrEqual(w * 0.5);
        await h.advance(w * 0.6);
        // Only the first request left the window; the second still counts.
        const again = await limiter.hitRpm('rpm:slide', 2);
        expect(again).toMatchObject({ allowed: true, remaining: 0, retryAfterSeconds: 0 });
        expect((await limiter.hitRpm('rpm:slide', 2)).allowed).toBe(false);
      });

      it('rejects everything with a limit of 0', async () => {
        const r = await limiter.hitRpm('rpm:zero', 0);
        expect(r).toMatchObject({ allowed: false, limit: 0, remaining: 0 });
        expect(r.retryAfterSeconds).toBeGreaterThanOrEqual(1);
      });
    });

    describe('RPM and a slot in one call', () => {
      it('of 20 concurrent requests, admits exactly 5 by RPM and gives 3 of them the slots', async () => {
        const slot = { channelId: 'ch-both', capacity: 3, ttlMs: 60_000 };
        const results = await Promise.all(
          Array.from({ length: 20 }, () => limiter.hitRpmAndAcquire('rpm:both', 5, slot)),
        );
        const allowed = results.filter((r) => r.rpm.allowed);
        expect(allowed).toHaveLength(5);
        const leases = allowed.flatMap((r) => (typeof r.slot === 'object' ? [r.slot] : []));
        expect(leases).toHaveLength(3);
        expect(new Set(leases.map((l) => l.token)).size).toBe(3);
        expect(allowed.filter((r) => r.slot === 'full')).toHaveLength(2);
        // A request refused by RPM holds no slot, and says when to come back.
        const refused = results.filter((r) => !r.rpm.allowed);
        expect(refused.every((r) => r.slot === 'none' && r.rpm.retryAfterSeconds >= 1)).toBe(true);
        expect(await limiter.slotsInUse('ch-both')).toBe(3);
        // The leases are ordinary: releasing one frees a slot for acquireSlot.
        await limiter.releaseSlot(leases[0]!);
        expect(await limiter.acquireSlot('ch-both', 3, 60_000)).not.toBeNull();
        expect(await limiter.acquireSlot('ch-both', 3, 60_000)).toBeNull();
      });

      it('counts like hitRpm when no slot is asked for', async () => {
        const first = await limiter.hitRpmAndAcquire('rpm:alone', 2, null);
        expect(first).toMatchObject({
          rpm: { allowed: true, limit: 2, remaining: 1 },
          slot: 'none',
        });
        expect((await limiter.hitRpm('rpm:alone', 2)).remaining).toBe(0);
        expect((await limiter.hitRpmAndAcquire('rpm:alone', 2, null)).rpm.allowed).toBe(false);
      });
    });

    describe('channel capacity', () => {
      it('admits exactly 3 of 20 concurrent requests to a channel of capacity 3', async () => {
        const leases = await Promise.all(
          Array.from({ length: 20 }, () => limiter.acquireSlot('ch-race', 3, 60_000)),
        );
        const held = leases.filter((l) => l !== null);
        expect(held).toHaveLength(3);
        expect(new Set(held.map((l) => l.token)).size).toBe(3);
        expect(await limiter.slotsInUse('ch-race')).toBe(3);
      });

      it('frees a slot for the next request when a request releases it', async () => {
        const a = await limiter.acquireSlot('ch-release', 1, 60_000);
        expect(a).not.toBeNull();
        expect(await limiter.acquireSlot('ch-release', 1, 60_000)).toBeNull();
        await limiter.releaseSlot(a!);
        expect(await limiter.slotsInUse('ch-release')).toBe(0);
        expect(await limiter.acquireSlot('ch-release', 1, 60_000)).not.toBeNull();
      });

      it("releasing a lease twice does not free another request's slot", async () => {
        const a = await limiter.acquireSlot('ch-double', 1, 60_000);
        await limiter.releaseSlot(a!);
        const b = await limiter.acquireSlot('ch-double', 1, 60_000);
        expect(b).not.toBeNull();
        await limiter.releaseSlot(a!);
        expect(await limiter.slotsInUse('ch-double')).toBe(1);
        expect(await limiter.acquireSlot('ch-double', 1, 60_000)).toBeNull();
      });

      it('reclaims a slot whose holder never released it once its ttl passes', async () => {
        const lost = await limiter.acquireSlot('ch-ttl', 1, 500);
        expect(lost).not.toBeNull();
        expect(await limiter.acquireSlot('ch-ttl', 1, 500)).toBeNull();
        await h.advance(650);
        expect(await limiter.slotsInUse('ch-ttl')).toBe(0);
        expect(await limiter.acquireSlot('ch-ttl', 1, 500)).not.toBeNull();
        // The late release of the expired lease must not free the new holder's slot.
        await limiter.releaseSlot(lost!);
        expect(await limiter.slotsInUse('ch-ttl')).toBe(1);
      });

      it('keeps a renewed slot past its first ttl, and refuses to renew an expired one', async () => {
        const lease = await limiter.acquireSlot('ch-renew', 1, 1000);
        const before = lease!.expiresAtMs;
        await h.advance(600);
        expect(await limiter.renewSlot(lease!, 1000)).toBe(true);
        expect(lease!.expiresAtMs).toBeGreaterThan(before);
        await h.advance(600);
        expect(await limiter.acquireSlot('ch-renew', 1, 1000)).toBeNull();
        await h.advance(600);
        expect(await limiter.renewSlot(lease!, 1000)).toBe(false);
        expect(await limiter.slotsInUse('ch-renew')).toBe(0);
      });
    });

    describe('temporary blacklist', () => {
      const rule = { name: 'bad-key', max: 3, windowMs: 60_000, banMs: 60_000 };

      it('restricts a source on its third strike within the window', async () => {
        expect(await limiter.recordStrike('ip:1', rule)).toBeNull();
        expect(await limiter.recordStrike('ip:1', rule)).toBeNull();
        expect(await limiter.isBlacklisted('ip:1')).toBeNull();
        const entry = await limiter.recordStrike('ip:1', rule);
        expect(entry).toMatchObject({ source: 'ip:1', addedBy: 'rule' });
        expect(entry!.reason).toContain('bad-key');
        expect(await limiter.isBlacklisted('ip:1')).toEqual(entry);
        expect(await limiter.isBlacklisted('ip:2')).toBeNull();
      });

      it('does not count strikes that left the window', async () => {
        const short = { name: 'short', max: 2, windowMs: 500, banMs: 60_000 };
        expect(await limiter.recordStrike('ip:slow', short)).toBeNull();
        await h.advance(650);
        expect(await limiter.recordStrike('ip:slow', short)).toBeNull();
        expect(await limiter.isBlacklisted('ip:slow')).toBeNull();
        expect(await limiter.recordStrike('ip:slow', short)).not.toBeNull();
      });

      it('lifts a rule restriction after banMs', async () => {
        const brief = { name: 'brief', max: 1, windowMs: 60_000, banMs: 500 };
        expect(await limiter.recordStrike('ip:brief', brief)).not.toBeNull();
        expect(await limiter.isBlacklisted('ip:brief')).not.toBeNull();
        await h.advance(650);
        expect(await limiter.isBlacklisted('ip:brief')).toBeNull();
        expect(await limiter.listBlacklist()).toEqual([]);
      });

      it('lets an admin add, list and remove restrictions', async () => {
        const a = await limiter.addToBlacklist('acct:7', 3_600_000, 'chargeback');
        const b = await limiter.addToBlacklist('ip:9', 60_000, 'abuse report');
        expect(a).toMatchObject({ source: 'acct:7', reason: 'chargeback', addedBy: 'admin' });
        expect(a.untilMs - b.untilMs).toBeGreaterThan(3_000_000);
        expect(await limiter.isBlacklisted('acct:7')).toEqual(a);
        // Soonest to lift first.
        expect(await limiter.listBlacklist()).toEqual([b, a]);
        expect(await limiter.removeFromBlacklist('acct:7')).toBe(true);
        expect(await limiter.removeFromBlacklist('acct:7')).toBe(false);
        expect(await limiter.isBlacklisted('acct:7')).toBeNull();
        expect(await limiter.listBlacklist()).toEqual([b]);
      });

      it('does not shorten a longer admin restriction when a rule trips', async () => {
        const admin = await limiter.addToBlacklist('ip:long', 3_600_000, 'manual');
        const brief = { name: 'brief', max: 1, windowMs: 60_000, banMs: 500 };
        expect(await limiter.recordStrike('ip:long', brief)).toEqual(admin);
        await h.advance(650);
        expect(await limiter.isBlacklisted('ip:long')).toEqual(admin);
      });
    });
  });
}
