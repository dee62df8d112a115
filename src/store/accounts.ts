// Accounts and their balance: creation, status, real-name flag, topups and adjustments.
// Every balance change writes a ledger row in the same transaction, after locking the account.

import type { Nano } from '../billing/money.ts';
import { recordChange } from './change-log.ts';
import type { Driver, Queryable } from './driver.ts';
import { newAccountId } from './ids.ts';
import type { AccountRow, LedgerRow } from './rows.ts';
import { ACCOUNT_COLUMNS, LEDGER_COLUMNS, toAccount, toLedgerEntry } from './rows.ts';
import type { Account, AccountStatus, LedgerEntry } from './store.ts';
import { StoreError } from './store.ts';

export async function createAccount(
  db: Queryable,
  input: { name: string; realnameVerified?: boolean },
): Promise<Account> {
  if (input.name.trim() === '') throw new StoreError('invalid_argument', 'account name is empty');
  const rows = await db.query<AccountRow>(
    `INSERT INTO accounts (id, name, realname_verified) VALUES ($1, $2, $3)
     RETURNING ${ACCOUNT_COLUMNS}`,
    [newAccountId(), input.name, input.realnameVerified ?? false],
  );
  return toAccount(rows[0] as AccountRow);
}

export async function getAccount(db: Queryable, id: string): Promise<Account | null> {
  const rows = await db.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE id = $1`, [
    id,
  ]);
  return rows[0] === undefined ? null : toAccount(rows[0]);
}

export async function listAccounts(db: Queryable): Promise<Account[]> {
  const rows = await db.query<AccountRow>(
    `SELECT ${ACCOUNT_COLUMNS} FROM accounts ORDER BY created_at, id`,
  );
  return rows.map(toAccount);
}

/** Updates one cached field (status or real-name flag) and logs the change for key caches. */
async function updateCachedField(
  driver: Driver,
  id: string,
  column: 'status' | 'realname_verified',
  value: string | boolean,
): Promise<Account> {
  return driver.transaction(async (tx) => {
    const rows = await tx.query<AccountRow>(
      `UPDATE accounts SET ${column} = $2, updated_at = now() WHERE id = $1
       RETURNING ${ACCOUNT_COLUMNS}`,
      [id, value],
    );
    const row = rows[0];
    if (row === undefined) throw new StoreError('not_found', `account ${id} not found`);
    await recordChange(tx, 'account', id);
    return toAccount(row);
  });
}

export function setAccountStatus(
  driver: Driver,
  id: string,
  status: AccountStatus,
): Promise<Account> {
  if (status !== 'active' && status !== 'disabled') {
    throw new StoreError('invalid_argument', `account status must be active or disabled`);
  }
  return updateCachedField(driver, id, 'status', status);
}

export function setAccountRealname(
  driver: Driver,
  id: string,
  verified: boolean,
): Promise<Account> {
  return updateCachedField(driver, id, 'realname_verified', verified);
}

export async function adjustBalance(
  driver: Driver,
  accountId: string,
  amountNano: Nano,
  kind: 'topup' | 'adjust',
  reason: string,
): Promise<LedgerEntry> {
  if (kind === 'topup' && amountNano <= 0n) {
    throw new StoreError('invalid_argument', 'a topup must be a positive amount');
  }
  if (kind === 'adjust' && amountNano === 0n) {
    throw new StoreError('invalid_argument', 'an adjustment of 0 changes nothing');
  }
  if (kind !== 'topup' && kind !== 'adjust') {
    throw new StoreError('invalid_argument', `balance change kind must be topup or adjust`);
  }
  const entry = await driver.transaction(async (tx) => {
    // The condition keeps money held for in-flight requests: available may not go below 0.
    const updated = await tx.query<{ balance_nano: bigint }>(
      `UPDATE accounts SET balance_nano = balance_nano + $2::int8, updated_at = now()
       WHERE id = $1 AND balance_nano + $2::int8 - reserved_nano >= 0
       RETURNING balance_nano`,
      [accountId, amountNano],
    );
    const balance = updated[0]?.balance_nano;
    if (balance === undefined) {
      const account = await getAccount(tx, accountId);
      if (account === null) throw new StoreError('not_found', `account ${accountId} not found`);
      // Marked short, as a refused grow marks it (migrations 0009, 0010): another instance keeping
      // idle lease slack on the account gives it back at its next look (decision 0044), and the
      // adjustment can be made again. Only when that could help (the balance covers it, only
      // reservations stood in the way), and once a second at most. Committed, so the refusal is
      // returned, not thrown.
      if (account.balanceNano + amountNano >= 0n) {
        await tx.query(
          `UPDATE accounts SET short_at = clock_timestamp()
           WHERE id = $1 AND (short_at IS NULL OR short_at < clock_timestamp() - interval '1 second')`,
          [accountId],
        );
      }
      return new StoreError(
        'insufficient_balance',
        `adjustment of ${amountNano} nano-yuan would take the available balance ` +
          `(${account.balanceNano - account.reservedNano}) below zero`,
      );
    }
    const rows = await tx.query<LedgerRow>(
      `INSERT INTO ledger (account_id, kind, amount_nano, balance_after_nano, reason)
       VALUES ($1, $2, $3::int8, $4::int8, $5) RETURNING ${LEDGER_COLUMNS}`,
      [accountId, kind, amountNano, balance, reason],
    );
    return toLedgerEntry(rows[0] as LedgerRow);
  });
  if (entry instanceof StoreError) throw entry;
  return entry;
}
