// The shared limiter: every gateway process points at one Redis and the Lua scripts in
// redis-scripts.ts keep the RPM windows, capacity slots and blacklist exact across them.
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { retryAfterSeconds } from './limiter.ts';
import type { BlacklistEntry, Limiter, RpmResult, SlotLease, StrikeRule } from './limiter.ts';
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
};

export class RedisLimiter implements Limiter {
  readonly windowMs: number;
  readonly client: Redis & LimiterCommands;
  private readonly prefix: string;
  private readonly ownsClient: boolean;
  /** Members and tokens are `${tag}${counter}`: unique across processes without a round trip. */
  private readonly tag: string;
  private counter: number;

  constructor(options: RedisLimiterOptions) {
    this.client = withLimiterCommands(options.client);
    this.prefix = options.keyPrefix ?? 'switchyard:';
    this.windowMs = options.windowMs ?? 60_000;
    this.ownsClient = options.ownsClient ?? false;
    this.tag = `${randomBytes(6).toString('base64url')}:`;
    this.counter = 0;
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
    // One HMGET: Redis drops the hash at untilMs (PEXPIREAT on its own clock), so no script.
    const [reason, untilMs, addedBy] = await this.client.hmget(
      this.entryKey(source),
      'reason',
      'untilMs',
      'addedBy',
    );
    if (reason == null || untilMs == null) return null;
    return { source, reason, untilMs: Number(untilMs), addedBy: addedByOf(addedBy) };
  }

  async recordStrike(source: string, rule: StrikeRule): Promise<BlacklistEntry | null> {
    const reply = await this.client.syRecordStrike(
      `${this.prefix}strike:${rule.name}:${source}`,
      this.entryKey(source),
      this.indexKey(),
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
    return {
      source,
      reason: String(reason),
      untilMs: Number(untilMs),
      addedBy: addedByOf(addedBy),
    };
  }

  async addToBlacklist(source: string, banMs: number, reason: string): Promise<BlacklistEntry> {
    const reply = await this.client.syAddToBlacklist(
      this.entryKey(source),
      this.indexKey(),
      banMs,
      reason,
      source,
    );
    return { source, reason, untilMs: integer(reply), addedBy: 'admin' };
  }

  async removeFromBlacklist(source: string): Promise<boolean> {
    const reply = await this.client.syRemoveFromBlacklist(
      this.entryKey(source),
      this.indexKey(),
      source,
    );
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
