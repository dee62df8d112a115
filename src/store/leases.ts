// The SQL of balance leases (docs/decisions/0013-balance-leases.md): growing a lease in one
// statement, and writing one batch of the lease book (settlements, releases, open requests,
// returned leases) in one transaction. The book (lease-book.ts) decides what goes in a batch.

import type { Nano } from '../billing/money.ts';
import { copyBool, copyInt, copyText } from './copy-text.ts';
import type { Driver, Queryable } from './driver.ts';
import type { PriceSnapshotCatalog, SnapshotRef } from './price-snapshots.ts';
import type { PriceSnapshot, ReserveInput, SettleOutcome } from './store.ts';

export type GrowResult =
  { result: 'ok'; leaseNano: Nano } | { result: 'insufficient' | 'account_disabled' | 'not_found' };

// One statement (switchyard_grow_lease, migrations 0003, 0009 and 0010): lock the account, take
// min(desired, available) when at least `need` is available, and add it to this holder's lease;
// when less is available but the balance covers `need`, mark the account short (`short_at`, at
// most once a second). The lease's new amount comes back so the book resyncs to it.
const GROW_SQL = `SELECT r_status AS status, r_lease AS lease
  FROM switchyard_grow_lease($1, $2::int8, $3::int8, $4, $5)`;

export async function growLease(
  db: Queryable,
  holderId: string,
  instanceId: string,
  accountId: string,
  needNano: Nano,
  desiredNano: Nano,
): Promise<GrowResult> {
  const rows = await db.query<{ status: string | null; lease: bigint | null }>(GROW_SQL, [
    accountId,
    needNano,
    desiredNano < needNano ? needNano : desiredNano,
    holderId,
    instanceId,
  ]);
  const row = rows[0];
  if (row === undefined || row.status === null) return { result: 'not_found' };
  if (row.lease !== null) return { result: 'ok', leaseNano: row.lease };
  return { result: row.status === 'active' ? 'insufficient' : 'account_disabled' };
}

// What a holder keeping idle slack asks (decision 0044), for all its idle accounts in one
// statement: each one's balance not held by anyone (open requests and every holder's lease are
// in reserved_nano), whether a grow or a negative adjustment was refused for want of money in the
// last $2 ms, and what the database still holds for this holder ($3): a peer that presumed it
// dead (a process paused past the heartbeat's bound) took its lease back. An account that is gone
// or no longer active (disabled through another instance) is left out: its slack goes back.
const ROOM_SQL = `SELECT a.id, a.balance_nano - a.reserved_nano AS avail,
    COALESCE(a.short_at > now() - $2::int8 * interval '1 millisecond', false) AS short,
    COALESCE(l.amount_nano, 0) AS held
  FROM accounts a LEFT JOIN leases l ON l.account_id = a.id AND l.holder_id = $3
  WHERE a.id = ANY($1::text[]) AND a.status = 'active'`;

export interface Room {
  /** Balance nobody holds: what other holders could still grow by. */
  availNano: Nano;
  /** A grow or a negative adjustment was refused for want of money within the window asked about. */
  short: boolean;
  /** What the database holds for this holder on the account (0: no lease row). */
  heldNano: Nano;
}

/** Account id → its room; an account that is gone or not active is absent. */
export async function readRoom(
  db: Queryable,
  holderId: string,
  accountIds: readonly string[],
  shortWithinMs: number,
): Promise<Map<string, Room>> {
  const rows = await db.query<{ id: string; avail: bigint; short: boolean; held: bigint }>(
    ROOM_SQL,
    [accountIds, Math.ceil(shortWithinMs), holderId],
  );
  const room = new Map<string, Room>();
  for (const r of rows) {
    room.set(r.id, { availNano: r.avail, short: r.short, heldNano: r.held });
  }
  return room;
}

/** A request admitted from a lease, as written down while it is open: what reserve was given. */
export type OpenRecord = ReserveInput;

/**
 * A settled request of the batch, as the relay reported it; costNano is already
 * min(metered, reserved), 0 when failed.
 */
export interface SettleRecord extends OpenRecord, Omit<SettleOutcome, 'model'> {
  /** Its open record was written in an earlier batch: gone now means a peer recovered it. */
  persisted: boolean;
  /** Its open record may exist (written, or in a write when it settled): take it back. */
  mayHaveRecord: boolean;
  /** The model billed: the relay's, or the one given at admission. */
  billedModel: string;
  capped: boolean;
}

export interface Batch {
  settles: SettleRecord[];
  /** Request ids of released requests whose open record was written earlier. */
  releases: string[];
  /** Open requests to write down (so recovery can resolve them if this process dies). */
  opens: OpenRecord[];
  /** Parts of leases given back to their accounts (the book holds nothing on them). */
  shrinks: { accountId: string; amountNano: Nano }[];
}

export interface BatchResult {
  /** Settled request id → balance after its charge. Absent: not charged (see `lost`). */
  balanceAfter: Map<string, Nano>;
  /**
   * Accounts whose lease was gone or short: a peer presumed this instance dead and recovered it.
   * Their settlements in the batch are not charged (they end as 'duplicate'), and the amount the
   * database still holds for this holder is given (0 when the row is gone).
   */
  lost: Map<string, Nano>;
  /** Settled request ids whose open record a peer had already recovered: not charged. */
  recovered: Set<string>;
  /** Account → amount given back to it (absent: the lease was not there to shrink). */
  returned: Map<string, Nano>;
}

// Batches go to the database as JSON arrays of positional rows (a third less to build, send and
// parse than objects); nano amounts (bigint) are sent as decimal strings, which ->> and ::int8
// read exactly. Converted field by field: a JSON.stringify replacer for bigints cost 2.4% of
// the gateway's main thread under load.

// One call writes a batch (switchyard_write_batch, migrations 0003-0005): stores the price
// snapshots new to this writer, takes back open records, settles (locks this holder's leases,
// drops the accounts whose lease is gone or short, writes the usage rows, charges the sum of the
// rows written, appends one ledger row per account) and writes down the requests still open. A
// function, so its plans are made once per session: planned on every call, the settlement alone
// cost PGlite ~2-3 ms of this thread per write.
const WRITE_SQL = `SELECT r_kind AS kind, r_id AS id, r_amount AS amount
  FROM switchyard_write_batch($1, $2, $3::jsonb, $4::jsonb, $5::jsonb, $6::jsonb)`;

// Gives back the part of a lease that holds nothing; a lease down to 0 is dropped.
const SHRINK_SQL = `
WITH x AS (
  SELECT * FROM jsonb_to_recordset($2::jsonb) AS x(account_id text, amount int8)
), l AS (
  UPDATE leases SET amount_nano = leases.amount_nano - x.amount, updated_at = now()
    FROM x WHERE leases.holder_id = $1 AND leases.account_id = x.account_id
     AND leases.amount_nano >= x.amount
  RETURNING leases.account_id, x.amount
)
UPDATE accounts SET reserved_nano = accounts.reserved_nano - l.amount
  FROM l WHERE accounts.id = l.account_id
RETURNING accounts.id, l.amount`;

// The COPY write of settlements (migrations 0008 and 0011; decisions 0038 and 0045, both stores),
// inside the batch's transaction: lock the open records it takes back and the batch's accounts,
// in the order every other writer locks them, and take the write's time under the locks; COPY the
// usage rows with that time; then the function that drops the rows that may not stay and charges
// the rest, its ledger rows with the same time. A time taken after the locks, as
// switchyard_write_batch takes it, keeps ledger time in balance order per account where several
// sessions charge one account (0011).
const COPY_LOCK_SQL = 'SELECT switchyard_lock_for_copy($1::text[], $2::text[]) AS at';
const COPY_INTO = `usage_log (request_id, account_id, key_id, model, channel_id, endpoint,
  input_tokens, cache_hit_tokens, output_tokens, reasoning_tokens, estimated, price_snapshot_id,
  priced_at_ms, peak_applied, campaign_id, cost_nano, reserved_nano, capped, status, http_status,
  latency_ms, upstream_request_id, client_request_id, created_at)`;
const COPY_SETTLE_SQL = `SELECT r_kind AS kind, r_id AS id, r_amount AS amount
  FROM switchyard_copy_settle($1, $2, $3::jsonb, $4::jsonb, $5::text[], $6::text[], $7::jsonb,
    $8::text[], $9::int8[], $10::int8[], $11::text[], $12::timestamptz)`;

async function copySettles(
  tx: Queryable,
  copyFrom: (into: string, data: string) => Promise<void>,
  holderId: string,
  instanceId: string,
  taken: string[],
  batch: Batch,
  snapshots: PriceSnapshotCatalog,
  pending: Map<string, PriceSnapshot>,
): Promise<WriteRow[]> {
  const ids: string[] = [];
  const persisted: string[] = [];
  // Per account, from the same records the rows are made of: the sum, the count of charged rows
  // and the one charged row's id (the ledger row names it when it is alone).
  const sums = new Map<string, { total: Nano; n: number; only: string | null }>();
  for (const s of batch.settles) {
    ids.push(s.requestId);
    if (s.persisted) persisted.push(s.requestId);
    let sum = sums.get(s.accountId);
    if (sum === undefined) sums.set(s.accountId, (sum = { total: 0n, n: 0, only: null }));
    if (s.costNano > 0n) {
      sum.total += s.costNano;
      sum.n++;
      sum.only = s.requestId;
    }
  }
  // The rows are made before the locks are taken, so the accounts stay locked no longer than the
  // statements take; each ends with the write's time, known only once they are held.
  const rows = batch.settles.map((s) => copyRow(s, snapshots.ref(s.priceSnapshot, pending)));
  const accounts = [...sums.keys()];
  const locked = await tx.query<{ at: string }>(COPY_LOCK_SQL, [accounts, taken]);
  const at = locked[0]!.at;
  const end = `\t${copyText(at)}\n`;
  await copyFrom(COPY_INTO, rows.join(end) + end);
  const totals: string[] = [];
  const counts: number[] = [];
  const only: (string | null)[] = [];
  for (const sum of sums.values()) {
    totals.push(sum.total.toString());
    counts.push(sum.n);
    only.push(sum.n === 1 ? sum.only : null);
  }
  return tx.query<WriteRow>(COPY_SETTLE_SQL, [
    holderId,
    instanceId,
    JSON.stringify([...pending]),
    JSON.stringify(taken),
    ids,
    persisted,
    JSON.stringify(batch.opens.map(openRow)),
    accounts,
    totals,
    counts,
    only,
    at,
  ]);
}

/**
 * A settlement as a line of the COPY's input, in its column order, without its last field (the
 * write's time, the same in every row) and the line's end.
 */
function copyRow(s: SettleRecord, ref: SnapshotRef): string {
  return `${copyText(s.requestId)}\t${copyText(s.accountId)}\t${copyText(s.keyId)}\t${copyText(
    s.billedModel,
  )}\t${copyText(s.channelId)}\t${copyText(s.endpoint)}\t${s.inputTokens}\t${
    s.cacheHitTokens
  }\t${s.outputTokens}\t${s.reasoningTokens}\t${copyBool(s.estimated)}\t${copyText(
    ref.id,
  )}\t${copyInt(ref.pricedAtMs)}\t${copyBool(s.peakApplied)}\t${copyText(s.campaignId)}\t${
    s.costNano
  }\t${s.amountNano}\t${copyBool(s.capped)}\t${copyText(s.status)}\t${copyInt(
    s.httpStatus,
  )}\t${copyInt(s.latencyMs)}\t${copyText(s.upstreamRequestId)}\t${copyText(s.clientRequestId)}`;
}

/**
 * A settlement as the positional row switchyard_write_batch reads (migrations 0004 and 0005):
 * position 11 is the price snapshot's id, 22 its entry time, 23 the caller's request id (0007).
 */
function settleRow(s: SettleRecord, ref: SnapshotRef): unknown[] {
  return [
    s.requestId,
    s.accountId,
    s.keyId,
    s.billedModel,
    s.channelId,
    s.endpoint,
    s.inputTokens,
    s.cacheHitTokens,
    s.outputTokens,
    s.reasoningTokens,
    s.estimated,
    ref.id,
    s.peakApplied,
    s.campaignId,
    s.costNano.toString(),
    s.amountNano.toString(),
    s.capped,
    s.status,
    s.httpStatus,
    s.latencyMs,
    s.upstreamRequestId,
    s.persisted,
    ref.pricedAtMs,
    s.clientRequestId,
  ];
}

/** An open request as the positional row switchyard_write_batch reads (migrations 0004, 0007). */
function openRow(o: OpenRecord): unknown[] {
  return [
    o.requestId,
    o.accountId,
    o.keyId,
    o.model,
    o.endpoint,
    o.amountNano.toString(),
    o.clientRequestId,
  ];
}

/**
 * The fewest settlements a write puts in by COPY. A COPY write is two more statements than the
 * batch function, ~1 ms more of PGlite a write, and saves ~8 µs a row: in one PGlite, both paths
 * in turns (scratch `copybench.ts`), 10-row batches cost 3.9 against 3.4 ms, 50-row batches the
 * same, 150-row batches 4.6 against 6.4 ms. The bench's full load writes ~300-400 a batch; a few
 * streams a second write a handful. Postgres takes the same threshold: below it a write stays one
 * statement, not four (decision 0045).
 */
export const COPY_MIN_ROWS = 64;

/**
 * Writes one batch: one call, or a transaction when lease slack goes back too. Σ usage cost =
 * balance change holds by construction: the charge per account is summed from the usage rows
 * actually written. A batch of at least copyMinRows settlements goes in by COPY (decisions 0038
 * and 0045); a request id already in the log sends the batch through the batch function.
 */
export async function writeBatch(
  driver: Driver,
  holderId: string,
  instanceId: string,
  batch: Batch,
  snapshots: PriceSnapshotCatalog,
  copyMinRows = COPY_MIN_ROWS,
): Promise<BatchResult> {
  const attempt = async (copy: boolean): Promise<BatchResult> => {
    const pending = new Map<string, PriceSnapshot>();
    const result = await (copy || batch.shrinks.length > 0
      ? driver.transaction((tx) =>
          writeSteps(
            tx,
            copy ? tx.copyFrom : null,
            holderId,
            instanceId,
            batch,
            snapshots,
            pending,
          ),
        )
      : writeSteps(driver, null, holderId, instanceId, batch, snapshots, pending));
    snapshots.markStored(pending.keys());
    return result;
  };
  if (driver.copyFrom !== null && batch.settles.length >= Math.max(1, copyMinRows)) {
    try {
      return await attempt(true);
    } catch (err) {
      // COPY has no ON CONFLICT: a request id already written (or twice in the batch) fails it,
      // and the batch function reads such a row as written.
      if (!isUniqueViolation(err)) throw err;
    }
  }
  return attempt(false);
}

/** SQLSTATE 23505, as pg and both PGlite drivers report it. */
function isUniqueViolation(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === '23505';
}

/** What switchyard_write_batch and switchyard_copy_settle return, row by row. */
interface WriteRow {
  kind: 'unsettled' | 'balance' | 'lost';
  id: string;
  amount: bigint;
}

/** copyFrom: settlements go in by COPY (null: through switchyard_write_batch). */
async function writeSteps(
  tx: Queryable,
  copyFrom: Queryable['copyFrom'],
  holderId: string,
  instanceId: string,
  batch: Batch,
  snapshots: PriceSnapshotCatalog,
  pending: Map<string, PriceSnapshot>,
): Promise<BatchResult> {
  const out: BatchResult = {
    balanceAfter: new Map(),
    lost: new Map(),
    recovered: new Set(),
    returned: new Map(),
  };
  const taken = [...batch.releases];
  for (const s of batch.settles) if (s.mayHaveRecord) taken.push(s.requestId);

  if (taken.length > 0 || batch.settles.length > 0 || batch.opens.length > 0) {
    const rows =
      copyFrom !== null && batch.settles.length > 0
        ? await copySettles(tx, copyFrom, holderId, instanceId, taken, batch, snapshots, pending)
        : await tx.query<WriteRow>(WRITE_SQL, [
            holderId,
            instanceId,
            JSON.stringify(taken),
            JSON.stringify(
              batch.settles.map((s) => settleRow(s, snapshots.ref(s.priceSnapshot, pending))),
            ),
            JSON.stringify(batch.opens.map(openRow)),
            JSON.stringify([...pending]),
          ]);
    // The settlements the call did not write (a peer recovered them, or a duplicate id).
    const unsettled = new Set<string>();
    const balance = new Map<string, Nano>();
    for (const r of rows) {
      if (r.kind === 'unsettled') unsettled.add(r.id);
      else if (r.kind === 'balance') balance.set(r.id, r.amount);
      else out.lost.set(r.id, r.amount);
    }
    // Each request's balance after its charge, in the batch's order: the account's balance after
    // the write plus what the later requests of the batch took.
    for (let i = batch.settles.length - 1; i >= 0; i--) {
      const s = batch.settles[i]!;
      const after = balance.get(s.accountId);
      if (after === undefined || unsettled.has(s.requestId)) continue;
      out.balanceAfter.set(s.requestId, after);
      balance.set(s.accountId, after + s.costNano);
    }
    // Neither settled nor lost: a peer had recovered its open record, or its request id already
    // had a usage row. Not charged.
    for (const s of batch.settles) {
      if (!out.balanceAfter.has(s.requestId) && !out.lost.has(s.accountId)) {
        out.recovered.add(s.requestId);
      }
    }
  }

  // A request a peer recovered means this holder was presumed dead: its lease went back too.
  const suspect = new Set<string>();
  for (const s of batch.settles) {
    if (out.recovered.has(s.requestId) && !out.lost.has(s.accountId)) suspect.add(s.accountId);
  }
  if (suspect.size > 0) {
    const held = await tx.query<{ account_id: string }>(
      `SELECT account_id FROM leases
        WHERE holder_id = $1 AND account_id IN (SELECT jsonb_array_elements_text($2::jsonb))`,
      [holderId, JSON.stringify([...suspect])],
    );
    const has = new Set(held.map((r) => r.account_id));
    for (const account of suspect) if (!has.has(account)) out.lost.set(account, 0n);
  }

  // Lease slack going back.
  if (batch.shrinks.length > 0) {
    const rows = await tx.query<{ id: string; amount: bigint }>(SHRINK_SQL, [
      holderId,
      JSON.stringify(
        batch.shrinks.map((x) => ({ account_id: x.accountId, amount: x.amountNano.toString() })),
      ),
    ]);
    for (const r of rows) out.returned.set(r.id, r.amount);
    await tx.query('DELETE FROM leases WHERE holder_id = $1 AND amount_nano = 0', [holderId]);
  }
  return out;
}
