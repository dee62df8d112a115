// The protection layers' one interface (spec section 8): per-model RPM, channel capacity slots and
// the temporary blacklist. Two backends implement it: memory-limiter.ts and redis-limiter.ts.

/** Outcome of one request against a requests-per-window bucket. */
export type RpmResult = {
  allowed: boolean;
  /** The limit the request was checked against. */
  limit: number;
  /** Requests still admitted in the current window after this one (0 when rejected). */
  remaining: number;
  /** Milliseconds until the oldest counted request leaves the window and frees a slot. */
  resetMs: number;
  /** Whole seconds for a `Retry-After` header: at least 1 when rejected, 0 when allowed. */
  retryAfterSeconds: number;
};

/** A held channel-capacity slot. Release it when the upstream call ends; it expires by itself. */
export type SlotLease = {
  readonly channelId: string;
  /** Unique per acquisition, so releasing an old lease can never free someone else's slot. */
  readonly token: string;
  /** Epoch ms (on the backend's clock) when the slot frees itself; `renewSlot` moves it. */
  expiresAtMs: number;
};

/** A slot wanted together with an RPM hit (see `hitRpmAndAcquire`). */
export type SlotRequest = { channelId: string; capacity: number; ttlMs: number };

/**
 * The RPM verdict, and the slot when one was asked for: the lease, 'full' when the channel had
 * none free, 'none' when no slot was asked for or the RPM hit was refused (then none is held).
 */
export type RpmAndSlot = { rpm: RpmResult; slot: SlotLease | 'full' | 'none' };

export type BlacklistEntry = {
  readonly source: string;
  readonly reason: string;
  /** Epoch ms when the restriction lifts. */
  readonly untilMs: number;
  readonly addedBy: 'rule' | 'admin';
};

/** A strike rule: `max` strikes within `windowMs` restrict the source for `banMs`. */
export type StrikeRule = {
  readonly name: string;
  readonly max: number;
  readonly windowMs: number;
  readonly banMs: number;
};

export type LimiterState = 'ok' | 'degraded';

/**
 * The hot path calls `hitRpm`, `acquireSlot`/`releaseSlot` and `isBlacklisted` once per request.
 * A model or channel with no limit is `null` in the compiled table: the caller checks
 * `!== null` and does not call the limiter at all, so an unlimited layer costs nothing.
 */
export interface Limiter {
  /**
   * Counts one request in `bucket` (built by the caller, e.g. `rpm:${model}:acct:${id}`) if fewer
   * than `limit` were admitted in the sliding window; rejected requests are not counted. Exact:
   * N concurrent calls against a limit of K admit exactly min(N, K).
   */
  hitRpm(bucket: string, limit: number): Promise<RpmResult>;
  /**
   * `hitRpm`, then — only when it admits, and `slot` is not null — `acquireSlot`, as one call: on
   * Redis one script and one round trip instead of two in a row on the request path.
   */
  hitRpmAndAcquire(bucket: string, limit: number, slot: SlotRequest | null): Promise<RpmAndSlot>;
  /** Takes one of `capacity` slots of a channel for at most `ttlMs`; null when all are taken. */
  acquireSlot(channelId: string, capacity: number, ttlMs: number): Promise<SlotLease | null>;
  /** Frees the lease's slot. Idempotent: a second release, or one after expiry, does nothing. */
  releaseSlot(lease: SlotLease): Promise<void>;
  /**
   * Pushes a held lease's expiry to now + ttlMs (for streams that outlive the ttl). False when
   * the lease already expired or was released; the slot is then no longer held.
   */
  renewSlot(lease: SlotLease, ttlMs: number): Promise<boolean>;
  /** Slots of the channel held and not expired. */
  slotsInUse(channelId: string): Promise<number>;
  /** The source's restriction in force, or null. */
  isBlacklisted(source: string): Promise<BlacklistEntry | null>;
  /**
   * Counts a strike of `rule` against the source in a sliding window of `rule.windowMs`. When the
   * count reaches `rule.max`, the strikes are cleared and the source is restricted for
   * `rule.banMs`; the entry in force is returned (an already longer restriction is kept).
   * Otherwise null.
   */
  recordStrike(source: string, rule: StrikeRule): Promise<BlacklistEntry | null>;
  /** Restricts the source for `banMs` from now (addedBy 'admin'), replacing any entry. */
  addToBlacklist(source: string, banMs: number, reason: string): Promise<BlacklistEntry>;
  /** Lifts the source's restriction; false when it had none. */
  removeFromBlacklist(source: string): Promise<boolean>;
  /** Restrictions in force, soonest to lift first. */
  listBlacklist(): Promise<BlacklistEntry[]>;
  close(): Promise<void>;
}

/**
 * Thrown under the `fail_closed` policy while Redis cannot answer; the HTTP layer maps it to 503
 * so that no request passes unchecked.
 */
export class LimiterUnavailableError extends Error {
  readonly code = 'limiter_unavailable';
  override readonly cause: unknown;

  constructor(cause: unknown) {
    super('the shared limiter store (Redis) is unavailable');
    this.name = 'LimiterUnavailableError';
    this.cause = cause;
  }
}

/** The `Retry-After` seconds for a rejection `resetMs` away: whole seconds, at least 1. */
export function retryAfterSeconds(resetMs: number): number {
  return resetMs <= 1000 ? 1 : Math.ceil(resetMs / 1000);
}
