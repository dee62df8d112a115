// Blocks of RPM hits and capacity slots that the Redis limiter reserves in one script call and
// hands out in this process (decision 0031): a hot bucket goes to Redis about once per lease
// period instead of once per request. Bookkeeping only; the Redis calls are in redis-limiter.ts.

/** The most hits or slots one block reserves (a ZADD of ~1,000 members is ~1 ms on the server). */
export const MAX_BLOCK = 1024;

/** Calls a period below which a bucket or channel is not hot. */
const HOT_CALLS = 4;

/**
 * A bucket or channel below HOT_CALLS but with at least WARM_CALLS calls over the last
 * LONG_PERIODS periods (8 a second at the default lease) is warm: its block lasts WARM_LEASES
 * lease periods and holds about two of them's worth of calls. At 16 streams a second (the
 * benchmark's paced section) every call was a round trip before the first byte, ~0.7 ms of the
 * Postgres+Redis gateway's TTFT on that host (decision 0032). Below, the entry is cold: every call
 * goes to Redis alone.
 */
const WARM_CALLS = 8;
const LONG_PERIODS = 10;
export const WARM_LEASES = 5;

/**
 * How long an entry remembers the block it asked for when last hot, through an idle spell
 * (decision 0047). An idle spell of two long periods (2 s) leaves it cold: without this the first
 * calls after it went to Redis one at a time until four made it hot again, and every call that
 * came meanwhile waited behind them (4 round trips in a row at each of the benchmark's turns; with
 * one, and decision 0048, a turn's first 10 requests read 0.72-0.89 ms at p50 against 1.02-1.39
 * on a slow host). Now the first call after the spell asks for that block, and the calls behind
 * it wait for the one reply.
 */
export const WAKE_MS = 10_000;

/**
 * A hot bucket or channel that its last reply found at most a quarter used takes blocks of this
 * many lease periods (decision 0049), a bucket's sized to match. Blocks of one lease each made a
 * script call per entry every 100 ms however far the limit was: with 8 streams back to back on a
 * slow host, ~190 µs of the gateway's main thread a stream in ioredis and the sweep, two thirds of
 * what it spent over the bare proxy's. Held back unused, a block's hits or slots still count for
 * at most ~1.5 leases of its own, and a slot block still fills at most half a channel.
 */
export const ROOMY_LEASES = 10;

/** Calls counted per period of fixed length: the current period's and the last whole one's. */
class PeriodCount {
  private start = -Infinity;
  private current = 0;
  private last = 0;

  /** Counts one call at `now`; true when it starts a new period. */
  add(now: number, periodMs: number): boolean {
    const rolled = now - this.start >= periodMs;
    if (rolled) {
      this.last = now - this.start < 2 * periodMs ? this.current : 0;
      this.current = 0;
      this.start = now;
    }
    this.current++;
    return rolled;
  }

  /** This period's count or the last whole one's, whichever is more. */
  max(): number {
    return Math.max(this.last, this.current);
  }
}

/**
 * Demand for one RPM bucket or one channel's slots, counted per period of `periodMs` (the lease
 * time) and per LONG_PERIODS of them, and the block request in flight that concurrent calls wait
 * for.
 */
export class Demand {
  private readonly periods = new PeriodCount();
  /** The same over periods LONG_PERIODS times as long, for the warm tier. */
  private readonly longPeriods = new PeriodCount();
  /** A block was asked and not granted (the limit is near): calls go to Redis alone until then. */
  exactUntil: number;
  /** The block request in flight; concurrent calls wait for it rather than ask their own. */
  pending: Promise<unknown> | null;
  /** When a call last came, to drop idle entries. */
  lastCallAt: number;
  /** When a call last found the entry hot, and the block it would have asked for then. */
  private hotAt: number;
  private wakeWant: number;
  /** The last reply found the bucket or channel at most a quarter used (ROOMY_LEASES). */
  roomy: boolean;

  constructor() {
    this.exactUntil = -Infinity;
    this.pending = null;
    this.lastCallAt = -Infinity;
    this.hotAt = -Infinity;
    this.wakeWant = 1;
    this.roomy = false;
  }

  /** Counts one call at `now`. */
  note(now: number, periodMs: number): void {
    if (this.periods.add(now, periodMs)) this.newPeriod();
    this.longPeriods.add(now, periodMs * LONG_PERIODS);
    this.lastCallAt = now;
    if (this.rate() >= HOT_CALLS) {
      this.hotAt = now;
      this.wakeWant = this.hotWant();
    }
  }

  /**
   * Hits or slots worth asking for in one block: hot, what hotWant says; warm, two warm leases'
   * worth; cold but hot within WAKE_MS and not held exact, the block it would have asked for
   * when last hot; otherwise 1 (exact).
   */
  want(now: number): number {
    if (this.hot(now)) return this.hotWant();
    if (this.warm(now)) return this.warmWant();
    return now >= this.exactUntil && this.remembers(now) ? this.wakeWant : 1;
  }

  /**
   * Lease periods a block asked for now lasts: warm WARM_LEASES, hot and roomy ROOMY_LEASES,
   * else 1.
   */
  leases(now: number): number {
    if (this.warm(now)) return WARM_LEASES;
    return this.roomy && (this.hot(now) || this.keepsBlock(now)) ? ROOMY_LEASES : 1;
  }

  /**
   * Whether the sweep keeps a block at hand though no call came: the entry was far from its limit
   * at the last reply, is not held exact, and still remembers being hot.
   */
  keepsBlock(now: number): boolean {
    return this.roomy && now >= this.exactUntil && this.remembers(now);
  }

  /** Whether the entry is worth keeping though idle: it still remembers being hot. */
  remembers(now: number): boolean {
    return now - this.hotAt < WAKE_MS;
  }

  /** A hot entry's block; each kind of entry sizes its own. */
  protected hotWant(): number {
    return HOT_CALLS;
  }

  /**
   * The block the sweep keeps at hand through an idle spell (keepsBlock): what one lease period
   * of the last demand asks for, so that holding it costs little; the calls of a burst that it
   * does not cover ask for a full block ahead while it still serves.
   */
  keepWant(): number {
    return this.hotWant();
  }

  /**
   * Whether a call came within `ms` (the sweep renews blocks only for entries still called).
   */
  calledWithin(ms: number, now: number): boolean {
    return now - this.lastCallAt < ms;
  }

  /** A new period starts (ChannelGrants rolls its peak). */
  protected newPeriod(): void {}

  /** Calls seen in the last whole period or this one, whichever is more. */
  rate(): number {
    return this.periods.max();
  }

  /** Calls seen in the last whole long period or this one, whichever is more. */
  longRate(): number {
    return this.longPeriods.max();
  }

  /** Whether a block is worth asking for: the entry is hot and not held exact. */
  hot(now: number): boolean {
    return now >= this.exactUntil && this.rate() >= HOT_CALLS;
  }

  /** Not hot, not held exact, but busy enough over the long period for a long-lived block. */
  warm(now: number): boolean {
    return now >= this.exactUntil && this.rate() < HOT_CALLS && this.longRate() >= WARM_CALLS;
  }

  /**
   * The calls a warm block should cover: twice those expected in its WARM_LEASES periods, from
   * the long period's count.
   */
  protected warmWant(): number {
    return Math.min(MAX_BLOCK, Math.ceil((2 * this.longRate() * WARM_LEASES) / LONG_PERIODS));
  }
}

/** What every block has: its size and when it was asked for and stops serving. */
interface Granted {
  /** Hits or tokens the block was granted with. */
  readonly size: number;
  /** performance.now() when it was asked for. */
  readonly grantedAt: number;
  /** performance.now() after which the block serves nothing (sent + leaseMs). */
  readonly usableUntil: number;
}

/** Demand plus the blocks held for it, oldest first; a block asked for ahead is the newest. */
abstract class Grants<B extends Granted> extends Demand {
  blocks: B[] = [];

  /** What a block still holds to hand out. */
  protected abstract left(block: B): number;

  /** Whether a block was made for `asked`: the RPM limit, or the channel's capacity. */
  protected abstract madeFor(block: B, asked: number): boolean;

  /** The block granted last, or null. */
  newest(): B | null {
    return this.blocks[this.blocks.length - 1] ?? null;
  }

  /**
   * Whether to ask for the next block now: none is on its way, the newest was made for what is
   * asked now (`asked`: the limit or the capacity), and it ends soon. That is, what is left of its
   * lease is a quarter of it or `horizonMs` (the sweep's asks: it would end before the next
   * sweep), or what the blocks that still serve hold is a quarter of its size or less.
   */
  renewsAhead(asked: number, now: number, horizonMs: number): boolean {
    const newest = this.newest();
    if (newest === null || this.pending !== null || !this.madeFor(newest, asked)) return false;
    const lasts = newest.usableUntil - now;
    if (lasts <= 0) return false;
    if (lasts <= Math.max((newest.usableUntil - newest.grantedAt) / 4, horizonMs)) return true;
    let left = 0;
    for (const block of this.blocks) if (now < block.usableUntil) left += this.left(block);
    return 4 * left <= newest.size;
  }
}

/** RPM hits reserved in Redis (dated at the grant plus the lease) for this process to admit. */
export interface RpmBlock extends Granted {
  readonly limit: number;
  /** Counter of the next member to hand out; the block holds [next, end). */
  next: number;
  readonly end: number;
  /** Remaining in the window at the grant, the block already subtracted. */
  readonly remainingAtGrant: number;
  /** performance.now() when the window's oldest hit leaves it, as the grant saw it. */
  readonly resetAt: number;
}

export class BucketGrants extends Grants<RpmBlock> {
  /** The limit the latest call asked with: the sweep renews blocks for it. */
  limit = 0;

  protected left(block: RpmBlock): number {
    return block.end - block.next;
  }

  protected madeFor(block: RpmBlock, limit: number): boolean {
    return block.limit === limit;
  }

  /** A hot bucket's block: twice its recent rate over the block's lease periods. */
  protected override hotWant(): number {
    return Math.min(MAX_BLOCK, 2 * this.rate() * (this.roomy ? ROOMY_LEASES : 1));
  }

  /** Twice the last rate seen (a period's calls; no call since leaves it as it was). */
  override keepWant(): number {
    return Math.min(MAX_BLOCK, Math.max(HOT_CALLS, 2 * this.rate()));
  }
}

/** Slots of one channel held in Redis (expiry = grant + ttl + lease) for this process to lend. */
export interface SlotBlock extends Granted {
  readonly capacity: number;
  readonly ttlMs: number;
  /** Tokens held and not lent. A lent token comes back here while the block is usable. */
  readonly free: string[];
  readonly expiresAtMs: number;
}

export class ChannelGrants extends Grants<SlotBlock> {
  /** Leases of this channel held by requests in this process. */
  inUse = 0;
  /** The slot the latest call asked for (capacity, ttl): the sweep renews blocks for it. */
  asked: { readonly channelId: string; readonly capacity: number; readonly ttlMs: number } | null =
    null;
  /** The most leases held at once in this period and the last. */
  private peakThis = 0;
  private peakLast = 0;

  /** One more lease held by a request here. */
  took(): void {
    this.inUse++;
    if (this.inUse > this.peakThis) this.peakThis = this.inUse;
  }

  protected override newPeriod(): void {
    this.peakLast = this.peakThis;
    this.peakThis = this.inUse;
  }

  /**
   * A hot channel's block: twice the most slots in use at once over this period and the last,
   * plus two. Requests that come in waves have released theirs when the sweep asks for the next
   * block, between waves: the peak sizes it for the next wave. A lent slot comes back to its
   * block, so the acquisitions of a period would oversize it: 1,024 slots a block at 6,000
   * requests a second, ~17 µs a request of ZADD and ZREM work on the main thread. (A warm block
   * is sized by acquisitions, Demand.warmWant: those in use are mostly held by long requests.)
   */
  protected override hotWant(): number {
    const peak = Math.max(this.inUse, this.peakThis, this.peakLast);
    return Math.min(MAX_BLOCK, Math.max(HOT_CALLS, 2 * peak + 2));
  }

  protected left(block: SlotBlock): number {
    return block.free.length;
  }

  protected madeFor(block: SlotBlock, capacity: number): boolean {
    return block.capacity === capacity;
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
