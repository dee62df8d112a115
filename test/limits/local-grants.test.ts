// The block sizes the Redis limiter asks for, from the demand it has seen (local-grants.ts):
// pure bookkeeping, driven here with made-up clock readings.
import { describe, expect, it } from 'vitest';
import { BucketGrants, ChannelGrants, WAKE_MS } from '../../src/limits/local-grants.ts';

const LEASE = 100;

/** `n` calls `gapMs` apart from `from`; returns the time of the last. */
function calls(
  entry: BucketGrants | ChannelGrants,
  from: number,
  n: number,
  gapMs: number,
): number {
  let now = from;
  for (let i = 0; i < n; i++) {
    now = from + i * gapMs;
    entry.note(now, LEASE);
  }
  return now;
}

describe('local grants: the block an entry asks for', () => {
  it('asks for one hit (exact) when it has never been busy', () => {
    const b = new BucketGrants();
    b.note(1_000, LEASE);
    expect(b.want(1_000)).toBe(1);
  });

  it('asks a hot bucket for twice its rate a lease period', () => {
    const b = new BucketGrants();
    const last = calls(b, 1_000, 50, 2); // 500 a second: 50 in a 100 ms period
    expect(b.want(last)).toBe(100);
  });

  it('asks for the block it had when hot at the first call after an idle spell', () => {
    const b = new BucketGrants();
    const last = calls(b, 1_000, 50, 2);
    // 3 s idle: both the lease periods and the long (1 s) ones rolled over to nothing.
    const wake = last + 3_000;
    b.note(wake, LEASE);
    expect(b.want(wake)).toBe(100);
    // A slot entry remembers its peak in use the same way: twice it, plus two.
    const c = new ChannelGrants();
    let now = 1_000;
    for (let i = 0; i < 20; i++) {
      now = 1_000 + i * 2;
      c.note(now, LEASE);
      c.took();
      if (c.inUse === 3) c.inUse = 0; // at most 3 held at once
    }
    const cWake = now + 3_000;
    c.inUse = 0;
    c.note(cWake, LEASE);
    expect(c.want(cWake)).toBe(2 * 3 + 2);
  });

  it('is exact again once the spell passes WAKE_MS, and while a refused block holds it exact', () => {
    const b = new BucketGrants();
    const last = calls(b, 1_000, 50, 2);
    expect(b.remembers(last + WAKE_MS - 1)).toBe(true);
    const late = last + WAKE_MS + 1;
    b.note(late, LEASE);
    expect(b.remembers(late)).toBe(false);
    expect(b.want(late)).toBe(1);

    const held = new BucketGrants();
    const end = calls(held, 1_000, 50, 2);
    const wake = end + 3_000;
    held.exactUntil = wake + LEASE;
    held.note(wake, LEASE);
    expect(held.want(wake)).toBe(1);
  });

  it('asks a warm bucket (under 4 calls a period, 8 or more a second) for two warm leases of calls', () => {
    const b = new BucketGrants();
    const last = calls(b, 1_000, 20, 50); // 20 a second, never 4 in 100 ms
    expect(b.want(last)).toBe(Math.ceil((2 * 20 * 5) / 10));
  });
});
