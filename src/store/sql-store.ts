// The one Store implementation: the same SQL over either driver (pg Pool or PGlite).
// It registers this process in `instances` and heartbeats so peers can recover its reservations.

import { hostname } from 'node:os';
import type { Nano } from '../billing/money.ts';
import * as accounts from './accounts.ts';
import * as keys from './api-keys.ts';
import type { LeaseBookOptions } from './lease-book.ts';
import { LeaseBook } from './lease-book.ts';
import * as changes from './change-log.ts';
import type { Driver } from './driver.ts';
import { randomBase62 } from './ids.ts';
import type { Migration } from './migrate.ts';
import { loadMigrations, runMigrations } from './migrate.ts';
import * as reservations from './reservations.ts';
import type {
  Account,
  AccountStatus,
  ApiKey,
  ChangeEntry,
  CreatedKey,
  KeyLookup,
  LedgerEntry,
  MigrationReport,
  ReserveInput,
  ReserveResult,
  SettleOutcome,
  SettleResult,
  Statement,
  Store,
  UsageFilter,
  UsageRecord,
} from './store.ts';
import * as usage from './usage.ts';

/** Heartbeat period; a peer is declared dead after 3 missed beats (15 s). */
export const DEFAULT_HEARTBEAT_MS = 5000;
export const STALE_AFTER_BEATS = 3;

export interface SqlStoreOptions {
  /** Default: '<hostname>-<pid>-<random>', readable in the instances table. */
  instanceId?: string;
  /**
   * Period of the heartbeat, which also recovers the reservations of instances silent for
   * 3 periods. 0 = no timer (tests call heartbeat() and recoverDeadInstances() themselves).
   */
  heartbeatMs?: number;
  /** False when another store shares this driver (tests: two instances on one PGlite). */
  ownsDriver?: boolean;
  /**
   * Admit from balance leases in memory and write outcomes behind in group commits
   * (docs/decisions/0013). Off: every reserve and settle is its own statement (decision 0003).
   * The gateway turns it on; CLI commands, which never reserve, leave it off.
   */
  leases?: boolean | LeaseBookOptions;
}

export class SqlStore implements Store {
  readonly backend: 'pg' | 'pglite';
  readonly instanceId: string;
  readonly driver: Driver;
  private readonly ownsDriver: boolean;
  private readonly heartbeatMs: number;
  private timer: NodeJS.Timeout | null;
  private closed: boolean;
  /** The lease book when leases are on; null = one statement per reserve and settle. */
  readonly book: LeaseBook | null;

  private constructor(driver: Driver, options: SqlStoreOptions) {
    this.backend = driver.kind;
    this.driver = driver;
    this.instanceId = options.instanceId ?? `${hostname()}-${process.pid}-${randomBase62(6)}`;
    this.ownsDriver = options.ownsDriver ?? true;
    this.heartbeatMs = options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
    this.timer = null;
    this.closed = false;
    const leases = options.leases ?? false;
    this.book =
      leases === false
        ? null
        : new LeaseBook(driver, this.instanceId, leases === true ? {} : leases);
  }

  /** Migrates, registers the instance and starts the heartbeat. */
  static async open(driver: Driver, options: SqlStoreOptions = {}): Promise<SqlStore> {
    const store = new SqlStore(driver, options);
    try {
      await store.migrate();
      await store.heartbeat();
    } catch (err) {
      if (store.ownsDriver) await driver.close().catch(() => undefined);
      throw err;
    }
    store.startHeartbeat();
    return store;
  }

  private startHeartbeat(): void {
    if (this.heartbeatMs <= 0) return;
    const staleMs = this.heartbeatMs * STALE_AFTER_BEATS;
    this.timer = setInterval(() => {
      this.heartbeat()
        .then(() => this.recoverDeadInstances(staleMs))
        .catch((err: unknown) => {
          const reason = err instanceof Error ? err.message : String(err);
          console.warn(`[store] heartbeat or recovery failed: ${reason}`);
        });
    }, this.heartbeatMs);
    // The heartbeat alone must not keep a finished process alive.
    this.timer.unref();
  }

  async migrate(): Promise<MigrationReport> {
    return runMigrations(this.driver, await loadMigrations());
  }

  /** Applies a given list instead of src/store/migrations (tests of the checksum guard). */
  migrateWith(migrations: readonly Migration[]): Promise<MigrationReport> {
    return runMigrations(this.driver, migrations);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    try {
      await this.book?.close();
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      console.warn(`[store] final write of the lease book failed: ${reason}`);
    }
    try {
      await reservations.unregisterInstance(this.driver, this.instanceId);
    } finally {
      if (this.ownsDriver) await this.driver.close();
    }
  }

  /** Every read below calls it first, so reads see every outcome settled before them. */
  async flush(): Promise<void> {
    if (this.book !== null) await this.book.flush();
  }

  createAccount(input: { name: string; realnameVerified?: boolean }): Promise<Account> {
    return accounts.createAccount(this.driver, input);
  }
  async getAccount(id: string): Promise<Account | null> {
    await this.flush();
    return accounts.getAccount(this.driver, id);
  }
  async listAccounts(): Promise<Account[]> {
    await this.flush();
    return accounts.listAccounts(this.driver);
  }
  async setAccountStatus(id: string, status: AccountStatus): Promise<Account> {
    const account = await accounts.setAccountStatus(this.driver, id, status);
    if (this.book === null || status !== 'disabled') return account;
    // Nothing more is admitted from this process's lease; its slack goes back to the account.
    await this.book.accountDisabled(id);
    return (await accounts.getAccount(this.driver, id)) ?? account;
  }
  setAccountRealname(id: string, verified: boolean): Promise<Account> {
    return accounts.setAccountRealname(this.driver, id, verified);
  }
  async adjustBalance(
    accountId: string,
    amountNano: Nano,
    kind: 'topup' | 'adjust',
    reason: string,
  ): Promise<LedgerEntry> {
    // Money leased by this process is still the account's: give it back before taking any.
    if (amountNano < 0n) await this.book?.returnSlack(accountId);
    return accounts.adjustBalance(this.driver, accountId, amountNano, kind, reason);
  }

  createKey(input: keys.CreateKeyInput): Promise<CreatedKey> {
    return keys.createKey(this.driver, input);
  }
  findKeyByHash(hash: string): Promise<KeyLookup | null> {
    return keys.findKeyByHash(this.driver, hash);
  }
  listKeys(accountId: string | null): Promise<ApiKey[]> {
    return keys.listKeys(this.driver, accountId);
  }
  disableKey(id: string): Promise<ApiKey> {
    return keys.disableKey(this.driver, id);
  }
  deleteKey(id: string): Promise<boolean> {
    return keys.deleteKey(this.driver, id);
  }

  reserve(input: ReserveInput): Promise<ReserveResult> {
    if (this.book !== null) return this.book.reserve(input);
    return reservations.reserve(this.driver, this.instanceId, input);
  }
  settle(requestId: string, outcome: SettleOutcome): Promise<SettleResult> {
    if (this.book !== null) return this.book.settle(requestId, outcome);
    return reservations.settle(this.driver, requestId, outcome);
  }
  release(requestId: string): Promise<'released' | 'duplicate'> {
    if (this.book !== null) return this.book.release(requestId);
    return reservations.release(this.driver, requestId);
  }
  heartbeat(): Promise<void> {
    return reservations.heartbeat(this.driver, this.instanceId);
  }
  recoverDeadInstances(staleMs: number): Promise<number> {
    return reservations.recoverDeadInstances(this.driver, this.instanceId, staleMs);
  }

  latestChangeSeq(): Promise<bigint> {
    return changes.latestChangeSeq(this.driver);
  }
  changesSince(seq: bigint): Promise<ChangeEntry[]> {
    return changes.changesSince(this.driver, seq);
  }

  async getUsage(requestId: string): Promise<UsageRecord | null> {
    await this.flush();
    return usage.getUsage(this.driver, requestId);
  }
  async listUsage(filter: UsageFilter): Promise<UsageRecord[]> {
    await this.flush();
    return usage.listUsage(this.driver, filter);
  }
  async statement(accountId: string, from: Date, to: Date): Promise<Statement> {
    await this.flush();
    return usage.statement(this.driver, accountId, from, to);
  }
}
