// Balance reservations (docs/decisions/0003-reservations.md): reserve at admission in one
// statement, settle or release exactly once, and recover the reservations of dead instances.
// Each request id ends with exactly one outcome: settled, released, or recovered.

import { INT8_MAX } from '../billing/money.ts';
import type { Driver, Queryable } from './driver.ts';
import type { ReserveInput, ReserveResult, SettleOutcome, SettleResult } from './store.ts';
import { storableText } from './storable-text.ts';
import { StoreError, wholeSnapshot } from './store.ts';

/** Recovery resolves at most this many reservations per transaction. */
const RECOVERY_BATCH = 500;

// One statement, so one round trip and no check-then-decrement race: the UPDATE re-checks its
// WHERE on the newest row version after waiting for a concurrent writer (READ COMMITTED), and the
// reservation row is inserted only when that UPDATE matched. `target` reads the pre-statement
// status to tell "disabled" from "insufficient" when nothing was reserved.
const RESERVE_SQL = `
WITH target AS (
  SELECT status FROM accounts WHERE id = $1
), taken AS (
  UPDATE accounts SET reserved_nano = reserved_nano + $2::int8
   WHERE id = $1 AND status = 'active' AND balance_nano - reserved_nano >= $2::int8
  RETURNING id
), placed AS (
  INSERT INTO reservations (request_id, account_id, key_id, model, endpoint, amount_nano, instance_id,
    client_request_id)
  SELECT $3, id, $4, $5, $6, $2::int8, $7, $8 FROM taken
  RETURNING request_id
)
SELECT (SELECT status FROM target) AS status, (SELECT count(*) FROM placed)::int4 AS placed`;

export async function reserve(
  db: Queryable,
  instanceId: string,
  input: ReserveInput,
): Promise<ReserveResult> {
  if (input.amountNano < 0n) {
    throw new StoreError('invalid_argument', 'a reservation cannot be negative');
  }
  // More than any balance (int8) can hold: refused, not sent to overflow in the database.
  if (input.amountNano > INT8_MAX) return 'insufficient';
  const rows = await db.query<{ status: string | null; placed: number }>(RESERVE_SQL, [
    input.accountId,
    input.amountNano,
    input.requestId,
    input.keyId,
    input.model,
    input.endpoint,
    instanceId,
    input.clientRequestId,
  ]);
  const row = rows[0];
  if (row === undefined || row.status === null) {
    throw new StoreError('not_found', `account ${input.accountId} not found`);
  }
  if (row.placed === 1) return 'ok';
  return row.status === 'active' ? 'insufficient' : 'account_disabled';
}

// One statement (so one round trip and one implicit transaction): take the reservation row —
// whoever deletes it owns the outcome — then charge min(cost, reserved), release the whole
// reservation, append a ledger row when something was charged, and write the usage row.
// The ledger row reads `a`, so it is inserted after the account row is locked (ledger order per
// account = balance order).
const SETTLE_SQL = `
WITH r AS (
  DELETE FROM reservations WHERE request_id = $1
  RETURNING request_id, account_id, key_id, model, endpoint, amount_nano, client_request_id
), c AS (
  SELECT r.*, LEAST($2::int8, r.amount_nano) AS cost, $2::int8 > r.amount_nano AS capped FROM r
), a AS (
  UPDATE accounts SET balance_nano = accounts.balance_nano - c.cost,
                      reserved_nano = accounts.reserved_nano - c.amount_nano
    FROM c WHERE accounts.id = c.account_id
  RETURNING accounts.balance_nano AS balance_after, c.*
), l AS (
  INSERT INTO ledger (account_id, kind, amount_nano, balance_after_nano, request_id)
  SELECT account_id, 'usage', -cost, balance_after, request_id FROM a WHERE cost > 0
), u AS (
  INSERT INTO usage_log (request_id, account_id, key_id, model, channel_id, endpoint,
    input_tokens, cache_hit_tokens, output_tokens, reasoning_tokens, estimated, price_snapshot,
    peak_applied, campaign_id, cost_nano, reserved_nano, capped, status, http_status, latency_ms,
    upstream_request_id, client_request_id)
  SELECT request_id, account_id, key_id, coalesce($3, model), $4, endpoint,
    $5::int8, $6::int8, $7::int8, $8::int8, $9::boolean, $10::jsonb,
    $11::boolean, $12, cost, amount_nano, capped, $13, $14::int4, $15::int4, $16, client_request_id
  FROM a
  ON CONFLICT (request_id) DO NOTHING
)
SELECT cost, capped, balance_after FROM a`;

function checkCount(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new StoreError('invalid_argument', `${name} must be a non-negative integer`);
  }
}

export async function settle(
  db: Queryable,
  requestId: string,
  outcome: SettleOutcome,
): Promise<SettleResult> {
  checkCount('inputTokens', outcome.inputTokens);
  checkCount('cacheHitTokens', outcome.cacheHitTokens);
  checkCount('outputTokens', outcome.outputTokens);
  checkCount('reasoningTokens', outcome.reasoningTokens);
  if (outcome.costNano < 0n) throw new StoreError('invalid_argument', 'a cost cannot be negative');
  // A failed request reached no usable answer: it is never charged.
  const cost = outcome.status === 'failed' ? 0n : outcome.costNano;
  const rows = await db.query<{ cost: bigint; capped: boolean; balance_after: bigint }>(
    SETTLE_SQL,
    [
      requestId,
      cost,
      outcome.model,
      outcome.channelId,
      outcome.inputTokens,
      outcome.cacheHitTokens,
      outcome.outputTokens,
      outcome.reasoningTokens,
      outcome.estimated,
      outcome.priceSnapshot === null ? null : JSON.stringify(wholeSnapshot(outcome.priceSnapshot)),
      outcome.peakApplied,
      outcome.campaignId,
      outcome.status,
      outcome.httpStatus,
      outcome.latencyMs,
      storableText(outcome.upstreamRequestId),
    ],
  );
  const row = rows[0];
  if (row === undefined) return { result: 'duplicate' };
  return {
    result: 'settled',
    costNano: row.cost,
    capped: row.capped,
    balanceAfterNano: row.balance_after,
  };
}

const RELEASE_SQL = `
WITH r AS (
  DELETE FROM reservations WHERE request_id = $1 RETURNING account_id, amount_nano
)
UPDATE accounts SET reserved_nano = accounts.reserved_nano - r.amount_nano
  FROM r WHERE accounts.id = r.account_id
RETURNING accounts.id`;

export async function release(db: Queryable, requestId: string): Promise<'released' | 'duplicate'> {
  const rows = await db.query<{ id: string }>(RELEASE_SQL, [requestId]);
  return rows.length === 0 ? 'duplicate' : 'released';
}

/** Database time on both sides, so clock skew between instances cannot fake a death. */
export async function heartbeat(db: Queryable, instanceId: string): Promise<void> {
  await db.query(
    `INSERT INTO instances (id) VALUES ($1)
     ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()`,
    [instanceId],
  );
}

/** A clean shutdown: leftover reservations (there should be none) become recoverable at once. */
export async function unregisterInstance(db: Queryable, instanceId: string): Promise<void> {
  await db.query('DELETE FROM instances WHERE id = $1', [instanceId]);
}

// Reservations whose instance is silent for staleMs or gone; never this instance's own.
// SKIP LOCKED: a reservation being settled right now, or taken by another recoverer, is left to
// its owner, so two instances recovering at once split the work instead of waiting or doubling.
const DOOMED_SQL = `
SELECT r.request_id, r.account_id FROM reservations r
  LEFT JOIN instances i ON i.id = r.instance_id
 WHERE r.instance_id <> $1
   AND (i.id IS NULL OR i.heartbeat_at < now() - $2::int8 * interval '1 millisecond')
 LIMIT ${RECOVERY_BATCH}
   FOR UPDATE OF r SKIP LOCKED`;

const RESOLVE_SQL = `
WITH r AS (
  DELETE FROM reservations
   WHERE request_id IN (SELECT jsonb_array_elements_text($1::jsonb))
  RETURNING request_id, account_id, key_id, model, endpoint, amount_nano, leased, client_request_id
), s AS (
  -- A leased reservation's amount is inside its lease, which is returned on its own.
  SELECT account_id, sum(amount_nano)::int8 AS total FROM r
   WHERE NOT leased GROUP BY account_id
), a AS (
  UPDATE accounts SET reserved_nano = accounts.reserved_nano - s.total
    FROM s WHERE accounts.id = s.account_id
  RETURNING accounts.id
), u AS (
  INSERT INTO usage_log (request_id, account_id, key_id, model, endpoint, cost_nano,
    reserved_nano, status, client_request_id)
  SELECT request_id, account_id, key_id, model, endpoint, 0, amount_nano, 'recovered',
    client_request_id FROM r
  ON CONFLICT (request_id) DO NOTHING
)
SELECT count(*)::int4 AS n FROM r`;

/** In id order: two recoverers (or a recoverer and a lease write) cannot deadlock. */
async function lockAccounts(tx: Queryable, rows: { account_id: string }[]): Promise<void> {
  await tx.query(
    `SELECT id FROM accounts WHERE id IN (SELECT jsonb_array_elements_text($1::jsonb))
      ORDER BY id FOR UPDATE`,
    [JSON.stringify([...new Set(rows.map((r) => r.account_id))])],
  );
}

async function recoverBatch(driver: Driver, instanceId: string, staleMs: number): Promise<number> {
  return driver.transaction(async (tx) => {
    const doomed = await tx.query<{ request_id: string; account_id: string }>(DOOMED_SQL, [
      instanceId,
      BigInt(staleMs),
    ]);
    if (doomed.length === 0) return 0;
    await lockAccounts(tx, doomed);
    const ids = JSON.stringify(doomed.map((d) => d.request_id));
    const rows = await tx.query<{ n: number }>(RESOLVE_SQL, [ids]);
    return rows[0]?.n ?? 0;
  });
}

// Leases of instances silent for staleMs or gone go back to their accounts whole: what they held
// for open requests is resolved above as 'recovered' rows, and unwritten charges are lost (the
// bounded loss of docs/decisions/0013).
const DEAD_LEASES_SQL = `
SELECT l.holder_id, l.account_id FROM leases l
  LEFT JOIN instances i ON i.id = l.instance_id
 WHERE l.instance_id <> $1
   AND (i.id IS NULL OR i.heartbeat_at < now() - $2::int8 * interval '1 millisecond')
 LIMIT ${RECOVERY_BATCH}
   FOR UPDATE OF l SKIP LOCKED`;

const RETURN_LEASES_SQL = `
WITH d AS (
  DELETE FROM leases
   WHERE (holder_id, account_id) IN (
     SELECT x->>0, x->>1 FROM jsonb_array_elements($1::jsonb) AS x)
  RETURNING account_id, amount_nano
), s AS (
  SELECT account_id, sum(amount_nano)::int8 AS total FROM d GROUP BY account_id
)
UPDATE accounts SET reserved_nano = accounts.reserved_nano - s.total
  FROM s WHERE accounts.id = s.account_id`;

async function recoverLeaseBatch(
  driver: Driver,
  instanceId: string,
  staleMs: number,
): Promise<number> {
  return driver.transaction(async (tx) => {
    const dead = await tx.query<{ holder_id: string; account_id: string }>(DEAD_LEASES_SQL, [
      instanceId,
      BigInt(staleMs),
    ]);
    if (dead.length === 0) return 0;
    await lockAccounts(tx, dead);
    await tx.query(RETURN_LEASES_SQL, [
      JSON.stringify(dead.map((d) => [d.holder_id, d.account_id])),
    ]);
    return dead.length;
  });
}

export async function recoverDeadInstances(
  driver: Driver,
  instanceId: string,
  staleMs: number,
): Promise<number> {
  if (!Number.isSafeInteger(staleMs) || staleMs < 0) {
    throw new StoreError('invalid_argument', 'staleMs must be a non-negative integer');
  }
  let total = 0;
  for (;;) {
    const n = await recoverBatch(driver, instanceId, staleMs);
    total += n;
    if (n < RECOVERY_BATCH) break;
  }
  // After the reservations, so a lease is never returned while its open requests still wait.
  while ((await recoverLeaseBatch(driver, instanceId, staleMs)) === RECOVERY_BATCH);
  // Dead instances with nothing left to recover are forgotten; a live one that was only paused
  // re-registers with its next heartbeat.
  await driver.query(
    `DELETE FROM instances i
      WHERE i.id <> $1 AND i.heartbeat_at < now() - $2::int8 * interval '1 millisecond'
        AND NOT EXISTS (SELECT 1 FROM reservations r WHERE r.instance_id = i.id)
        AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.instance_id = i.id)`,
    [instanceId, BigInt(staleMs)],
  );
  return total;
}
