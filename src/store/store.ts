// The store's contract: accounts, API keys, ledger, balance reservations and usage log, as the
// rest of the gateway sees them. Both backends (Postgres via `pg`, embedded PGlite) implement it.

import type { Nano } from '../billing/money.ts';

export type AccountStatus = 'active' | 'disabled';
export type KeyStatus = 'active' | 'disabled';
export type LedgerKind = 'topup' | 'adjust' | 'usage';
/** How a request ended; 'recovered' is written only by crash recovery, never by settle. */
export type UsageStatus = 'ok' | 'failed' | 'aborted' | 'client_aborted' | 'recovered';
export type SettleStatus = Exclude<UsageStatus, 'recovered'>;

export interface Account {
  id: string;
  name: string;
  balanceNano: Nano;
  /** Held for open requests (reservations, leased or not); never below 0. */
  reservedNano: Nano;
  /**
   * The part of the available balance (balanceNano - reservedNano) that gateway instances hold
   * as balance leases beyond their open requests (docs/decisions/0013): they admit from it
   * without a database round trip and return it when the lease goes idle. Still the account's
   * to spend; only a negative adjustment must wait for it.
   */
  leasedNano: Nano;
  realnameVerified: boolean;
  status: AccountStatus;
  createdAt: Date;
  updatedAt: Date;
}

/** An API key as stored; the plaintext is never stored, only its sha256 hex. */
export interface ApiKey {
  id: string;
  accountId: string;
  name: string;
  /** First 10 characters of the plaintext ("sk-sy-AbCd"), for display only. */
  keyPrefix: string;
  /** Model names or glob patterns ('deepseek-*'); null = every model. */
  allowedModels: readonly string[] | null;
  status: KeyStatus;
  expiresAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

/** A key joined with the account fields that admission needs. */
export interface KeyLookup {
  key: ApiKey;
  accountStatus: AccountStatus;
  realnameVerified: boolean;
}

export interface CreatedKey {
  /** Shown once to the caller; not recoverable later. */
  plaintext: string;
  record: ApiKey;
}

export interface LedgerEntry {
  id: bigint;
  accountId: string;
  kind: LedgerKind;
  /** Signed: a topup is positive, usage negative. */
  amountNano: Nano;
  balanceAfterNano: Nano;
  reason: string | null;
  requestId: string | null;
  createdAt: Date;
}

/**
 * The price in force when the request entered, as exact decimal strings (never floats), e.g.
 * { inputNanoPerToken: '2000', cacheHitNanoPerToken: '500', outputNanoPerToken: '8000',
 *   peakMultiplier: '15000', campaignId: null, campaignDiscount: null,
 *   effectiveFrom: '2025-01-01T00:00:00Z' }. The billing layer owns the keys.
 */
export type PriceSnapshot = Readonly<Record<string, string | null>>;

/**
 * A price snapshot as the gateway hands it over: the part every request on one price, peak window
 * and campaign shares (one object, reused: its identity finds its price_snapshots id without
 * serialising it, decision 0019) and the request's entry time, which a whole snapshot carries as
 * `pricedAt`. The two together equal that whole snapshot (`wholeSnapshot`).
 */
export class SplitPriceSnapshot {
  readonly shared: PriceSnapshot;
  readonly pricedAtMs: number;
  constructor(shared: PriceSnapshot, pricedAtMs: number) {
    this.shared = shared;
    this.pricedAtMs = pricedAtMs;
  }
}

/** The snapshot as one record, `pricedAt` included. */
export function wholeSnapshot(s: PriceSnapshot | SplitPriceSnapshot): PriceSnapshot {
  return s instanceof SplitPriceSnapshot
    ? { ...s.shared, pricedAt: new Date(s.pricedAtMs).toISOString() }
    : s;
}

export interface UsageRecord {
  /** The gateway's own id for the request: unique, the usage log's key. */
  requestId: string;
  /**
   * The id the caller sent as x-request-id, kept as the request's id in its answer, logs and trace;
   * null when the gateway made the id (then requestId is the one the caller saw). A caller may
   * send one id with many requests, so many rows may have it (docs/decisions/0036).
   */
  clientRequestId: string | null;
  accountId: string;
  keyId: string;
  model: string;
  channelId: string | null;
  endpoint: string;
  inputTokens: number;
  cacheHitTokens: number;
  outputTokens: number;
  reasoningTokens: number;
  /** Tokens were estimated locally because the upstream reported no usage. */
  estimated: boolean;
  priceSnapshot: PriceSnapshot | null;
  peakApplied: boolean;
  campaignId: string | null;
  /** What was charged (after the reservation cap); sums to the balance change exactly. */
  costNano: Nano;
  /** What had been reserved at admission. */
  reservedNano: Nano;
  /** True when the metered cost exceeded the reservation and was cut to it. */
  capped: boolean;
  status: UsageStatus;
  httpStatus: number | null;
  latencyMs: number | null;
  upstreamRequestId: string | null;
  createdAt: Date;
}

export interface ReserveInput {
  /** Unique per request: the gateway's own id, never one a caller chose. */
  requestId: string;
  /** The caller's x-request-id, when the request came with one (kept on the usage row). */
  clientRequestId: string | null;
  accountId: string;
  keyId: string;
  model: string;
  endpoint: string;
  /** The most this request may cost, priced at entry; 0 is allowed. */
  amountNano: Nano;
}

export type ReserveResult = 'ok' | 'insufficient' | 'account_disabled';

/** What the relay knows when a request ends. */
export interface SettleOutcome {
  /** The model actually billed; null keeps the model given at reserve time. */
  model: string | null;
  channelId: string | null;
  inputTokens: number;
  cacheHitTokens: number;
  outputTokens: number;
  reasoningTokens: number;
  estimated: boolean;
  priceSnapshot: PriceSnapshot | SplitPriceSnapshot | null;
  peakApplied: boolean;
  campaignId: string | null;
  /** Metered cost; charged up to the reservation. Ignored (0) when status is 'failed'. */
  costNano: Nano;
  status: SettleStatus;
  httpStatus: number | null;
  latencyMs: number | null;
  upstreamRequestId: string | null;
}

export type SettleResult =
  | { result: 'settled'; costNano: Nano; capped: boolean; balanceAfterNano: Nano }
  /** The reservation was already settled, released or recovered: nothing changed. */
  | { result: 'duplicate' };

export interface UsageFilter {
  accountId?: string | null;
  keyId?: string | null;
  model?: string | null;
  /** Rows of the requests a caller sent with this x-request-id. */
  clientRequestId?: string | null;
  /** Inclusive. */
  from?: Date | null;
  /** Exclusive. */
  to?: Date | null;
  /** Default 100, at most 1000. Newest first. */
  limit?: number | null;
}

/** A balance statement; openingNano + topupsNano + adjustmentsNano - usageNano === closingNano. */
export interface Statement {
  accountId: string;
  from: Date;
  to: Date;
  openingNano: Nano;
  closingNano: Nano;
  topupsNano: Nano;
  /** Signed sum of manual adjustments. */
  adjustmentsNano: Nano;
  /** Positive: what usage took from the balance. */
  usageNano: Nano;
  rows: LedgerEntry[];
}

export interface ChangeEntry {
  seq: bigint;
  kind: 'key' | 'account';
  id: string;
}

export interface MigrationReport {
  /** Names of the migrations this call applied, in order (empty when already up to date). */
  applied: string[];
}

export interface Store {
  readonly backend: 'pg' | 'pglite';
  /** This process's id in `instances`; reservations carry it for crash recovery. */
  readonly instanceId: string;

  migrate(): Promise<MigrationReport>;
  /** Stops the heartbeat, unregisters the instance and closes the connection. */
  close(): Promise<void>;
  /** Writes now what waits for a group commit (balance leases); resolves once it is written. */
  flush(): Promise<void>;

  createAccount(input: { name: string; realnameVerified?: boolean }): Promise<Account>;
  getAccount(id: string): Promise<Account | null>;
  listAccounts(): Promise<Account[]>;
  setAccountStatus(id: string, status: AccountStatus): Promise<Account>;
  setAccountRealname(id: string, verified: boolean): Promise<Account>;
  /** A topup (> 0) or a signed adjustment; an adjustment may not take available below 0. */
  adjustBalance(
    accountId: string,
    amountNano: Nano,
    kind: 'topup' | 'adjust',
    reason: string,
  ): Promise<LedgerEntry>;

  createKey(input: {
    accountId: string;
    name: string;
    allowedModels: readonly string[] | null;
    expiresAt: Date | null;
  }): Promise<CreatedKey>;
  findKeyByHash(hash: string): Promise<KeyLookup | null>;
  listKeys(accountId: string | null): Promise<ApiKey[]>;
  disableKey(id: string): Promise<ApiKey>;
  /** True when a key was deleted. Its usage rows keep the key id. */
  deleteKey(id: string): Promise<boolean>;

  /** One round trip: holds amountNano of the available balance for this request. */
  reserve(input: ReserveInput): Promise<ReserveResult>;
  /** Ends a reserved request: charges min(cost, reserved), writes usage and ledger rows. */
  settle(requestId: string, outcome: SettleOutcome): Promise<SettleResult>;
  /** Drops a reservation without a usage row: the request was rejected before any upstream call. */
  release(requestId: string): Promise<'released' | 'duplicate'>;
  /** Marks this instance alive (the store does it every heartbeatMs on its own). */
  heartbeat(): Promise<void>;
  /** Resolves reservations of instances silent for staleMs; returns how many were recovered. */
  recoverDeadInstances(staleMs: number): Promise<number>;

  latestChangeSeq(): Promise<bigint>;
  changesSince(seq: bigint): Promise<ChangeEntry[]>;

  /**
   * The usage row with this id, or else the newest row whose caller sent it as x-request-id: the
   * id a caller saw in an answer finds its request either way.
   */
  getUsage(requestId: string): Promise<UsageRecord | null>;
  listUsage(filter: UsageFilter): Promise<UsageRecord[]>;
  statement(accountId: string, from: Date, to: Date): Promise<Statement>;
}

export type StoreErrorCode =
  | 'not_found'
  | 'insufficient_balance'
  | 'invalid_argument'
  | 'migration_changed'
  | 'migration_failed';

/** The one error type the store throws for expected conditions (others are driver errors). */
export class StoreError extends Error {
  readonly code: StoreErrorCode;
  constructor(code: StoreErrorCode, message: string) {
    super(message);
    this.name = 'StoreError';
    this.code = code;
  }
}
