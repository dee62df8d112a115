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
   * version counter); a restriction added or lifted through another process is seen here
   * within this time. 0 turns the mirror off: every check is an HMGET.
   */
  blacklistSyncMs?: number;
};

/**
 * A local copy of the blacklist, so the check every request makes (one or two per request, before
 * its body is read) needs no round trip: on the Postgres+Redis gateway each HMGET was a
 * sequential Redis round trip on the request path, one event-loop turn under load. Changes made
 * through this process apply to the copy at once; changes made elsewhere bump a version counter
 * in Redis (in the same script), which the copy polls every `syncMs` and reloads on. It is
 * trusted for 4 sync periods: past that (Redis unreachable, sync failing) checks go to Redis
 * again, so the resilient limiter's policy applies as before. Entries lift by their untilMs.
 */
interface BlacklistMirror {
  entries: Map<string, BlacklistEntry>;
  version: string | null;
  syncedAtMs: number;
  /** A full reload at least this often, version or not (an instance that does not bump it). */
  reloadedAtMs: number;
  timer: NodeJS.Timeout | null;
  syncing: boolean;
  /** Local changes made while a reload was reading: applied again on top of what it read. */
  changedDuringSync: Map<string, BlacklistEntry | null>;
}

const MIRROR_FULL_RELOAD_MS = 5_000;

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

  constructor(options: RedisLimiterOptions) {
    this.client = withLimiterCommands(options.client);
    this.prefix = options.keyPrefix ?? 'switchyard:';
    this.windowMs = options.windowMs ?? 60_000;
    this.ownsClient = options.ownsClient ?? false;
    this.tag = `${randomBytes(6).toString('base64url')}:`;
    this.counter = 0;
    this.syncMs = options.blacklistSyncMs ?? 250;
    this.mirror = {
      entries: new Map(),
      version: null,
      syncedAtMs: -Infinity,
      reloadedAtMs: -Infinity,
      timer: null,
      syncing: false,
      changedDuringSync: new Map(),
    };
  }

  async hitRpm(bucket: string, limit: number): Promise<RpmResult> {
    const reply = await this.client.syHitRpm(
      this.prefix + bucket,
      limit,
      this.windowMs,
      this.unique(),
    );
    const [allowed, remaining, resetMs] = triple(reply);
    return {
      allowed: allowed === 1,
      limit,
      remaining,
      resetMs,
      retryAfterSeconds: allowed === 1 ? 0 : retryAfterSeconds(resetMs),
    };
  }

  async hitRpmAndAcquire(
    bucket: string,
    limit: number,
    slot: SlotRequest | null,
  ): Promise<RpmAndSlot> {
    const token = this.unique();
    const reply = await this.client.syHitRpmAcquire(
      this.prefix + bucket,
      // No slot asked: the script never reads KEYS[2]; the bucket key stands in.
      slot === null ? this.prefix + bucket : this.slotKey(slot.channelId),
      limit,
      this.windowMs,
      this.unique(),
      slot === null ? -1 : slot.capacity,
      slot === null ? 0 : slot.ttlMs,
      token,
    );
    if (!Array.isArray(reply) || reply.length !== 4) throw unexpected(reply);
    const [allowed, remaining, resetMs] = triple(reply.slice(0, 3));
    const expiresAtMs = integer(reply[3]);
    const rpm: RpmResult = {
      allowed: allowed === 1,
      limit,
      remaining,
      resetMs,
      retryAfterSeconds: allowed === 1 ? 0 : retryAfterSeconds(resetMs),
    };
    if (slot === null || expiresAtMs === -2) return { rpm, slot: 'none' };
    if (expiresAtMs === -1) return { rpm, slot: 'full' };
    return { rpm, slot: { channelId: slot.channelId, token, expiresAtMs } };
  }

  async acquireSlot(channelId: string, capacity: number, ttlMs: number): Promise<SlotLease | null> {
    const token = this.unique();
    const reply = await this.client.syAcquireSlot(this.slotKey(channelId), capacity, ttlMs, token);
    const expiresAtMs = integer(reply);
    return expiresAtMs < 0 ? null : { channelId, token, expiresAtMs };
  }

  async releaseSlot(lease: SlotLease): Promise<void> {
    // ZREM of this lease's own token: one atomic command, idempotent, needs no clock.
    await this.client.zrem(this.slotKey(lease.channelId), lease.token);
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
      if (m.timer === null) this.startMirror();
      const now = Date.now();
      if (now - m.syncedAtMs <= this.syncMs * 4) {
        const entry = m.entries.get(source);
        return entry !== undefined && entry.untilMs > now ? entry : null;
      }
    }
    return this.fetchEntry(source);
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
    const tick = (): void => {
      void this.syncMirror().catch(() => undefined);
    };
    this.mirror.timer = setInterval(tick, this.syncMs);
    this.mirror.timer.unref();
    tick();
  }

  /** Reloads the mirror when the version moved (or every MIRROR_FULL_RELOAD_MS). */
  private async syncMirror(): Promise<void> {
    const m = this.mirror;
    if (m.syncing) return;
    m.syncing = true;
    try {
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
    } finally {
      m.syncing = false;
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
    if (this.mirror.timer !== null) clearInterval(this.mirror.timer);
    this.mirror.timer = null;
    if (!this.ownsClient) return;
    if (this.client.status === 'ready') {
      await this.client.quit().catch(() => this.client.disconnect());
    } else {
      this.client.disconnect();
    }
  }

  private unique(): string {
    return this.tag + (this.counter++).toString(36);
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

function integer(reply: unknown): number {
  if (typeof reply !== 'number') throw unexpected(reply);
  return reply;
}

function triple(reply: unknown): [number, number, number] {
  if (!Array.isArray(reply) || reply.length !== 3) throw unexpected(reply);
  return [integer(reply[0]), integer(reply[1]), integer(reply[2])];
}

function addedByOf(value: unknown): 'rule' | 'admin' {
  return value === 'admin' ? 'admin' : 'rule';
}

function unexpected(reply: unknown): Error {
  return new Error(`unexpected reply from a limiter script: ${JSON.stringify(reply)}`);
}
