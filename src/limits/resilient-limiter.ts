// The Redis-unreachable policy: while Redis answers, the shared limiter decides; when it errors
// or is disconnected, fail_open serves from a per-process memory limiter and fail_closed throws
// LimiterUnavailableError (503). It returns to Redis by itself when ioredis reconnects.
import type { Redis } from 'ioredis';
import { LimiterUnavailableError } from './limiter.ts';
import type {
  BlacklistEntry,
  Limiter,
  LimiterState,
  RpmAndSlot,
  RpmResult,
  SlotLease,
  SlotRequest,
  StrikeRule,
} from './limiter.ts';
import { MemoryLimiter } from './memory-limiter.ts';
import type { RedisLimiter } from './redis-limiter.ts';

export type UnreachablePolicy = 'fail_open' | 'fail_closed';

export type StateListener = (state: LimiterState, error: Error | null) => void;

/** A limiter that also reports whether the shared store is in use, for a metric. */
export interface GatewayLimiter extends Limiter {
  state(): LimiterState;
}

export type ResilientLimiterOptions = {
  redis: RedisLimiter;
  onUnreachable: UnreachablePolicy;
  onStateChange: StateListener | null;
  /** Memory-fallback RPM window; the same as Redis' so fallback limits mean the same. */
  windowMs: number;
  /**
   * After a command fails while the socket still looks connected (a timeout), other calls skip
   * Redis for this long and one call probes it. Default 1,000 ms.
   */
  probeIntervalMs?: number;
};

export class ResilientLimiter implements GatewayLimiter {
  private readonly redis: RedisLimiter;
  private readonly client: Redis;
  private readonly policy: UnreachablePolicy;
  private readonly onStateChange: StateListener | null;
  private readonly windowMs: number;
  private readonly probeIntervalMs: number;
  private current: LimiterState;
  /** Why the state last became degraded; the cause of LimiterUnavailableError. */
  private lastError: Error | null;
  private nextProbeAt: number;
  /** Settles at the first connect outcome, so calls at startup do not fail before it. */
  private connecting: Promise<void> | null;
  private fallbackLimiter: MemoryLimiter | null;
  /** Leases handed out by the memory fallback, so their release goes back to it. */
  private readonly fallbackLeases: WeakSet<SlotLease>;
  private readonly listeners: Array<[string, (...args: unknown[]) => void]>;

  constructor(options: ResilientLimiterOptions) {
    this.redis = options.redis;
    this.client = options.redis.client;
    this.policy = options.onUnreachable;
    this.onStateChange = options.onStateChange;
    this.windowMs = options.windowMs;
    this.probeIntervalMs = options.probeIntervalMs ?? 1000;
    this.current = 'ok';
    this.lastError = null;
    this.nextProbeAt = 0;
    this.fallbackLimiter = null;
    this.fallbackLeases = new WeakSet();
    this.listeners = [];

    let settle: () => void = () => {};
    this.connecting =
      this.client.status === 'ready'
        ? null
        : new Promise<void>((resolve) => {
            settle = () => {
              this.connecting = null;
              resolve();
            };
          });
    this.listen('ready', () => {
      settle();
      this.enter('ok', null);
    });
    // ioredis emits 'error' for every failed (re)connect; a listener is required or it logs
    // "Unhandled error event". 'close' follows each lost or refused connection.
    this.listen('error', (err) => {
      settle();
      this.enter('degraded', err instanceof Error ? err : new Error(String(err)));
    });
    this.listen('close', () => {
      settle();
      this.enter('degraded', new Error('connection to Redis closed'));
    });
  }

  state(): LimiterState {
    return this.current;
  }

  async hitRpm(bucket: string, limit: number): Promise<RpmResult> {
    if (this.connecting !== null) await this.connecting;
    if (this.useRedis()) {
      try {
        const result = await this.redis.hitRpm(bucket, limit);
        this.succeeded();
        return result;
      } catch (err) {
        this.failed(err);
      }
    }
    return this.fallback().hitRpm(bucket, limit);
  }

  async hitRpmAndAcquire(
    bucket: string,
    limit: number,
    slot: SlotRequest | null,
  ): Promise<RpmAndSlot> {
    if (this.connecting !== null) await this.connecting;
    if (this.useRedis()) {
      try {
        const result = await this.redis.hitRpmAndAcquire(bucket, limit, slot);
        this.succeeded();
        return result;
      } catch (err) {
        // As acquireSlot: a slot the script took before a timeout expires after its ttl.
        this.failed(err);
      }
    }
    const result = await this.fallback().hitRpmAndAcquire(bucket, limit, slot);
    if (typeof result.slot === 'object') this.fallbackLeases.add(result.slot);
    return result;
  }

  async acquireSlot(channelId: string, capacity: number, ttlMs: number): Promise<SlotLease | null> {
    if (this.connecting !== null) await this.connecting;
    if (this.useRedis()) {
      try {
        const lease = await this.redis.acquireSlot(channelId, capacity, ttlMs);
        this.succeeded();
        return lease;
      } catch (err) {
        // The script may have run before the timeout hit; that slot then expires after ttlMs.
        this.failed(err);
      }
    }
    const lease = await this.fallback().acquireSlot(channelId, capacity, ttlMs);
    if (lease !== null) this.fallbackLeases.add(lease);
    return lease;
  }

  async releaseSlot(lease: SlotLease): Promise<void> {
    if (this.fallbackLeases.has(lease)) {
      this.fallbackLeases.delete(lease);
      return this.fallbackLimiter?.releaseSlot(lease);
    }
    // Never throws, under either policy: a release runs in a finally after the response, and a
    // slot Redis could not free expires by its ttl.
    try {
      await this.redis.releaseSlot(lease);
      this.succeeded();
    } catch (err) {
      this.failed(err);
    }
  }

  async renewSlot(lease: SlotLease, ttlMs: number): Promise<boolean> {
    if (this.fallbackLeases.has(lease)) return this.fallback().renewSlot(lease, ttlMs);
    try {
      const renewed = await this.redis.renewSlot(lease, ttlMs);
      this.succeeded();
      return renewed;
    } catch (err) {
      this.failed(err);
      if (this.policy === 'fail_closed') throw new LimiterUnavailableError(err);
      return true; // fail_open: keep streaming; the slot in Redis expires by itself.
    }
  }

  async slotsInUse(channelId: string): Promise<number> {
    if (this.connecting !== null) await this.connecting;
    if (this.useRedis()) {
      try {
        const n = await this.redis.slotsInUse(channelId);
        this.succeeded();
        return n;
      } catch (err) {
        this.failed(err);
      }
    }
    return this.fallback().slotsInUse(channelId);
  }

  async isBlacklisted(source: string): Promise<BlacklistEntry | null> {
    if (this.connecting !== null) await this.connecting;
    if (this.useRedis()) {
      try {
        const entry = await this.redis.isBlacklisted(source);
        this.succeeded();
        return entry;
      } catch (err) {
        this.failed(err);
      }
    }
    return this.fallback().isBlacklisted(source);
  }

  async recordStrike(source: string, rule: StrikeRule): Promise<BlacklistEntry | null> {
    if (this.connecting !== null) await this.connecting;
    if (this.useRedis()) {
      try {
        const entry = await this.redis.recordStrike(source, rule);
        this.succeeded();
        return entry;
      } catch (err) {
        this.failed(err);
      }
    }
    return this.fallback().recordStrike(source, rule);
  }

  async addToBlacklist(source: string, banMs: number, reason: string): Promise<BlacklistEntry> {
    if (this.connecting !== null) await this.connecting;
    if (this.useRedis()) {
      try {
        const entry = await this.redis.addToBlacklist(source, banMs, reason);
        this.succeeded();
        return entry;
      } catch (err) {
        this.failed(err);
      }
    }
    return this.fallback().addToBlacklist(source, banMs, reason);
  }

  async removeFromBlacklist(source: string): Promise<boolean> {
    if (this.connecting !== null) await this.connecting;
    if (this.useRedis()) {
      try {
        const removed = await this.redis.removeFromBlacklist(source);
        this.succeeded();
        return removed;
      } catch (err) {
        this.failed(err);
      }
    }
    return this.fallback().removeFromBlacklist(source);
  }

  async listBlacklist(): Promise<BlacklistEntry[]> {
    if (this.connecting !== null) await this.connecting;
    if (this.useRedis()) {
      try {
        const entries = await this.redis.listBlacklist();
        this.succeeded();
        return entries;
      } catch (err) {
        this.failed(err);
      }
    }
    return this.fallback().listBlacklist();
  }

  async close(): Promise<void> {
    for (const [event, listener] of this.listeners) this.client.off(event, listener);
    // Keep a listener until the socket is gone: a late 'error' without one is logged as unhandled.
    this.client.on('error', () => {});
    await this.redis.close();
    await this.fallbackLimiter?.close();
  }

  /** Whether this call should go to Redis; false while disconnected or between probes. */
  private useRedis(): boolean {
    if (this.client.status !== 'ready') {
      if (this.current === 'ok')
        this.enter('degraded', new Error(`Redis is ${this.client.status}`));
      return false;
    }
    if (this.current === 'ok') return true;
    const now = Date.now();
    if (now < this.nextProbeAt) return false;
    this.nextProbeAt = now + this.probeIntervalMs;
    return true;
  }

  private succeeded(): void {
    if (this.current === 'degraded') this.enter('ok', null);
  }

  private failed(err: unknown): void {
    this.nextProbeAt = Date.now() + this.probeIntervalMs;
    this.enter('degraded', err instanceof Error ? err : new Error(String(err)));
  }

  /** The limiter to use while Redis cannot answer, or the fail_closed error. */
  private fallback(): MemoryLimiter {
    if (this.policy === 'fail_closed') throw new LimiterUnavailableError(this.lastError);
    this.fallbackLimiter ??= new MemoryLimiter({ windowMs: this.windowMs });
    return this.fallbackLimiter;
  }

  private enter(state: LimiterState, error: Error | null): void {
    if (error !== null) this.lastError = error;
    if (state === this.current) return;
    this.current = state;
    this.onStateChange?.(state, error);
  }

  private listen(event: string, listener: (...args: unknown[]) => void): void {
    this.listeners.push([event, listener]);
    this.client.on(event, listener);
  }
}
