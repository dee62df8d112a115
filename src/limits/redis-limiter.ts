// The shared limiter: every gateway process points at one Redis and the Lua scripts in
// redis-scripts.ts keep the RPM windows, capacity slots and blacklist exact across them.
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { retryAfterSeconds } from './limiter.ts';
import type {
  BlacklistEntry,
  Limiter,
  RpmAndSlot,
  RpmResult,
  SlotLease,
  SlotRequest,
  StrikeRule,
} from './limiter.ts';
import { BucketGrants, ChannelGrants, WARM_LEASES } from './local-grants.ts';
import type { Demand, RpmBlock, SlotBlock } from './local-grants.ts';
import { withLimiterCommands } from './redis-scripts.ts';
import type { LimiterCommands } from './redis-scripts.ts';

export type RedisLimiterOptions = {
  client: Redis;
  /** Prepended to every key, e.g. 'switchyard:'; tests use a random one per run. */
  keyPrefix?: string;
  /** Length of the RPM window; 60,000 in production, 1–2 s in tests. */
  windowMs?: number;
  /** Whether close() also closes the client (true when the limiter opened it). */
  ownsClient?: boolean;
  /**
   * How often the blacklist mirror asks Redis whether the blacklist changed (one GET of a
   * version counter) while it is not subscribed to the changes; a restriction added or lifted
   * through another process is seen here within this time then, and at once (a message) while
   * subscribed. 0 turns the mirror off: every check is an HMGET.
   */
  blacklistSyncMs?: number;
  /**
   * How long a block of RPM hits or capacity slots, reserved in one call for a hot bucket or
   * channel, may be handed out by this process (decision 0031). 0: every hit and slot is its own
   * call. Default 100.
   */
  leaseMs?: number;
};

/** What an askAhead call asked for, to file what it was granted. */
interface AheadCall {
  bucket: string | null;
  limit: number;
  /** The bucket's entry when the call asked for hits, else null; the same for `c` and slots. */
  b: BucketGrants | null;
  rpmC0: number;
  slot: SlotRequest | null;
  c: ChannelGrants | null;
  slotC0: number;
  sentAt: number;
  leaseMs: number;
}

/** The RPM part of a call that asked for none (acquireSlot). */
const NO_RPM: RpmResult = {
  allowed: true,
  limit: 0,
  remaining: 0,
  resetMs: 0,
  retryAfterSeconds: 0,
};

/**
 * A local copy of the blacklist, so the check every request makes (one or two per request, before
 * its body is read) needs no round trip: on the Postgres+Redis gateway each HMGET was a
 * sequential Redis round trip on the request path, one event-loop turn under load. Changes made
 * through this process apply to the copy at once; changes made elsewhere bump a version counter
 * in Redis and publish on a channel of the same name (in the same script). The copy subscribes
 * to that channel on a connection of its own and reloads when told (decision 0054); while it is
 * subscribed it also polls the version every MIRROR_SUBSCRIBED_POLL_MS (a message lost to a
 * connection that died quietly, an older instance that does not publish), otherwise every
 * `syncMs`. From a message (or a new subscription) until a sync that started after it succeeds,
 * checks go to Redis. Otherwise trusted while subscribed and synced within two such polls, else
 * for 4 sync periods: past that (Redis unreachable, sync failing) checks go to Redis again, so
 * the resilient limiter's policy applies as before. Entries lift by their untilMs.
 */
interface BlacklistMirror {
  entries: Map<string, BlacklistEntry>;
  version: string | null;
  /** When the last successful sync asked for the version (this host's clock). */
  syncedAtMs: number;
  /** A full reload at least this often, version or not (an instance that does not bump it). */
  reloadedAtMs: number;
  timer: NodeJS.Timeout | null;
  syncing: boolean;
  /** A sync was asked for while one ran: it runs again when done (it may have read too early). */
  syncAgain: boolean;
  /** Local changes made while a reload was reading: applied again on top of what it read. */
  changedDuringSync: Map<string, BlacklistEntry | null>;
  /** The connection that listens for changes (started with the copy), or null. */
  subscriber: Redis | null;
  /** Its subscription is confirmed and its connection has not closed since. */
  subscribed: boolean;
  /** A failed SUBSCRIBE was logged (once: an ACL without the channel fails every time). */
  subscribeFailed: boolean;
  /** The next SUBSCRIBE after a failed one, or null. */
  resubscribeTimer: NodeJS.Timeout | null;
  /** Changes heard of (messages, subscriptions made), counted. */
  heard: number;
  /** `heard` when the last successful sync started: behind it, the copy may miss a change. */
  syncedHeard: number;
}

const MIRROR_FULL_RELOAD_MS = 5_000;

/**
 * The sweep's period while entries are tracked but none holds a block, a call or a return: it
 * only forgets them. At a quarter lease the Postgres+Redis gateway's main thread woke 40 times a
 * second for up to 10 s after every busy spell (docs/performance.md, session 40).
 */
const IDLE_SWEEP_MS = 1_000;

/**
 * The version poll while subscribed. At the 250 ms poll the Postgres+Redis gateway's idle main
 * thread woke 4 times a second for it, a few hundred µs of CPU a wake-up on the bench's host
 * (docs/performance.md, session 38).
 */
const MIRROR_SUBSCRIBED_POLL_MS = 5_000;

/** A failed SUBSCRIBE is tried again after 1 s, then 2, 4… up to 30 s. */
const MIRROR_RESUBSCRIBE_FIRST_MS = 1_000;
const MIRROR_RESUBSCRIBE_MAX_MS = 30_000;

export class RedisLimiter implements Limiter {
  readonly windowMs: number;
  readonly client: Redis & LimiterCommands;
  private readonly prefix: string;
  private readonly ownsClient: boolean;
  /** Members and tokens are `${tag}${counter}`: unique across processes without a round trip. */
  private readonly tag: string;
  private counter: number;
  private readonly syncMs: number;
  private readonly mirror: BlacklistMirror;
  private closed = false;
  private readonly leaseMs: number;
  private readonly buckets: Map<string, BucketGrants>;
  private readonly channels: Map<string, ChannelGrants>;
  /** Leases lent from a block, to that block; null once released (a second release is a no-op). */
  private readonly lent: WeakMap<SlotLease, SlotBlock | null>;
  /** Members to remove, by key: blocks' unused hits and slots, lent slots whose block ended. */
  private readonly returns: Map<string, string[]>;
  private sweepTimer: NodeJS.Timeout | null;
  /**
   * The sweep's armed period: a quarter lease while blocks are in use, a lease while blocks are
   * only kept at hand (decision 0059), IDLE_SWEEP_MS with nothing held.
   */
  private sweepEveryMs: number;
  /**
   * Script calls for hits and slots a request waited for, calls for blocks asked for ahead (no
   * request waits for them), and hits admitted and slots lent from blocks.
   */
  readonly counts: { calls: number; ahead: number; blockHits: number; lentSlots: number };

  constructor(options: RedisLimiterOptions) {
    this.client = withLimiterCommands(options.client);
    this.prefix = options.keyPrefix ?? 'switchyard:';
    this.windowMs = options.windowMs ?? 60_000;
    this.ownsClient = options.ownsClient ?? false;
    this.tag = `${randomBytes(6).toString('base64url')}:`;
    this.counter = 0;
    this.syncMs = options.blacklistSyncMs ?? 250;
    this.leaseMs = options.leaseMs ?? 100;
    this.buckets = new Map();
    this.channels = new Map();
    this.lent = new WeakMap();
    this.returns = new Map();
    this.sweepTimer = null;
    this.sweepEveryMs = 0;
    this.counts = { calls: 0, ahead: 0, blockHits: 0, lentSlots: 0 };
    this.mirror = {
      entries: new Map(),
      version: null,
      syncedAtMs: -Infinity,
      reloadedAtMs: -Infinity,
      timer: null,
      syncing: false,
      syncAgain: false,
      changedDuringSync: new Map(),
      subscriber: null,
      subscribed: false,
      subscribeFailed: false,
      resubscribeTimer: null,
      heard: 0,
      syncedHeard: 0,
    };
  }

  async hitRpm(bucket: string, limit: number): Promise<RpmResult> {
    return (await this.take(bucket, limit, null)).rpm;
  }

  hitRpmAndAcquire(bucket: string, limit: number, slot: SlotRequest | null): Promise<RpmAndSlot> {
    return this.take(bucket, limit, slot);
  }

  async acquireSlot(channelId: string, capacity: number, ttlMs: number): Promise<SlotLease | null> {
    const { slot } = await this.take(null, 0, { channelId, capacity, ttlMs });
    return typeof slot === 'object' ? slot : null;
  }

  /**
   * The RPM hit (bucket null: none) and the slot (null: none) of one request. Each comes from a
   * block this process holds when it can, else waits for a block request in flight, else goes to
   * Redis; when both must go, they go in one script call.
   */
  private async take(
    bucket: string | null,
    limit: number,
    slot: SlotRequest | null,
  ): Promise<RpmAndSlot> {
    let now = performance.now();
    const leasing = this.leaseMs > 0;
    const b = leasing && bucket !== null ? this.bucketGrants(bucket, now) : null;
    const c = leasing && slot !== null ? this.channelGrants(slot.channelId, now) : null;
    // What the sweep renews with: the latest call's limit and slot (a reload may change them).
    if (b !== null) b.limit = limit;
    if (c !== null && slot !== null) c.asked = slot;
    let rpm: RpmResult | null = bucket === null ? NO_RPM : null;
    if (b !== null && bucket !== null) {
      for (;;) {
        rpm = this.hitLocally(bucket, b, limit, now);
        if (rpm !== null || b.pending === null) break;
        await b.pending.catch(() => undefined);
        now = performance.now();
      }
    }
    if (rpm !== null) {
      if (slot === null) {
        this.askAhead(bucket, limit, b, null, null, now, 0);
        return { rpm, slot: 'none' };
      }
      if (c !== null) {
        for (;;) {
          const lease = this.lendLocally(c, slot, now);
          if (lease !== null) {
            this.askAhead(bucket, limit, b, slot, c, now, 0);
            return { rpm, slot: lease };
          }
          if (c.pending === null) break;
          await c.pending.catch(() => undefined);
          now = performance.now();
        }
      }
      const { slot: taken } = await this.remote(null, 0, null, slot, c, now);
      return { rpm, slot: taken };
    }
    // The hit needs Redis. A slot this process can lend goes with it, else the script takes one.
    const lent = c !== null && slot !== null ? this.lendLocally(c, slot, now) : null;
    if (lent === null) return this.remote(bucket, limit, b, slot, c, now);
    let result: RpmAndSlot;
    try {
      result = await this.remote(bucket, limit, b, null, null, now);
    } catch (err) {
      this.releaseLent(lent);
      throw err;
    }
    if (result.rpm.allowed) return { rpm: result.rpm, slot: lent };
    this.releaseLent(lent);
    return result;
  }

  /** One script call: the hit (bucket null: none) and the slot (null: none), blocks as wanted. */
  private async remote(
    bucket: string | null,
    limit: number,
    b: BucketGrants | null,
    slot: SlotRequest | null,
    c: ChannelGrants | null,
    sentAt: number,
  ): Promise<RpmAndSlot> {
    // A call that finds a block request in flight and no block asks for itself alone.
    const rpmWant = bucket === null ? 0 : b !== null && b.pending === null ? b.want(sentAt) : 1;
    const slotWant = slot === null ? 0 : c !== null && c.pending === null ? c.want(sentAt) : 1;
    this.counts.calls++;
    const {
      reply: call,
      rpmC0,
      slotC0,
      leaseMs,
    } = this.send(
      bucket === null ? null : { bucket, limit, want: rpmWant, b },
      slot === null ? null : { slot, want: slotWant, c },
      sentAt,
      0,
    );
    if (b !== null && rpmWant > 1) b.pending = call;
    if (c !== null && slotWant > 1) c.pending = call;
    let reply: unknown;
    try {
      reply = await call;
    } catch (err) {
      // Waiters go to Redis (or the fallback) alone rather than queue behind another block.
      if (b !== null && rpmWant > 1) b.exactUntil = performance.now() + this.leaseMs;
      if (c !== null && slotWant > 1) c.exactUntil = performance.now() + this.leaseMs;
      this.giveBackSent(bucket, rpmC0, rpmWant, slot, slotC0, slotWant);
      throw err;
    } finally {
      if (b !== null && b.pending === call) b.pending = null;
      if (c !== null && c.pending === call) c.pending = null;
    }
    if (!Array.isArray(reply) || reply.length !== 7) throw unexpected(reply);
    const [allowed, remaining, resetMs, rpmGrant, expiresAtMs, slotGrant, held] = reply.map(
      integer,
    ) as [number, number, number, number, number, number, number];
    if (b !== null && bucket !== null) b.roomy = roomyBucket(remaining, limit);
    if (c !== null && slot !== null) c.roomy = roomyChannel(held, slot.capacity);
    const rpm: RpmResult =
      bucket === null
        ? NO_RPM
        : {
            allowed: allowed === 1,
            limit,
            // The block's other hits are this process's to admit: not taken yet.
            remaining: remaining + Math.max(0, rpmGrant - 1),
            resetMs,
            retryAfterSeconds: allowed === 1 ? 0 : retryAfterSeconds(resetMs),
          };
    if (b !== null && bucket !== null && rpmWant > 1) {
      if (rpmGrant > 1) {
        // The first hit is this request's; the block admits the others.
        b.blocks.push(rpmBlock(limit, rpmC0, 1, rpmGrant, sentAt, leaseMs, remaining, resetMs));
        this.startSweep();
      } else {
        b.exactUntil = performance.now() + this.leaseMs;
      }
    }
    if (slot === null || expiresAtMs === -2) return { rpm, slot: 'none' };
    if (c !== null && slotWant > 1 && slotGrant <= 1)
      c.exactUntil = performance.now() + this.leaseMs;
    // Past half the channel, slots this process holds unused are ones others are refused: give
    // them back now rather than at the lease's end.
    if (c !== null && held * 2 >= slot.capacity && c.blocks.length > 0) {
      this.endSlotBlocks(slot.channelId, c, Infinity);
      c.exactUntil = performance.now() + this.leaseMs;
      void this.flushReturns();
    }
    if (expiresAtMs === -1) return { rpm, slot: 'full' };
    const lease: SlotLease = {
      channelId: slot.channelId,
      token: this.tag + String(slotC0),
      expiresAtMs,
    };
    if (c !== null) {
      c.took();
      if (slotGrant > 1) {
        // The first token is this request's lease; the block lends the others.
        const block = this.slotBlock(slot, slotC0, 1, slotGrant, sentAt, leaseMs, expiresAtMs);
        c.blocks.push(block);
        this.lent.set(lease, block);
        this.startSweep();
      }
    }
    return { rpm, slot: lease };
  }

  /**
   * Asks for the next block of a bucket or channel (or both, in one call) whose block ends soon,
   * while that block still serves: without it, the first request after each block's end waited
   * for a script call before its upstream call, and the ones behind it for the same reply. On the
   * Postgres+Redis gateway with 8 streams back to back, that was ~0.5 ms of TTFT p50 (session 18,
   * decision 0033). The block's hits are all dated at grant + lease (no request of its own is
   * counted at now), so decision 0031's guarantee holds as for any block. Nothing waits for the
   * call; a failure is left for the next call that needs Redis to meet.
   */
  private askAhead(
    bucket: string | null,
    limit: number,
    b: BucketGrants | null,
    slot: SlotRequest | null,
    c: ChannelGrants | null,
    now: number,
    horizonMs: number,
    keep = false,
  ): void {
    const rpmWant =
      bucket !== null && b !== null && b.renewsAhead(limit, now, horizonMs)
        ? blockWant(b, now, keep)
        : 0;
    const slotWant =
      slot !== null && c !== null && c.renewsAhead(slot.capacity, now, horizonMs)
        ? blockWant(c, now, keep)
        : 0;
    const rpm = rpmWant > 1 && bucket !== null && b !== null ? b : null;
    const slots = slotWant > 1 && slot !== null && c !== null ? c : null;
    if ((rpm === null && slots === null) || this.closed) return;
    this.counts.ahead++;
    const { reply, rpmC0, slotC0, leaseMs } = this.send(
      rpm === null || bucket === null ? null : { bucket, limit, want: rpmWant, b: rpm },
      slots === null || slot === null ? null : { slot, want: slotWant, c: slots },
      now,
      1,
    );
    // Registered before any waiter's: the block is in place when a call waiting on `pending`
    // resumes. Never rejects: a failed call files nothing, and its entries go exact for a lease
    // (as after a failed block request in remote()), so calls waiting on it then go to Redis (or
    // the fallback) alone instead of asking for another block and waiting out a second timeout.
    const done = reply
      .then((r) =>
        this.tookAhead(r, {
          bucket,
          limit,
          b: rpm,
          rpmC0,
          slot,
          c: slots,
          slotC0,
          sentAt: now,
          leaseMs,
        }),
      )
      .catch(() => {
        const exactUntil = performance.now() + this.leaseMs;
        if (rpm !== null) rpm.exactUntil = exactUntil;
        if (slots !== null) slots.exactUntil = exactUntil;
        this.giveBackSent(
          rpm === null ? null : bucket,
          rpmC0,
          rpmWant,
          slots === null ? null : slot,
          slotC0,
          slotWant,
        );
      });
    const settled = done.finally(() => {
      if (rpm !== null && rpm.pending === settled) rpm.pending = null;
      if (slots !== null && slots.pending === settled) slots.pending = null;
    });
    if (rpm !== null) rpm.pending = settled;
    if (slots !== null) slots.pending = settled;
  }

  /** Files the blocks an askAhead call was granted. */
  private tookAhead(reply: unknown, ask: AheadCall): void {
    const { bucket, limit, b, rpmC0, slot, c, slotC0, sentAt, leaseMs } = ask;
    if (!Array.isArray(reply) || reply.length !== 7) return;
    const [, remaining, resetMs, rpmGrant, expiresAtMs, slotGrant, held] = reply.map(integer) as [
      number,
      number,
      number,
      number,
      number,
      number,
      number,
    ];
    if (b !== null && bucket !== null) {
      b.roomy = roomyBucket(remaining, limit);
      const block = rpmBlock(limit, rpmC0, 0, rpmGrant, sentAt, leaseMs, remaining, resetMs);
      // Not granted: the limit is near, so calls go to Redis alone for a lease period.
      if (rpmGrant < 2) b.exactUntil = performance.now() + this.leaseMs;
      else if (this.closed) this.returnHits(bucket, block);
      else b.blocks.push(block);
    }
    if (c !== null && slot !== null) {
      c.roomy = roomyChannel(held, slot.capacity);
      // Past half the channel, the slots this process holds unused go back now (as in remote();
      // the new block stays: the script granted it within half).
      if ((held * 2 >= slot.capacity && c.blocks.length > 0) || this.closed) {
        this.endSlotBlocks(slot.channelId, c, Infinity);
        c.exactUntil = performance.now() + this.leaseMs;
        void this.flushReturns();
      }
      if (slotGrant < 2) c.exactUntil = performance.now() + this.leaseMs;
      else if (this.closed)
        this.queueReturn(this.slotKey(slot.channelId), this.members(slotC0, slotGrant));
      else c.blocks.push(this.slotBlock(slot, slotC0, 0, slotGrant, sentAt, leaseMs, expiresAtMs));
    }
    // Closed while the call was out: what it was granted goes back at once.
    if (this.closed) void this.flushReturns();
    else this.startSweep();
  }

  /**
   * One HIT_AND_TAKE script call, for the hits (`hits` null: none) and the slot (null: none):
   * reserves the counters of the members it may grant and picks the lease, longer when a block
   * is asked for a warm or a roomy bucket or channel (WARM_LEASES, ROOMY_LEASES, local-grants.ts);
   * both blocks of one call share it (sharedLeases). `ahead` 1: a block asked for ahead of need
   * (the script counts no hit at now).
   */
  private send(
    hits: { bucket: string; limit: number; want: number; b: BucketGrants | null } | null,
    slots: { slot: SlotRequest; want: number; c: ChannelGrants | null } | null,
    now: number,
    ahead: 0 | 1,
  ): { reply: Promise<unknown>; rpmC0: number; slotC0: number; leaseMs: number } {
    const rpmC0 = this.reserve(hits?.want ?? 0);
    const slotC0 = this.reserve(slots?.want ?? 0);
    const leaseMs =
      this.leaseMs *
      sharedLeases(
        hits !== null && hits.want > 1 && hits.b !== null ? hits.b.leases(now) : 0,
        slots !== null && slots.want > 1 && slots.c !== null ? slots.c.leases(now) : 0,
      );
    const bucketKey = hits === null ? null : this.prefix + hits.bucket;
    const slotKey = slots === null ? null : this.slotKey(slots.slot.channelId);
    const reply = this.client.syHitAndTake(
      // A key the script does not read stands in for the other.
      bucketKey ?? slotKey ?? '',
      slotKey ?? bucketKey ?? '',
      hits === null ? -1 : hits.limit,
      this.windowMs,
      hits?.want ?? 0,
      this.tag,
      rpmC0,
      leaseMs,
      slots === null ? -1 : slots.slot.capacity,
      slots === null ? 0 : slots.slot.ttlMs,
      slots?.want ?? 0,
      slotC0,
      ahead,
    );
    return { reply, rpmC0, slotC0, leaseMs };
  }

  /** A block of `grant` slot tokens from counter c0, lending those from c0 + `from` on. */
  private slotBlock(
    slot: SlotRequest,
    c0: number,
    from: number,
    grant: number,
    sentAt: number,
    leaseMs: number,
    expiresAtMs: number,
  ): SlotBlock {
    const free: string[] = [];
    for (let i = grant - 1; i >= from; i--) free.push(this.tag + String(c0 + i));
    return {
      capacity: slot.capacity,
      ttlMs: slot.ttlMs,
      free,
      size: grant,
      grantedAt: sentAt,
      usableUntil: sentAt + leaseMs,
      expiresAtMs,
    };
  }

  /** A hit from the bucket's block, or null (no usable block: it ended or the limit changed). */
  private hitLocally(
    bucket: string,
    b: BucketGrants,
    limit: number,
    now: number,
  ): RpmResult | null {
    let block = b.blocks[0];
    while (
      block !== undefined &&
      (now >= block.usableUntil || block.limit !== limit || block.next >= block.end)
    ) {
      // Ended, or made for another limit (a reload): its unused hits go back.
      b.blocks.shift();
      this.returnHits(bucket, block);
      block = b.blocks[0];
    }
    if (block === undefined) return null;
    block.next++;
    this.counts.blockHits++;
    return {
      allowed: true,
      limit,
      remaining: block.remainingAtGrant + (block.end - block.next),
      resetMs: Math.max(0, Math.round(block.resetAt - now)),
      retryAfterSeconds: 0,
    };
  }

  /** A lease lent from one of the channel's blocks, or null. */
  private lendLocally(c: ChannelGrants, slot: SlotRequest, now: number): SlotLease | null {
    const got = c.lend(slot.capacity, slot.ttlMs, now);
    if (got === null) return null;
    c.took();
    this.counts.lentSlots++;
    const lease: SlotLease = {
      channelId: slot.channelId,
      token: got.token,
      expiresAtMs: got.block.expiresAtMs,
    };
    this.lent.set(lease, got.block);
    return lease;
  }

  async releaseSlot(lease: SlotLease): Promise<void> {
    const block = this.lent.get(lease);
    if (block === null) return; // released already: its token may be lent to another request
    if (block !== undefined) return this.releaseLent(lease);
    const c = this.channels.get(lease.channelId);
    if (c !== undefined && c.inUse > 0) c.inUse--;
    // ZREM of this lease's own token: one atomic command, idempotent, needs no clock.
    await this.client.zrem(this.slotKey(lease.channelId), lease.token);
  }

  /**
   * A lent lease goes back to its block while the block still lends; after that its token is
   * removed from Redis with the next sweep's batch (held until then, which errs on the safe side).
   */
  private releaseLent(lease: SlotLease): void {
    const block = this.lent.get(lease);
    if (block === undefined || block === null) return;
    this.lent.set(lease, null);
    const c = this.channels.get(lease.channelId);
    if (c !== undefined && c.inUse > 0) c.inUse--;
    const now = performance.now();
    if (c !== undefined && now < block.usableUntil && c.blocks.includes(block)) {
      block.free.push(lease.token);
      return;
    }
    this.queueReturn(this.slotKey(lease.channelId), [lease.token]);
    // Near capacity (the channel went exact), a held slot is one another request is refused.
    if (c !== undefined && now < c.exactUntil) void this.flushReturns();
  }

  async renewSlot(lease: SlotLease, ttlMs: number): Promise<boolean> {
    const reply = await this.client.syRenewSlot(this.slotKey(lease.channelId), ttlMs, lease.token);
    const expiresAtMs = integer(reply);
    if (expiresAtMs < 0) return false;
    lease.expiresAtMs = expiresAtMs;
    return true;
  }

  async slotsInUse(channelId: string): Promise<number> {
    return integer(await this.client.sySlotsInUse(this.slotKey(channelId)));
  }

  async isBlacklisted(source: string): Promise<BlacklistEntry | null> {
    const m = this.mirror;
    if (this.syncMs > 0 && !this.closed) {
      if (m.subscriber === null) this.startMirror();
      const now = Date.now();
      if (this.mirrorTrusted(now)) {
        const entry = m.entries.get(source);
        return entry !== undefined && entry.untilMs > now ? entry : null;
      }
    }
    return this.fetchEntry(source);
  }

  /** Subscribed, and synced since: then the copy misses nothing. */
  private mirrorSubscribed(): boolean {
    return this.mirror.subscribed && this.mirrorCurrent();
  }

  /** No change heard of (nor a subscription made) since the last sync started. */
  private mirrorCurrent(): boolean {
    return this.mirror.syncedHeard === this.mirror.heard;
  }

  /** Whether the copy answers checks: current, and synced within its trust. */
  private mirrorTrusted(now: number): boolean {
    if (!this.mirrorCurrent()) return false;
    const trustMs = this.mirror.subscribed ? 2 * MIRROR_SUBSCRIBED_POLL_MS : 4 * this.syncMs;
    return now - this.mirror.syncedAtMs <= trustMs;
  }

  /** One HMGET: Redis drops the hash at untilMs (PEXPIREAT on its own clock), so no script. */
  private async fetchEntry(source: string): Promise<BlacklistEntry | null> {
    const [reason, untilMs, addedBy] = await this.client.hmget(
      this.entryKey(source),
      'reason',
      'untilMs',
      'addedBy',
    );
    if (reason == null || untilMs == null) return null;
    return { source, reason, untilMs: Number(untilMs), addedBy: addedByOf(addedBy) };
  }

  private startMirror(): void {
    const m = this.mirror;
    const channel = this.versionKey();
    // Its own connection: one in subscriber mode takes no other command. It resubscribes here,
    // on each 'ready', so the copy knows when it listens again.
    const sub = this.client.duplicate({
      autoResubscribe: false,
      lazyConnect: false,
      // Named, so CLIENT LIST tells it from the limiter's own connection.
      connectionName: `${this.prefix}blacklist-mirror`,
    });
    m.subscriber = sub;
    // Connection errors show on the limiter's own connection too; this one reconnects by itself.
    sub.on('error', () => undefined);
    sub.on('close', () => {
      if (!m.subscribed) return;
      m.subscribed = false;
      // Back to the short poll until it listens again.
      this.scheduleMirrorSync(this.syncMs);
    });
    // A failed SUBSCRIBE on a live connection (an ACL without the channel, a Redis busy with a
    // script) is tried again, 1 s after the first failure and twice as long after each next one,
    // up to 30 s; meanwhile the copy polls at `syncMs`. A new connection starts from 1 s again.
    let retryMs = MIRROR_RESUBSCRIBE_FIRST_MS;
    const subscribe = (): void => {
      m.resubscribeTimer = null;
      if (this.closed || sub.status !== 'ready') return;
      sub.subscribe(channel).then(
        () => {
          if (this.closed) return;
          m.subscribed = true;
          // What was published while it did not listen is read now.
          this.heardOfChange();
        },
        (err: unknown) => {
          // A limiter closed while its subscriber came up (tests open and close them quickly).
          if (this.closed) return;
          if (!m.subscribeFailed) {
            m.subscribeFailed = true;
            const reason = err instanceof Error ? err.message : String(err);
            console.warn(
              `[limits] blacklist changes: subscribe failed, polling meanwhile: ${reason}`,
            );
          }
          m.resubscribeTimer = setTimeout(subscribe, retryMs);
          m.resubscribeTimer.unref();
          retryMs = Math.min(2 * retryMs, MIRROR_RESUBSCRIBE_MAX_MS);
        },
      );
    };
    sub.on('ready', () => {
      if (m.resubscribeTimer !== null) clearTimeout(m.resubscribeTimer);
      retryMs = MIRROR_RESUBSCRIBE_FIRST_MS;
      subscribe();
    });
    sub.on('message', (from: string) => {
      if (from === channel) this.heardOfChange();
    });
    this.mirrorTick();
  }

  /** A change (or a new subscription): the copy is not trusted until a sync that starts after. */
  private heardOfChange(): void {
    this.mirror.heard++;
    void this.syncMirror().catch(() => undefined);
  }

  private mirrorTick(): void {
    const m = this.mirror;
    m.timer = null;
    void this.syncMirror()
      .catch(() => undefined)
      .finally(() => {
        if (m.timer === null)
          this.scheduleMirrorSync(
            this.mirrorSubscribed() ? MIRROR_SUBSCRIBED_POLL_MS : this.syncMs,
          );
      });
  }

  private scheduleMirrorSync(wait: number): void {
    const m = this.mirror;
    if (this.closed) return;
    if (m.timer !== null) clearTimeout(m.timer);
    m.timer = setTimeout(() => this.mirrorTick(), wait);
    m.timer.unref();
  }

  /**
   * Reloads the mirror when the version moved (or every MIRROR_FULL_RELOAD_MS). Asked for while
   * one runs, it runs once more after it: a message may have come after its GET.
   */
  private async syncMirror(): Promise<void> {
    const m = this.mirror;
    if (m.syncing) {
      m.syncAgain = true;
      return;
    }
    m.syncing = true;
    try {
      do {
        m.syncAgain = false;
        const heard = m.heard;
        const asked = Date.now();
        const version = await this.client.get(this.versionKey());
        if (version !== m.version || asked - m.reloadedAtMs >= MIRROR_FULL_RELOAD_MS) {
          const entries = await this.listBlacklist();
          m.entries = new Map(entries.map((e) => [e.source, e]));
          for (const [source, entry] of m.changedDuringSync) this.mirrorSet(source, entry);
          m.version = version;
          m.reloadedAtMs = asked;
        }
        m.syncedAtMs = asked;
        m.syncedHeard = heard;
      } while (m.syncAgain && !this.closed);
    } finally {
      m.syncing = false;
      m.syncAgain = false;
      m.changedDuringSync.clear();
    }
  }

  /** A change made through this process: the mirror has it at once. */
  private mirrorSet(source: string, entry: BlacklistEntry | null): void {
    if (this.mirror.syncing) this.mirror.changedDuringSync.set(source, entry);
    if (entry === null) this.mirror.entries.delete(source);
    else this.mirror.entries.set(source, entry);
  }

  async recordStrike(source: string, rule: StrikeRule): Promise<BlacklistEntry | null> {
    const reply = await this.client.syRecordStrike(
      `${this.prefix}strike:${rule.name}:${source}`,
      this.entryKey(source),
      this.indexKey(),
      this.versionKey(),
      rule.max,
      rule.windowMs,
      rule.banMs,
      this.unique(),
      `${rule.name}: ${rule.max} strikes within ${rule.windowMs} ms`,
      source,
    );
    if (reply === null) return null;
    if (!Array.isArray(reply) || reply.length !== 3) throw unexpected(reply);
    const [reason, untilMs, addedBy] = reply as unknown[];
    const entry: BlacklistEntry = {
      source,
      reason: String(reason),
      untilMs: Number(untilMs),
      addedBy: addedByOf(addedBy),
    };
    this.mirrorSet(source, entry);
    return entry;
  }

  async addToBlacklist(source: string, banMs: number, reason: string): Promise<BlacklistEntry> {
    const reply = await this.client.syAddToBlacklist(
      this.entryKey(source),
      this.indexKey(),
      this.versionKey(),
      banMs,
      reason,
      source,
    );
    const entry: BlacklistEntry = { source, reason, untilMs: integer(reply), addedBy: 'admin' };
    this.mirrorSet(source, entry);
    return entry;
  }

  async removeFromBlacklist(source: string): Promise<boolean> {
    const reply = await this.client.syRemoveFromBlacklist(
      this.entryKey(source),
      this.indexKey(),
      this.versionKey(),
      source,
    );
    this.mirrorSet(source, null);
    return integer(reply) === 1;
  }

  async listBlacklist(): Promise<BlacklistEntry[]> {
    const sources = await this.client.syLiveBlacklist(this.indexKey());
    if (!Array.isArray(sources)) throw unexpected(sources);
    if (sources.length === 0) return [];
    // An admin listing, not the hot path: one pipelined HMGET per source. An entry that lifted
    // between the two steps reads as nulls and is skipped.
    const pipeline = this.client.pipeline();
    for (const source of sources)
      pipeline.hmget(this.entryKey(String(source)), 'reason', 'untilMs', 'addedBy');
    const replies = (await pipeline.exec()) ?? [];
    const entries: BlacklistEntry[] = [];
    for (let i = 0; i < replies.length; i++) {
      const [err, fields] = replies[i] ?? [null, null];
      if (err !== null) throw err;
      const [reason, untilMs, addedBy] = Array.isArray(fields) ? (fields as unknown[]) : [];
      if (reason == null || untilMs == null) continue;
      entries.push({
        source: String(sources[i]),
        reason: String(reason),
        untilMs: Number(untilMs),
        addedBy: addedByOf(addedBy),
      });
    }
    return entries;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.mirror.timer !== null) clearTimeout(this.mirror.timer);
    this.mirror.timer = null;
    if (this.mirror.resubscribeTimer !== null) clearTimeout(this.mirror.resubscribeTimer);
    this.mirror.resubscribeTimer = null;
    this.mirror.subscriber?.disconnect();
    this.mirror.subscriber = null;
    this.mirror.subscribed = false;
    // Unused blocks go back now, so other processes need not wait for their hits and slots.
    if (this.sweepTimer !== null) clearInterval(this.sweepTimer);
    this.sweepTimer = null;
    // Block requests in flight first: what they are granted goes back with the rest, not after
    // the client has quit (it would then be held until its window or ttl ran out).
    const inFlight: Array<Promise<unknown>> = [];
    for (const entry of [...this.buckets.values(), ...this.channels.values()])
      if (entry.pending !== null) inFlight.push(entry.pending.catch(() => undefined));
    await Promise.all(inFlight);
    for (const [bucket, b] of this.buckets) {
      for (const block of b.blocks.splice(0)) this.returnHits(bucket, block);
    }
    for (const [channelId, c] of this.channels) this.endSlotBlocks(channelId, c, Infinity);
    if (this.client.status === 'ready') await this.flushReturns();
    if (!this.ownsClient) return;
    if (this.client.status === 'ready') {
      await this.client.quit().catch(() => this.client.disconnect());
    } else {
      this.client.disconnect();
    }
  }

  /** The member names of counters [c0, c0 + count). */
  private members(c0: number, count: number): string[] {
    const names: string[] = [];
    for (let i = 0; i < count; i++) names.push(this.tag + String(c0 + i));
    return names;
  }

  private unique(): string {
    return this.tag + String(this.counter++);
  }

  /** Reserves `n` (at least 1) member counters; the scripts name members `${tag}${counter}`. */
  private reserve(n: number): number {
    const c0 = this.counter;
    this.counter += Math.max(1, n);
    return c0;
  }

  private bucketGrants(bucket: string, now: number): BucketGrants {
    return this.noted(this.buckets, bucket, BucketGrants, now);
  }

  private channelGrants(channelId: string, now: number): ChannelGrants {
    return this.noted(this.channels, channelId, ChannelGrants, now);
  }

  /** The entry for `key` (made on first use, which starts the sweep), with this call counted. */
  private noted<T extends Demand>(
    map: Map<string, T>,
    key: string,
    make: new () => T,
    now: number,
  ): T {
    let entry = map.get(key);
    if (entry === undefined) {
      entry = new make();
      map.set(key, entry);
      this.startSweep();
    }
    entry.note(now, this.leaseMs);
    return entry;
  }

  /** A block's hits not handed out go back to Redis with the next batch. */
  private returnHits(bucket: string, block: RpmBlock): void {
    if (block.next < block.end)
      this.queueReturn(this.prefix + bucket, this.members(block.next, block.end - block.next));
  }

  /** Ends the bucket's blocks past their lease; their unused hits go back with the next batch. */
  private endRpmBlocks(bucket: string, b: BucketGrants, now: number): void {
    const live: RpmBlock[] = [];
    for (const block of b.blocks) {
      if (now < block.usableUntil) live.push(block);
      else this.returnHits(bucket, block);
    }
    b.blocks = live;
  }

  /**
   * Ends the channel's blocks that stop lending by `now` (Infinity: all); their unused slots go
   * back to Redis with the next batch, and leases lent from them go back one by one on release.
   */
  private endSlotBlocks(channelId: string, c: ChannelGrants, now: number): void {
    const live: SlotBlock[] = [];
    for (const block of c.blocks) {
      if (now < block.usableUntil) live.push(block);
      else this.queueReturn(this.slotKey(channelId), block.free.splice(0));
    }
    c.blocks = live;
  }

  /**
   * The hits and slots a script call asked for (null: none), whose reply failed: Redis may have
   * run it (a 250 ms command timeout under load), so the members it may have added go back with
   * the next batch (a ZREM of a member never added does nothing), rather than count against the
   * limit for a window and the channel's capacity for their TTL.
   */
  private giveBackSent(
    bucket: string | null,
    rpmC0: number,
    rpmWant: number,
    slot: SlotRequest | null,
    slotC0: number,
    slotWant: number,
  ): void {
    if (bucket !== null) this.queueReturn(this.prefix + bucket, this.members(rpmC0, rpmWant));
    if (slot !== null)
      this.queueReturn(this.slotKey(slot.channelId), this.members(slotC0, slotWant));
  }

  private queueReturn(key: string, members: string[]): void {
    if (members.length === 0) return;
    const queued = this.returns.get(key);
    if (queued === undefined) this.returns.set(key, members.slice());
    else for (const m of members) queued.push(m);
    this.startSweep();
  }

  /** Removes the queued members, one ZREM per key and thousand; a failure leaves them to expire. */
  private async flushReturns(): Promise<void> {
    if (this.returns.size === 0) return;
    const calls: Array<Promise<unknown>> = [];
    for (const [key, members] of this.returns) {
      for (let i = 0; i < members.length; i += 1000)
        calls.push(this.client.zrem(key, ...members.slice(i, i + 1000)).catch(() => undefined));
    }
    this.returns.clear();
    await Promise.all(calls);
  }

  /**
   * Runs the sweep every quarter lease while a block, a call or a return is out; called when one
   * is made (or an entry is), it brings a slow sweep back to that pace.
   */
  private startSweep(): void {
    if (this.closed || this.leaseMs <= 0) return;
    if (this.sweepTimer === null || this.sweepEveryMs !== this.sweepPeriodMs())
      this.armSweep(this.sweepPeriodMs());
  }

  private armSweep(everyMs: number): void {
    if (this.sweepTimer !== null) clearInterval(this.sweepTimer);
    this.sweepEveryMs = everyMs;
    this.sweepTimer = setInterval(() => this.sweep(), everyMs);
    this.sweepTimer.unref();
  }

  /**
   * Ends blocks past their lease and returns what they did not hand out; asks ahead for the next
   * block of an entry still in use whose block would end before the next sweep (requests that
   * come in waves, as 8 streams started together do, may find no block at all otherwise: each
   * wave waited for a script call, and all of it for the same reply); forgets idle entries
   * once they no longer remember being hot (decision 0047).
   */
  private sweep(): void {
    const now = performance.now();
    // A block that would end before the next sweep, with half a period to spare for a late timer.
    const horizon = 1.5 * this.sweepEveryMs;
    const idleAfter = 4 * this.leaseMs;
    // A block in use or not yet ended, a block request or a return out: the quick pace. Only
    // kept blocks: a lease's (below).
    let busy = this.returns.size > 0;
    let holding = false;
    for (const [bucket, b] of this.buckets) {
      if (b.blocks.length > 0) this.endRpmBlocks(bucket, b, now);
      // askAhead asks only when the newest block ends soon.
      const block = b.newest();
      if (block !== null) {
        const demanded = b.calledWithin(this.demandMs(block), now);
        busy ||= demanded;
        if (demanded || b.keepsBlock(now))
          this.askAhead(bucket, b.limit, b, null, null, now, horizon, !demanded);
      }
      if (idle(b, now, idleAfter)) this.buckets.delete(bucket);
      else {
        busy ||= b.pending !== null || (b.blocks.length > 0 && !b.keepsBlock(now));
        holding ||= b.blocks.length > 0;
      }
    }
    for (const [channelId, c] of this.channels) {
      if (c.blocks.length > 0) this.endSlotBlocks(channelId, c, now);
      const newest = c.newest();
      if (newest !== null && c.asked !== null) {
        const demanded = c.calledWithin(this.demandMs(newest), now);
        busy ||= demanded;
        if (demanded || c.keepsBlock(now))
          this.askAhead(null, 0, null, c.asked, c, now, horizon, !demanded);
      }
      if (idle(c, now, idleAfter)) this.channels.delete(channelId);
      else {
        busy ||= c.pending !== null || (c.blocks.length > 0 && !c.keepsBlock(now));
        holding ||= c.blocks.length > 0;
      }
    }
    void this.flushReturns();
    if (this.buckets.size === 0 && this.channels.size === 0 && this.returns.size === 0) {
      if (this.sweepTimer !== null) clearInterval(this.sweepTimer);
      this.sweepTimer = null;
      return;
    }
    // Kept blocks (decision 0059; ROOMY_LEASES or WARM_LEASES long) need a sweep only to renew
    // them before they end (a quarter of their lease ahead) and to end them: a lease's pace does
    // both, at a quarter of the wake-ups (each a cold pass, ~50-100 µs for two entries on this
    // session's host), and ends one at most a lease late. Other blocks keep the quick pace, so
    // what they did not use goes back within ~1.25 of their lease. Entries kept only because they
    // remember a hot spell (decision 0047) have nothing to end or ask for until a call comes,
    // which arms the quick pace again.
    const everyMs = busy ? this.sweepPeriodMs() : holding ? this.leaseMs : IDLE_SWEEP_MS;
    if (everyMs !== this.sweepEveryMs) this.armSweep(everyMs);
  }

  /**
   * How recent a call must be for the sweep to renew a block: the block's lease, and at least two
   * lease periods (8 streams started together come back as a wave every ~125 ms, past a 100 ms
   * lease). An entry left idle renews at most one or two more blocks.
   */
  private demandMs(block: { readonly grantedAt: number; readonly usableUntil: number }): number {
    return Math.max(block.usableUntil - block.grantedAt, 2 * this.leaseMs);
  }

  private sweepPeriodMs(): number {
    return Math.max(1, this.leaseMs / 4);
  }

  private slotKey(channelId: string): string {
    return `${this.prefix}slots:${channelId}`;
  }

  private entryKey(source: string): string {
    return `${this.prefix}bl:${source}`;
  }

  private indexKey(): string {
    return `${this.prefix}bl-index`;
  }

  private versionKey(): string {
    return `${this.prefix}bl-version`;
  }
}

/**
 * The lease periods of one script call's blocks, from each block's own (0: no block asked): a warm
 * one's when either is warm, as before decision 0049; ROOMY_LEASES only when every block asked
 * for is roomy, so a bucket or channel near its limit never holds a long block for the other's
 * sake.
 */
export function sharedLeases(rpm: number, slot: number): number {
  if (rpm === WARM_LEASES || slot === WARM_LEASES) return WARM_LEASES;
  if (rpm === 0 && slot === 0) return 1;
  return Math.min(rpm === 0 ? Infinity : rpm, slot === 0 ? Infinity : slot);
}

/**
 * The block an entry asks for ahead: the small one it keeps through an idle spell (`keep`, the
 * sweep's renewal for no call) or what its demand wants. A function, not a closure, since
 * askAhead runs on every request that a block serves.
 */
function blockWant(entry: Demand, now: number, keep: boolean): number {
  return keep ? entry.keepWant() : entry.want(now);
}

/** Whether a reply found the bucket at most a quarter used: `remaining` of `limit` after it. */
function roomyBucket(remaining: number, limit: number): boolean {
  return 4 * remaining >= 3 * limit;
}

/** Whether a reply found the channel at most a quarter used: `held` slots (-1: not read). */
function roomyChannel(held: number, capacity: number): boolean {
  return held >= 0 && 4 * held <= capacity;
}

/** A block of `grant` RPM hits from counter c0, admitting those from c0 + `from` on. */
function rpmBlock(
  limit: number,
  c0: number,
  from: number,
  grant: number,
  sentAt: number,
  leaseMs: number,
  remainingAtGrant: number,
  resetMs: number,
): RpmBlock {
  return {
    limit,
    next: c0 + from,
    end: c0 + grant,
    size: grant,
    grantedAt: sentAt,
    usableUntil: sentAt + leaseMs,
    remainingAtGrant,
    resetAt: sentAt + resetMs,
  };
}

/**
 * An entry the sweep forgets: no block and none on its way, no call for `idleAfter`, and no
 * demand it still remembers (WAKE_MS, decision 0047).
 */
function idle(
  entry: { readonly blocks: readonly unknown[] } & Demand,
  now: number,
  idleAfter: number,
): boolean {
  return (
    entry.blocks.length === 0 &&
    entry.pending === null &&
    now - entry.lastCallAt > idleAfter &&
    !entry.remembers(now)
  );
}

function integer(reply: unknown): number {
  if (typeof reply !== 'number') throw unexpected(reply);
  return reply;
}

function addedByOf(value: unknown): 'rule' | 'admin' {
  return value === 'admin' ? 'admin' : 'rule';
}

function unexpected(reply: unknown): Error {
  return new Error(`unexpected reply from a limiter script: ${JSON.stringify(reply)}`);
}
