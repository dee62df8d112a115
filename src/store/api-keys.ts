// API keys: created with a fresh plaintext that is returned once and stored only as sha256 hex;
// looked up by that hash joined with the account fields admission needs.

import { recordChange } from './change-log.ts';
import type { Driver, Queryable } from './driver.ts';
import { newKeyId } from './ids.ts';
import { displayPrefix, generateKeyPlaintext, hashKey } from './key-secret.ts';
import type { AccountRow, ApiKeyRow } from './rows.ts';
import { API_KEY_COLUMNS, toApiKey } from './rows.ts';
import type { ApiKey, CreatedKey, KeyLookup } from './store.ts';
import { StoreError } from './store.ts';

export interface CreateKeyInput {
  accountId: string;
  name: string;
  allowedModels: readonly string[] | null;
  expiresAt: Date | null;
}

function checkAllowedModels(list: readonly string[] | null): void {
  if (list === null) return;
  if (!Array.isArray(list) || list.some((m) => typeof m !== 'string' || m.trim() === '')) {
    throw new StoreError('invalid_argument', 'allowedModels must be null or a list of model names');
  }
}

export async function createKey(driver: Driver, input: CreateKeyInput): Promise<CreatedKey> {
  checkAllowedModels(input.allowedModels);
  const plaintext = generateKeyPlaintext();
  return driver.transaction(async (tx) => {
    const account = await tx.query<{ id: string }>('SELECT id FROM accounts WHERE id = $1', [
      input.accountId,
    ]);
    if (account.length === 0) {
      throw new StoreError('not_found', `account ${input.accountId} not found`);
    }
    const rows = await tx.query<ApiKeyRow>(
      `INSERT INTO api_keys (id, account_id, name, key_hash, key_prefix, allowed_models, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::timestamptz) RETURNING ${API_KEY_COLUMNS}`,
      [
        newKeyId(),
        input.accountId,
        input.name,
        hashKey(plaintext),
        displayPrefix(plaintext),
        // Passed as JSON text: pg would otherwise send a JS array as a Postgres array literal.
        input.allowedModels === null ? null : JSON.stringify(input.allowedModels),
        input.expiresAt,
      ],
    );
    const row = rows[0] as ApiKeyRow;
    // Logged so key caches drop negative entries: the new key may have been tried already.
    await recordChange(tx, 'key', row.id);
    return { plaintext, record: toApiKey(row) };
  });
}

type KeyLookupRow = ApiKeyRow & {
  account_status: AccountRow['status'];
  account_realname_verified: boolean;
};

export async function findKeyByHash(db: Queryable, hash: string): Promise<KeyLookup | null> {
  const rows = await db.query<KeyLookupRow>(
    `SELECT k.id, k.account_id, k.name, k.key_prefix, k.allowed_models, k.status, k.expires_at,
            k.created_at, k.updated_at,
            a.status AS account_status, a.realname_verified AS account_realname_verified
       FROM api_keys k JOIN accounts a ON a.id = k.account_id
      WHERE k.key_hash = $1`,
    [hash],
  );
  const row = rows[0];
  if (row === undefined) return null;
  return {
    key: toApiKey(row),
    accountStatus: row.account_status,
    realnameVerified: row.account_realname_verified,
  };
}

export async function listKeys(db: Queryable, accountId: string | null): Promise<ApiKey[]> {
  const rows =
    accountId === null
      ? await db.query<ApiKeyRow>(`SELECT ${API_KEY_COLUMNS} FROM api_keys ORDER BY created_at, id`)
      : await db.query<ApiKeyRow>(
          `SELECT ${API_KEY_COLUMNS} FROM api_keys WHERE account_id = $1 ORDER BY created_at, id`,
          [accountId],
        );
  return rows.map(toApiKey);
}

export async function disableKey(driver: Driver, id: string): Promise<ApiKey> {
  return driver.transaction(async (tx) => {
    const rows = await tx.query<ApiKeyRow>(
      `UPDATE api_keys SET status = 'disabled', updated_at = now() WHERE id = $1
       RETURNING ${API_KEY_COLUMNS}`,
      [id],
    );
    const row = rows[0];
    if (row === undefined) throw new StoreError('not_found', `key ${id} not found`);
    await recordChange(tx, 'key', id);
    return toApiKey(row);
  });
}

export async function deleteKey(driver: Driver, id: string): Promise<boolean> {
  return driver.transaction(async (tx) => {
    const rows = await tx.query<{ id: string }>('DELETE FROM api_keys WHERE id = $1 RETURNING id', [
      id,
    ]);
    if (rows.length === 0) return false;
    await recordChange(tx, 'key', id);
    return true;
  });
}
