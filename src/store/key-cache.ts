// Authenticates API keys from memory: steady-state lookups make no database round trip.
// Entries are dropped when the change log says their key or account changed (polled every
// pollMs, default 1 s), so a disable reaches every instance within about one poll.

import { hashKey, KEY_PREFIX } from './key-secret.ts';
import type { ApiKey, KeyLookup, Store } from './store.ts';

export type AuthFailure = 'unknown_key' | 'key_disabled' | 'key_expired' | 'account_disabled';

export type AuthResult =
  { ok: true; key: ApiKey; realnameVerified: boolean } | { ok: false; reason: AuthFailure };

export type KeySource = Pick<Store, 'findKeyByHash' | 'latestChangeSeq' | 'changesSince'>;

export interface KeyCacheOptions {
  /** Change-log poll period; default 1000 ms. */
  pollMs?: number;
  /** How long an unknown key is remembered; default 5000 ms. New keys clear it at once anyway. */
  negativeTtlMs?: number;
  /**
   * Safety net: a found key is re-read after this long even without a change; default 60 s. From
   * three quarters of it on, a request is answered from the entry while it is re-read behind.
   */
  positiveTtlMs?: number;
  /** Per map (known, unknown); the oldest entry goes first. Default 100,000. */
  maxEntries?: number;
  /** Clock for expiry checks (tests). */
  now?: () => number;
}

interface Entry {
  lookup: KeyLookup;
  /** Key expiry in epoch ms, or null: checked against the clock on every lookup. */
  expiresAtMs: number | null;
  cachedAtMs: number;
}

// 'sk-sy-' + 40 base62: anything else cannot be a key and is refused without a query.
const KEY_SHAPE = new RegExp(`^${KEY_PREFIX}[A-Za-z0-9]{40}$`);
const UNKNOWN: AuthResult = Object.freeze({ ok: false, reason: 'unknown_key' });

/** Equal keys, in time that depends only on the length (both passed KEY_SHAPE: 46 chars). */
function sameKey(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

function verdict(entry: Entry, now: number): AuthResult {
  const { key, accountStatus, realnameVerified } = entry.lookup;
  if (key.status !== 'active') return { ok: false, reason: 'key_disabled' };
  if (entry.expiresAtMs !== null && entry.expiresAtMs <= now) {
    return { ok: false, reason: 'key_expired' };
  }
  if (accountStatus !== 'active') return { ok: false, reason: 'account_disabled' };
  return { ok: true, key, realnameVerified };
}

export class KeyCache {
  private readonly source: KeySource;
  private readonly pollMs: number;
  private readonly negativeTtlMs: number;
  private readonly positiveTtlMs: number;
  /** Age from which a hit starts a re-read in the background (3/4 of positiveTtlMs). */
  private readonly refreshAfterMs: number;
  private readonly maxEntries: number;
  private readonly now: () => number;
  /** sha256 hex → entry. */
  private readonly known: Map<string, Entry>;
  /** sha256 hex → epoch ms until which the hash is known not to exist. */
  private readonly unknown: Map<string, number>;
  private readonly inflight: Map<string, Promise<Entry | null>>;
  /** Per socket, the last key it sent and its hash (hashOn). */
  private readonly byConnection = new WeakMap<object, { plaintext: string; hash: string }>();
  /** Highest change-log seq applied; null until the first poll. */
  private lastSeq: bigint | null;
  /** Bumped on every invalidation: a lookup that raced one is answered but not cached. */
  private epoch: number;
  private polling: boolean;
  private timer: NodeJS.Timeout | null;

  constructor(source: KeySource, options: KeyCacheOptions = {}) {
    this.source = source;
    this.pollMs = options.pollMs ?? 1000;
    this.negativeTtlMs = options.negativeTtlMs ?? 5000;
    this.positiveTtlMs = options.positiveTtlMs ?? 60_000;
    this.refreshAfterMs = (this.positiveTtlMs * 3) / 4;
    this.maxEntries = options.maxEntries ?? 100_000;
    this.now = options.now ?? Date.now;
    this.known = new Map();
    this.unknown = new Map();
    this.inflight = new Map();
    this.lastSeq = null;
    this.epoch = 0;
    this.polling = false;
    this.timer = null;
  }

  /** Reads the change-log position, then polls every pollMs until stop(). */
  async start(): Promise<void> {
    await this.poll();
    if (this.timer !== null) return;
    this.timer = setInterval(() => {
      this.poll().catch((err: unknown) => {
        const reason = err instanceof Error ? err.message : String(err);
        console.warn(`[key-cache] change-log poll failed: ${reason}`);
      });
    }, this.pollMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  /**
   * `connection`: the socket the key came on, when there is one. Its sha256 is then kept with
   * that connection while the same key comes again (see hashOn).
   */
  async authenticate(plaintext: string, connection: object | null = null): Promise<AuthResult> {
    if (!KEY_SHAPE.test(plaintext)) return UNKNOWN;
    const hash = connection === null ? hashKey(plaintext) : this.hashOn(connection, plaintext);
    const now = this.now();
    const hit = this.known.get(hash);
    if (hit !== undefined && now - hit.cachedAtMs < this.positiveTtlMs) {
      // Re-read before the entry runs out: at its expiry every request with the key waited on one
      // lookup through the store (the probe of session 28 saw authentication's p99 at 1.3-6 ms).
      if (now - hit.cachedAtMs >= this.refreshAfterMs && !this.inflight.has(hash)) {
        this.loadOnce(hash).catch(() => undefined); // a failed re-read: the entry serves on
      }
      return verdict(hit, now);
    }
    const unknownUntil = this.unknown.get(hash);
    if (unknownUntil !== undefined && now < unknownUntil) return UNKNOWN;
    const entry = await this.loadOnce(hash);
    return entry === null ? UNKNOWN : verdict(entry, this.now());
  }

  /** Concurrent lookups of one key (first requests, a re-read) share one query. */
  private loadOnce(hash: string): Promise<Entry | null> {
    let pending = this.inflight.get(hash);
    if (pending === undefined) {
      pending = this.load(hash);
      this.inflight.set(hash, pending);
    }
    return pending;
  }

  /**
   * The sha256 of the key a connection last sent. A client sends one key on every request of a
   * keep-alive connection, and node's sha256 (OpenSSL) cost ~60 µs a request when the request
   * path ran cold, after the CPU idled between paced requests, against ~0.3 µs hot (session 12).
   * Only a later request on the same socket can match the plaintext kept here, compared in
   * constant time (a proxy may carry several clients on one connection); it goes with the
   * socket. It caches the hash only: every verdict still comes from the entries above.
   */
  private hashOn(connection: object, plaintext: string): string {
    const last = this.byConnection.get(connection);
    if (last !== undefined && sameKey(last.plaintext, plaintext)) return last.hash;
    const hash = hashKey(plaintext);
    this.byConnection.set(connection, { plaintext, hash });
    return hash;
  }

  /** Applies new change-log rows; one indexed query (`seq > $last`), usually returning nothing. */
  async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      if (this.lastSeq === null) {
        const latest = await this.source.latestChangeSeq();
        // Entries read before the log position was known cannot be trusted.
        this.invalidateAll();
        this.lastSeq = latest;
        return;
      }
      const changes = await this.source.changesSince(this.lastSeq);
      if (changes.length === 0) return;
      const keyIds = new Set<string>();
      const accountIds = new Set<string>();
      for (const change of changes) {
        if (change.kind === 'key') keyIds.add(change.id);
        else accountIds.add(change.id);
        this.lastSeq = change.seq;
      }
      this.epoch++;
      // A created key may be sitting in the negative cache under its hash, which the log
      // does not carry; key changes are rare, so dropping every negative entry is cheap.
      if (keyIds.size > 0) this.unknown.clear();
      for (const [hash, entry] of this.known) {
        if (keyIds.has(entry.lookup.key.id) || accountIds.has(entry.lookup.key.accountId)) {
          this.known.delete(hash);
        }
      }
    } finally {
      this.polling = false;
    }
  }

  private invalidateAll(): void {
    this.epoch++;
    this.known.clear();
    this.unknown.clear();
  }

  private async load(hash: string): Promise<Entry | null> {
    const epoch = this.epoch;
    try {
      const lookup = await this.source.findKeyByHash(hash);
      const now = this.now();
      if (lookup === null) {
        if (epoch === this.epoch) {
          this.known.delete(hash); // a re-read found the key gone
          this.remember(this.unknown, hash, now + this.negativeTtlMs);
        }
        return null;
      }
      const expiresAt = lookup.key.expiresAt;
      const entry: Entry = {
        lookup,
        expiresAtMs: expiresAt === null ? null : expiresAt.getTime(),
        cachedAtMs: now,
      };
      if (epoch === this.epoch) this.remember(this.known, hash, entry);
      return entry;
    } finally {
      this.inflight.delete(hash);
    }
  }

  private remember<V>(map: Map<string, V>, hash: string, value: V): void {
    map.delete(hash);
    if (map.size >= this.maxEntries) {
      const oldest = map.keys().next();
      if (oldest.done !== true) map.delete(oldest.value);
    }
    map.set(hash, value);
  }
}
