// Blocks of RPM hits and capacity slots that the Redis limiter reserves in one script call and
// hands out in this process (decision 0031): a hot bucket goes to Redis about once per lease
// period instead of once per request. Bookkeeping only; the Redis calls are in redis-limiter.ts.

/** The most hits or slots one block reserves (a ZADD of ~1,000 members is ~1 ms on the server). */
export const MAX_BLOCK = 1024;

/** Calls a period below which a bucket or channel is cold and every call goes to Redis alone. */
const HOT_CALLS = 4;

/**
 * Demand for one RPM bucket or one channel's slots, counted per period of `periodMs` (the lease
 * time), and the block request in flight that concurrent calls wait for.
 */
export class Demand {
  private periodStart: number;
  private thisPeriod: number;
  private lastPeriod: number;
  /** A block was asked and not granted (the limit is near): calls go to Redis alone until then. */
  exactUntil: number;
  /** The block request in flight; concurrent calls wait for it rather than ask their own. */
  pending: Promise<unknown> | null;
  /** When a call last came, to drop idle entries. */
  lastCallAt: number;

  constructor() {
    this.periodStart = -Infinity;
    this.thisPeriod = 0;
    this.lastPeriod = 0;
    this.exactUntil = -Infinity;
    this.pending = null;
    this.lastCallAt = -Infinity;
  }

  /** Counts one call at `now`. */
  note(now: number, periodMs: number): void {
    if (now - this.periodStart >= periodMs) {
      this.lastPeriod = now - this.periodStart < 2 * periodMs ? this.thisPeriod : 0;
      this.thisPeriod = 0;
      this.periodStart = now;
    }
    this.thisPeriod++;
    this.lastCallAt = now;
  }

  /** Calls seen in the last whole period or this one, whichever is more. */
  rate(): number {
    return Math.max(this.lastPeriod, this.thisPeriod);
  }

  /** Whether a block is worth asking for: the entry is hot and not held exact. */
  hot(now: number): boolean {
    return now >= this.exactUntil && this.rate() >= HOT_CALLS;
  }
}

/** RPM hits reserved in Redis (dated at the grant plus the lease) for this process to admit. */
export interface RpmBlock {
  readonly limit: number;
  /** Counter of the next member to hand out; the block holds [next, end). */
  next: number;
  readonly end: number;
  /** performance.now() after which no hit of the block may be admitted (sent + leaseMs). */
  readonly usableUntil: number;
  /** Remaining in the window at the grant, the block already subtracted. */
  readonly remainingAtGrant: number;
  /** performance.now() when the window's oldest hit leaves it, as the grant saw it. */
  readonly resetAt: number;
}

export class BucketGrants extends Demand {
  block: RpmBlock | null = null;

  /** Hits worth asking for in one block: twice the recent rate, or 1 (exact) when cold. */
  want(now: number): number {
    return this.hot(now) ? Math.min(MAX_BLOCK, 2 * this.rate()) : 1;
  }
}

/** Slots of one channel held in Redis (expiry = grant + ttl + lease) for this process to lend. */
export interface SlotBlock {
  readonly capacity: number;
  readonly ttlMs: number;
  /** Tokens held and not lent. A lent token comes back here while the block is usable. */
  readonly free: string[];
  /** performance.now() after which the block lends nothing (sent + leaseMs). */
  readonly usableUntil: number;
  readonly expiresAtMs: number;
}

export class ChannelGrants extends Demand {
  /** Blocks still lending, oldest first (a burst can need a second before the first ends). */
  blocks: SlotBlock[] = [];
  /** Leases of this channel held by requests in this process. */
  inUse = 0;

  /** Slots worth holding: twice those in use plus two, or 1 (exact) when cold. */
  want(now: number): number {
    return this.hot(now) ? Math.min(MAX_BLOCK, Math.max(HOT_CALLS, 2 * this.inUse + 2)) : 1;
  }

  /** A free token of a usable block made for this capacity and at least this ttl, or null. */
  lend(capacity: number, ttlMs: number, now: number): { token: string; block: SlotBlock } | null {
    for (const block of this.blocks) {
      if (now >= block.usableUntil || block.capacity !== capacity || block.ttlMs < ttlMs) continue;
      const token = block.free.pop();
      if (token !== undefined) return { token, block };
    }
    return null;
  }
}
