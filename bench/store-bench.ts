// Cost of the two store calls every billed request makes (reserve before the upstream call,
// settle after), per backend: PGlite in memory, PGlite in a data_dir, Postgres in a fresh schema,
// each with one statement per call (decision 0003: CLI and tests); then the two stores as the
// serving gateway opens them, with balance leases (decision 0013), PGlite in its worker thread.
// Run alone: `node bench/store-bench.ts [--ops 2000] [--no-pg]`.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { openStore } from '../src/store/open-store.ts';
import type { SqlStore } from '../src/store/sql-store.ts';
import type { SettleOutcome } from '../src/store/store.ts';
import { percentiles, type Percentiles } from './load.ts';

export type StoreBackend =
  'pglite-memory' | 'pglite-data-dir' | 'postgres' | 'pglite-gateway' | 'postgres-gateway';

export interface StoreBenchRow {
  backend: StoreBackend;
  op:
    | 'reserve'
    | 'settle'
    | 'reserve+settle'
    | 'reserve+settle, 32 accounts'
    | 'reserve, settle not awaited'
    | 'same, 32 accounts';
  inFlight: number;
  ops: number;
  /** Per call, ms (sequential rows: the latency a request waits for). */
  latency: Percentiles;
  opsPerSec: number;
}

const OUTCOME: SettleOutcome = {
  model: null,
  channelId: 'up-main',
  inputTokens: 300,
  cacheHitTokens: 0,
  outputTokens: 120,
  reasoningTokens: 0,
  estimated: false,
  priceSnapshot: null,
  peakApplied: false,
  campaignId: null,
  costNano: 1_560_000n,
  status: 'ok',
  httpStatus: 200,
  latencyMs: 3,
  upstreamRequestId: null,
};

async function timed(
  ops: number,
  inFlight: number,
  op: (i: number) => Promise<unknown>,
): Promise<{ samples: number[]; ms: number }> {
  const samples: number[] = [];
  let next = 0;
  const started = performance.now();
  const worker = async (): Promise<void> => {
    while (next < ops) {
      const i = next++;
      const t = performance.now();
      await op(i);
      samples.push(performance.now() - t);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  return { samples, ms: performance.now() - started };
}

/**
 * With leases a settlement resolves when its group commit lands (writes 50-200 ms apart,
 * decision 0026), so a caller that awaited it would time the write-behind gap. The relay does not
 * wait for it: the lease rows time reserve alone, then reserve with the settlement left to the
 * book, and count until every settlement is written. Nothing here awaits settlements one by one:
 * 2,000 of them in a row took 2,000 gaps (400 s at 200 ms).
 */
async function benchLeaseStore(
  backend: StoreBackend,
  store: SqlStore,
  ops: number,
): Promise<StoreBenchRow[]> {
  const { reserveAs, accounts } = await fixtures(store);
  const rows: StoreBenchRow[] = [];
  let seq = 0;
  const warm: Promise<unknown>[] = [];
  await timed(Math.min(200, ops), 1, async () => {
    const id = reserveId('w', seq++);
    await reserveAs(id, accounts[0]!);
    warm.push(store.settle(id, OUTCOME));
  });
  await Promise.all(warm);
  const ids = Array.from({ length: ops }, () => reserveId('b', seq++));
  rows.push(
    rowOf(backend, 'reserve', 1, ops, await timed(ops, 1, (i) => reserveAs(ids[i]!, accounts[0]!))),
  );
  await Promise.all(ids.map((id) => store.settle(id, OUTCOME)));
  for (const [op, spread] of [
    ['reserve, settle not awaited', 1],
    ['same, 32 accounts', 32],
  ] as const) {
    const settled: Promise<unknown>[] = [];
    const started = performance.now();
    const r = await timed(ops, 32, async (i) => {
      const id = reserveId('c', seq++);
      await reserveAs(id, accounts[i % spread]!);
      settled.push(store.settle(id, OUTCOME));
    });
    await Promise.all(settled);
    rows.push(rowOf(backend, op, 32, ops, { samples: r.samples, ms: performance.now() - started }));
  }
  return rows;
}

let fixtureTag = 0;
const runTag = randomBytes(3).toString('hex');
function reserveId(kind: string, n: number): string {
  return `req_${kind}${runTag}${fixtureTag}_${n}`;
}

/** One key, and 32 funded accounts it may bill. */
async function fixtures(store: SqlStore): Promise<{
  reserveAs: (id: string, accountId: string) => Promise<unknown>;
  accounts: string[];
}> {
  fixtureTag++;
  const accounts: string[] = [];
  for (let i = 0; i < 32; i++) {
    const a = await store.createAccount({ name: `bench-${i}` });
    await store.adjustBalance(a.id, 10n ** 17n, 'topup', 'bench');
    accounts.push(a.id);
  }
  const key = await store.createKey({
    accountId: accounts[0]!,
    name: 'bench',
    allowedModels: null,
    expiresAt: null,
  });
  const reserveAs = (id: string, accountId: string): Promise<unknown> =>
    store.reserve({
      requestId: id,
      clientRequestId: null,
      accountId,
      keyId: key.record.id,
      model: 'bench-chat',
      endpoint: 'chat',
      amountNano: 5_000_000n,
    });
  return { reserveAs, accounts };
}

function rowOf(
  backend: StoreBackend,
  op: StoreBenchRow['op'],
  inFlight: number,
  ops: number,
  r: { samples: number[]; ms: number },
): StoreBenchRow {
  return {
    backend,
    op,
    inFlight,
    ops,
    latency: percentiles(r.samples),
    opsPerSec: Math.round(ops / (r.ms / 1000)),
  };
}

async function benchStore(
  backend: StoreBackend,
  store: SqlStore,
  ops: number,
): Promise<StoreBenchRow[]> {
  const { reserveAs, accounts } = await fixtures(store);
  const one = accounts[0]!;
  let seq = 0;
  const both = async (accountId: string): Promise<void> => {
    const id = reserveId('c', seq++);
    await reserveAs(id, accountId);
    await store.settle(id, OUTCOME);
  };
  // Warm-up: statement preparation, JIT, the first pages of each table.
  await timed(Math.min(200, ops), 1, () => both(one));
  const ids = Array.from({ length: ops }, () => reserveId('b', seq++));
  return [
    rowOf(backend, 'reserve', 1, ops, await timed(ops, 1, (i) => reserveAs(ids[i]!, one))),
    rowOf(backend, 'settle', 1, ops, await timed(ops, 1, (i) => store.settle(ids[i]!, OUTCOME))),
    rowOf(backend, 'reserve+settle', 32, ops, await timed(ops, 32, () => both(one))),
    // The same load spread over 32 accounts: one account's balance row is a lock every reserve
    // and settle of that account waits on, so this row shows what the single-account row is
    // bound by.
    rowOf(
      backend,
      'reserve+settle, 32 accounts',
      32,
      ops,
      await timed(ops, 32, (i) => both(accounts[i % accounts.length]!)),
    ),
  ];
}

/** Runs the store benchmark and prints a table; the Postgres rows only with a URL. */
export async function runStoreBench(opts: {
  pgUrl: string | null;
  ops: number;
}): Promise<StoreBenchRow[]> {
  const rows: StoreBenchRow[] = [];
  const mem = await openStore({ url: null, dataDir: null, heartbeatMs: 0 });
  try {
    rows.push(...(await benchStore('pglite-memory', mem, opts.ops)));
  } finally {
    await mem.close();
  }
  const dir = await mkdtemp(join(tmpdir(), 'switchyard-bench-store-'));
  const disk = await openStore({ url: null, dataDir: dir, heartbeatMs: 0 });
  try {
    rows.push(...(await benchStore('pglite-data-dir', disk, opts.ops)));
  } finally {
    await disk.close();
    await rm(dir, { recursive: true, force: true });
  }
  // As the serving gateway opens its embedded store: leases, PGlite in its worker thread.
  const gwDir = await mkdtemp(join(tmpdir(), 'switchyard-bench-store-'));
  const gw = await openStore({
    url: null,
    dataDir: gwDir,
    heartbeatMs: 0,
    leases: true,
    workerThread: true,
  });
  try {
    rows.push(...(await benchLeaseStore('pglite-gateway', gw, opts.ops)));
  } finally {
    await gw.close();
    await rm(gwDir, { recursive: true, force: true });
  }
  if (opts.pgUrl !== null) {
    const schema = `sy_bench_${randomBytes(4).toString('hex')}`;
    const admin = async (sql: string): Promise<void> => {
      const c = new pg.Client({ connectionString: opts.pgUrl ?? '' });
      await c.connect();
      try {
        await c.query(sql);
      } finally {
        await c.end();
      }
    };
    await admin(`CREATE SCHEMA ${schema}`);
    const url = `${opts.pgUrl}?options=${encodeURIComponent(`-c search_path=${schema}`)}`;
    const store = await openStore({ url, dataDir: null, heartbeatMs: 0 });
    const leased = await openStore({ url, dataDir: null, heartbeatMs: 0, leases: true });
    try {
      rows.push(...(await benchStore('postgres', store, opts.ops)));
      rows.push(...(await benchLeaseStore('postgres-gateway', leased, opts.ops)));
    } finally {
      await store.close();
      await leased.close();
      await admin(`DROP SCHEMA ${schema} CASCADE`);
    }
  }
  console.log(`store cost per call (${opts.ops} ops each; latency in ms)`);
  console.log(
    'backend          operation                    in flight    p50 ms    p99 ms     ops/s',
  );
  for (const r of rows) {
    console.log(
      `${r.backend.padEnd(16)} ${r.op.padEnd(28)} ${String(r.inFlight).padStart(9)} ` +
        `${r.latency.p50.toFixed(3).padStart(9)} ${r.latency.p99.toFixed(3).padStart(9)} ${String(r.opsPerSec).padStart(9)}`,
    );
  }
  return rows;
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const i = args.indexOf('--ops');
  await runStoreBench({
    pgUrl: args.includes('--no-pg')
      ? null
      : (process.env.SWITCHYARD_BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'),
    ops: i >= 0 ? Number(args[i + 1]) : 2000,
  });
}
