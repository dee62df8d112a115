// Reading the usage log and the ledger: per-request usage rows, filtered listings, and balance
// statements that reconcile exactly (opening + topups + adjustments - usage = closing).

import type { Driver, Queryable } from './driver.ts';
import type { LedgerRow, UsageRow } from './rows.ts';
import { LEDGER_COLUMNS, toLedgerEntry, toUsageRecord } from './rows.ts';
import type { Statement, UsageFilter, UsageRecord } from './store.ts';
import { StoreError } from './store.ts';

const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 1000;

// A usage row with its price snapshot's shared part when it was written by reference (0005).
const USAGE_FROM = `SELECT u.*, ps.snapshot AS shared_snapshot
  FROM usage_log u LEFT JOIN price_snapshots ps ON ps.id = u.price_snapshot_id`;

// The gateway's own id first; then the newest row a caller sent the id with (decision 0036). Each
// branch is one index lookup (the primary key, usage_log_client_request_id).
const GET_USAGE_SQL = `(${USAGE_FROM} WHERE u.request_id = $1)
  UNION ALL
  (${USAGE_FROM} WHERE u.client_request_id = $1 ORDER BY u.created_at DESC, u.request_id DESC)
  LIMIT 1`;

export async function getUsage(db: Queryable, requestId: string): Promise<UsageRecord | null> {
  const rows = await db.query<UsageRow>(GET_USAGE_SQL, [requestId]);
  return rows[0] === undefined ? null : toUsageRecord(rows[0]);
}

export async function listUsage(db: Queryable, filter: UsageFilter): Promise<UsageRecord[]> {
  const where: string[] = [];
  const params: unknown[] = [];
  const add = (clause: string, value: unknown): void => {
    params.push(value);
    where.push(clause.replace('?', `$${params.length}`));
  };
  if (filter.accountId != null) add('u.account_id = ?', filter.accountId);
  if (filter.keyId != null) add('u.key_id = ?', filter.keyId);
  if (filter.clientRequestId != null) add('u.client_request_id = ?', filter.clientRequestId);
  if (filter.model != null) add('u.model = ?', filter.model);
  if (filter.from != null) add('u.created_at >= ?::timestamptz', filter.from);
  if (filter.to != null) add('u.created_at < ?::timestamptz', filter.to);
  const limit = filter.limit ?? DEFAULT_LIMIT;
  if (!Number.isSafeInteger(limit) || limit < 1) {
    throw new StoreError('invalid_argument', 'limit must be a positive integer');
  }
  params.push(Math.min(limit, MAX_LIMIT));
  const rows = await db.query<UsageRow>(
    `${USAGE_FROM} ${where.length > 0 ? 'WHERE ' + where.join(' AND ') : ''}
      ORDER BY u.created_at DESC, u.request_id DESC LIMIT $${params.length}`,
    params,
  );
  return rows.map(toUsageRecord);
}

// Opening and closing are the balance after the last ledger row before each bound. Per account,
// ledger ids and created_at (clock_timestamp, written under the account lock) follow the balance
// chain, so the rows inside [from, to) are exactly the moves between the two balances.
const BOUNDS_SQL = `
SELECT
  (SELECT balance_after_nano FROM ledger
    WHERE account_id = $1 AND created_at < $2::timestamptz ORDER BY id DESC LIMIT 1) AS opening,
  (SELECT balance_after_nano FROM ledger
    WHERE account_id = $1 AND created_at < $3::timestamptz ORDER BY id DESC LIMIT 1) AS closing`;

export async function statement(
  driver: Driver,
  accountId: string,
  from: Date,
  to: Date,
): Promise<Statement> {
  if (from.getTime() > to.getTime()) {
    throw new StoreError('invalid_argument', 'statement period ends before it starts');
  }
  // One snapshot for bounds and rows, so a charge landing mid-read cannot unbalance the sums.
  const { bounds, rows } = await driver.transaction(async (tx) => {
    await tx.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
    return {
      bounds: await tx.query<{ opening: bigint | null; closing: bigint | null }>(BOUNDS_SQL, [
        accountId,
        from,
        to,
      ]),
      rows: await tx.query<LedgerRow>(
        `SELECT ${LEDGER_COLUMNS} FROM ledger
          WHERE account_id = $1 AND created_at >= $2::timestamptz AND created_at < $3::timestamptz
          ORDER BY id`,
        [accountId, from, to],
      ),
    };
  });
  const entries = rows.map(toLedgerEntry);
  let topups = 0n;
  let adjustments = 0n;
  let usage = 0n;
  for (const e of entries) {
    if (e.kind === 'topup') topups += e.amountNano;
    else if (e.kind === 'adjust') adjustments += e.amountNano;
    else usage -= e.amountNano;
  }
  return {
    accountId,
    from,
    to,
    openingNano: bounds[0]?.opening ?? 0n,
    closingNano: bounds[0]?.closing ?? 0n,
    topupsNano: topups,
    adjustmentsNano: adjustments,
    usageNano: usage,
    rows: entries,
  };
}
