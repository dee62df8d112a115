// The one Store implementation: the same SQL over either driver (pg Pool or PGlite).
// It registers this process in `instances` and heartbeats so peers can recover its reservations.

import { hostname } from 'node:os';
import type { Nano } from '../billing/money.ts';
import * as accounts from './accounts.ts';
import * as keys from './api-keys.ts';
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
}

export class SqlStore implements Store {
  readonly backend: 'pg' | 'pglite';
  readonly instanceId: string;
  readonly driver: Driver;
  private readonly ownsDriver: boolean;
  private readonly heartbeatMs: number;
  private timer: NodeJS.Timeout | null;
  private closed: boolean;

  private constructor(driver: Driver, options: SqlStoreOptions) {
    this.backend = driver.kind;
    this.driver = driver;
    this.instanceId = options.instanceId ?? `${hostname()}-${process.pid}-${randomBase62(6)}`;
    this.ownsDriver = options.ownsDriver ?? true;
    this.heartbeatMs = options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
    this.timer = null;
    this.closed = false;
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
      await reservations.unregisterInstance(this.driver, this.instanceId);
    } finally {
      if (this.ownsDriver) await this.driver.close();
    }
  }

  createAccount(input: { name: string; realnameVerified?: boolean }): Promise<Account> {
    return accounts.createAccount(this.driver, input);
  }
  getAccount(id: string): Promise<Account | null> {
    return accounts.getAccount(this.driver, id);
  }
  listAccounts(): Promise<Account[]> {
    return accounts.listAccounts(this.driver);
  }
  setAccountStatus(id: string, status: AccountStatus): Promise<Account> {
    return accounts.setAccountStatus(this.driver, id, status);
  }
  setAccountRealname(id: string, verified: boolean): Promise<Account> {
    return accounts.setAccountRealname(this.driver, id, verified);
  }
  adjustBalance(
    accountId: string,
    amountNano: Nano,
    kind: 'topup' | 'adjust',
    reason: string,
  ): Promise<LedgerEntry> {
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
    return reservations.reserve(this.driver, this.instanceId, input);
  }
  settle(requestId: string, outcome: SettleOutcome): Promise<SettleResult> {
    return reservations.settle(this.driver, requestId, outcome);
  }
  release(requestId: string): Promise<'released' | 'duplicate'> {
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

  getUsage(requestId: string): Promise<UsageRecord | null> {
    return usage.getUsage(this.driver, requestId);
  }
  listUsage(filter: UsageFilter): Promise<UsageRecord[]> {
    return usage.listUsage(this.driver, filter);
  }
  statement(accountId: string, from: Date, to: Date): Promise<Statement> {
    return usage.statement(this.driver, accountId, from, to);
  }
}
