// The block sizes the Redis limiter asks for, from the demand it has seen (local-grants.ts):
// pure bookkeeping, driven here with made-up clock readings.
import { describe, expect, it } from 'vitest';
import {
  BucketGrants,
  ChannelGrants,
  ROOMY_LEASES,
  WAKE_MS,
  WARM_LEASES,
} from '../../src/limits/local-grants.ts';
import { sharedLeases } from '../../src/limits/redis-limiter.ts';

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

  it('gives a hot bucket far from its limit blocks of ROOMY_LEASES leases, sized for them', () => {
    const b = new BucketGrants();
    const last = calls(b, 1_000, 10, 10); // 100 a second: 10 in a 100 ms period
    expect(b.leases(last)).toBe(1);
    expect(b.want(last)).toBe(20);
    b.roomy = true; // a reply found the bucket at most a quarter used
    expect(b.leases(last)).toBe(ROOMY_LEASES);
    expect(b.want(last)).toBe(20 * ROOMY_LEASES);
    b.roomy = false; // the next reply found it past a quarter
    expect(b.leases(last)).toBe(1);
  });

  it('keeps a roomy channel block sized by the slots in use, and a cold entry exact', () => {
    const c = new ChannelGrants();
    c.roomy = true;
    c.note(1_000, LEASE);
    expect(c.leases(1_000)).toBe(1); // one call: not hot
    for (let i = 0; i < 8; i++) c.took();
    const last = calls(c, 1_001, 8, 5);
    expect(c.leases(last)).toBe(ROOMY_LEASES);
    expect(c.want(last)).toBe(2 * 8 + 2);
  });

  it('shares one lease between the two blocks of a call: a warm one, else the shorter', () => {
    expect(sharedLeases(0, 0)).toBe(1);
    expect(sharedLeases(ROOMY_LEASES, 0)).toBe(ROOMY_LEASES);
    expect(sharedLeases(0, ROOMY_LEASES)).toBe(ROOMY_LEASES);
    expect(sharedLeases(ROOMY_LEASES, ROOMY_LEASES)).toBe(ROOMY_LEASES);
    // A bucket near its limit never holds a long block because its channel is roomy.
    expect(sharedLeases(1, ROOMY_LEASES)).toBe(1);
    expect(sharedLeases(ROOMY_LEASES, 1)).toBe(1);
    expect(sharedLeases(WARM_LEASES, 1)).toBe(WARM_LEASES);
    expect(sharedLeases(ROOMY_LEASES, WARM_LEASES)).toBe(WARM_LEASES);
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

  it('keeps a small block of ROOMY_LEASES leases at hand through an idle spell while roomy and remembering the hot spell', () => {
    const b = new BucketGrants();
    const last = calls(b, 1_000, 50, 2); // 50 in a 100 ms period
    b.roomy = true;
    expect(b.want(last)).toBe(2 * 50 * ROOMY_LEASES);
    const idle = last + 3_000;
    expect(b.keepsBlock(idle)).toBe(true);
    // One lease's worth at the last rate, twice over: a tenth of the block it asks for when hot.
    expect(b.keepWant()).toBe(2 * 50);
    expect(b.leases(idle)).toBe(ROOMY_LEASES);
    expect(b.keepsBlock(last + WAKE_MS + 1)).toBe(false);
    b.exactUntil = idle + LEASE; // a refused block holds it exact
    expect(b.keepsBlock(idle)).toBe(false);
    b.exactUntil = -Infinity;
    b.roomy = false; // the last reply found it past a quarter used
    expect(b.keepsBlock(idle)).toBe(false);
    expect(b.leases(idle)).toBe(1);
    // A channel keeps what its hot want is: twice its peak in use, plus two.
    const c = new ChannelGrants();
    c.roomy = true;
    for (let i = 0; i < 5; i++) c.took();
    const cLast = calls(c, 1_000, 8, 5);
    c.inUse = 0;
    expect(c.keepsBlock(cLast + 3_000)).toBe(true);
    expect(c.keepWant()).toBe(2 * 5 + 2);
    expect(c.leases(cLast + 3_000)).toBe(ROOMY_LEASES);
  });

  it('asks a warm bucket (under 4 calls a period, 8 or more a second) for two warm leases of calls', () => {
    const b = new BucketGrants();
    const last = calls(b, 1_000, 20, 50); // 20 a second, never 4 in 100 ms
    expect(b.want(last)).toBe(Math.ceil((2 * 20 * 5) / 10));
  });
});
