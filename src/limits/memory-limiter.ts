// The single-process limiter: exact sliding-window logs, slot tables and the blacklist in Maps.
// A sweep on an unref'd timer drops idle buckets so memory stays flat under many keys.
import { SlidingLog } from './sliding-log.ts';
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

export type MemoryLimiterOptions = {
  /** Length of the RPM window; 60,000 in production, shorter in tests. */
  windowMs?: number;
  /** Clock in epoch ms; tests inject a fake one. */
  now?: () => number;
  /** How often idle buckets are dropped; 0 disables the timer (call `sweep()` yourself). */
  sweepIntervalMs?: number;
};

/** Sizes of the internal tables, for tests and metrics. */
export type MemoryLimiterStats = {
  rpmBuckets: number;
  slotChannels: number;
  strikeLogs: number;
  blacklisted: number;
};

const NOT_BLACKLISTED: Promise<null> = Promise.resolve(null);
const RESOLVED: Promise<void> = Promise.resolve();

let processTag = 0;

export class MemoryLimiter implements Limiter {
  readonly windowMs: number;
  private readonly now: () => number;
  private readonly rpm: Map<string, SlidingLog>;
  /** channelId → (token → expiry epoch ms). */
  private readonly slots: Map<string, Map<string, number>>;
  /** `${rule}\0${source}` → strike log. */
  private readonly strikes: Map<string, SlidingLog>;
  private readonly blacklist: Map<string, BlacklistEntry>;
  private readonly tokenPrefix: string;
  private nextToken: number;
  private timer: NodeJS.Timeout | null;

  constructor(options: MemoryLimiterOptions = {}) {
    this.windowMs = options.windowMs ?? 60_000;
    this.now = options.now ?? Date.now;
    this.rpm = new Map();
    this.slots = new Map();
    this.strikes = new Map();
    this.blacklist = new Map();
    this.tokenPrefix = `m${(processTag++).toString(36)}:`;
    this.nextToken = 0;
    const every = options.sweepIntervalMs ?? this.windowMs;
    this.timer = every > 0 ? setInterval(() => this.sweep(), every) : null;
    this.timer?.unref();
  }

  hitRpm(bucket: string, limit: number): Promise<RpmResult> {
    const now = this.now();
    const windowMs = this.windowMs;
    let log = this.rpm.get(bucket);
    if (log === undefined) {
      log = new SlidingLog(windowMs);
      this.rpm.set(bucket, log);
    }
    log.prune(now - windowMs);
    if (log.count < limit) {
      log.push(now, limit);
      return Promise.resolve({
        allowed: true,
        limit,
        remaining: limit - log.count,
        resetMs: log.oldest() + windowMs - now,
        retryAfterSeconds: 0,
      });
    }
    // A limit of 0 admits nothing and never frees; report a whole window.
    const resetMs = log.count === 0 ? windowMs : log.oldest() + windowMs - now;
    return Promise.resolve({
      allowed: false,
      limit,
      remaining: 0,
      resetMs,
      retryAfterSeconds: retryAfterSeconds(resetMs),
    });
  }

  async hitRpmAndAcquire(
    bucket: string,
    limit: number,
    slot: SlotRequest | null,
  ): Promise<RpmAndSlot> {
    const rpm = await this.hitRpm(bucket, limit);
    if (!rpm.allowed || slot === null) return { rpm, slot: 'none' };
    const lease = await this.acquireSlot(slot.channelId, slot.capacity, slot.ttlMs);
    return { rpm, slot: lease ?? 'full' };
  }

  acquireSlot(channelId: string, capacity: number, ttlMs: number): Promise<SlotLease | null> {
    const now = this.now();
    let held = this.slots.get(channelId);
    if (held === undefined) {
      held = new Map();
      this.slots.set(channelId, held);
    } else if (held.size >= capacity) {
      purgeExpired(held, now);
    }
    if (held.size >= capacity) return Promise.resolve(null);
    const token = this.tokenPrefix + (this.nextToken++).toString(36);
    const expiresAtMs = now + ttlMs;
    held.set(token, expiresAtMs);
    return Promise.resolve({ channelId, token, expiresAtMs });
  }

  releaseSlot(lease: SlotLease): Promise<void> {
    const held = this.slots.get(lease.channelId);
    if (held !== undefined && held.delete(lease.token) && held.size === 0) {
      this.slots.delete(lease.channelId);
    }
    return RESOLVED;
  }

  renewSlot(lease: SlotLease, ttlMs: number): Promise<boolean> {
    const now = this.now();
    const held = this.slots.get(lease.channelId);
    const expiresAtMs = held?.get(lease.token);
    if (held === undefined || expiresAtMs === undefined) return Promise.resolve(false);
    if (expiresAtMs <= now) {
      held.delete(lease.token);
      return Promise.resolve(false);
    }
    lease.expiresAtMs = now + ttlMs;
    held.set(lease.token, lease.expiresAtMs);
    return Promise.resolve(true);
  }

  slotsInUse(channelId: string): Promise<number> {
    const held = this.slots.get(channelId);
    if (held === undefined) return Promise.resolve(0);
    purgeExpired(held, this.now());
    return Promise.resolve(held.size);
  }

  isBlacklisted(source: string): Promise<BlacklistEntry | null> {
    // The common case is an empty blacklist: one size check and a shared resolved promise.
    if (this.blacklist.size === 0) return NOT_BLACKLISTED;
    return Promise.resolve(this.entryInForce(source, this.now()));
  }

  recordStrike(source: string, rule: StrikeRule): Promise<BlacklistEntry | null> {
    const now = this.now();
    const key = `${rule.name}\u0000${source}`;
    let log = this.strikes.get(key);
    if (log === undefined) {
      log = new SlidingLog(rule.windowMs);
      this.strikes.set(key, log);
    }
    log.windowMs = rule.windowMs;
    log.prune(now - rule.windowMs);
    log.push(now, rule.max);
    if (log.count < rule.max) return Promise.resolve(null);
    this.strikes.delete(key);
    const untilMs = now + rule.banMs;
    const current = this.entryInForce(source, now);
    if (current !== null && current.untilMs >= untilMs) return Promise.resolve(current);
    const entry: BlacklistEntry = {
      source,
      reason: `${rule.name}: ${rule.max} strikes within ${rule.windowMs} ms`,
      untilMs,
      addedBy: 'rule',
    };
    this.blacklist.set(source, entry);
    return Promise.resolve(entry);
  }

  addToBlacklist(source: string, banMs: number, reason: string): Promise<BlacklistEntry> {
    const entry: BlacklistEntry = { source, reason, untilMs: this.now() + banMs, addedBy: 'admin' };
    this.blacklist.set(source, entry);
    return Promise.resolve(entry);
  }

  removeFromBlacklist(source: string): Promise<boolean> {
    const inForce = this.entryInForce(source, this.now()) !== null;
    this.blacklist.delete(source);
    return Promise.resolve(inForce);
  }

  listBlacklist(): Promise<BlacklistEntry[]> {
    const now = this.now();
    const entries: BlacklistEntry[] = [];
    for (const entry of this.blacklist.values()) {
      if (entry.untilMs > now) entries.push(entry);
    }
    entries.sort((a, b) => a.untilMs - b.untilMs);
    return Promise.resolve(entries);
  }

  /** Drops idle RPM buckets and strike logs, expired slots and lifted restrictions. */
  sweep(): void {
    const now = this.now();
    for (const [bucket, log] of this.rpm) {
      if (log.count === 0 || log.newest() <= now - log.windowMs) this.rpm.delete(bucket);
    }
    for (const [key, log] of this.strikes) {
      if (log.count === 0 || log.newest() <= now - log.windowMs) this.strikes.delete(key);
    }
    for (const [channelId, held] of this.slots) {
      purgeExpired(held, now);
      if (held.size === 0) this.slots.delete(channelId);
    }
    for (const [source, entry] of this.blacklist) {
      if (entry.untilMs <= now) this.blacklist.delete(source);
    }
  }

  stats(): MemoryLimiterStats {
    return {
      rpmBuckets: this.rpm.size,
      slotChannels: this.slots.size,
      strikeLogs: this.strikes.size,
      blacklisted: this.blacklist.size,
    };
  }

  close(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    return RESOLVED;
  }

  private entryInForce(source: string, now: number): BlacklistEntry | null {
    const entry = this.blacklist.get(source);
    if (entry === undefined) return null;
    if (entry.untilMs > now) return entry;
    this.blacklist.delete(source);
    return null;
  }
}

function purgeExpired(held: Map<string, number>, now: number): void {
  for (const [token, expiresAtMs] of held) {
    if (expiresAtMs <= now) held.delete(token);
  }
}
