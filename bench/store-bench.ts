// Cost of the two store calls every billed request makes (reserve before the upstream call,
// settle after), per backend: PGlite in memory, PGlite in a data_dir, Postgres in a fresh schema.
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

export type StoreBackend = 'pglite-memory' | 'pglite-data-dir' | 'postgres';

export interface StoreBenchRow {
  backend: StoreBackend;
  op: 'reserve' | 'settle' | 'reserve+settle' | 'reserve+settle, 32 accounts';
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

async function benchStore(
  backend: StoreBackend,
  store: SqlStore,
  ops: number,
): Promise<StoreBenchRow[]> {
  const account = await store.createAccount({ name: 'bench' });
  await store.adjustBalance(account.id, 10n ** 17n, 'topup', 'bench');
  const key = await store.createKey({
    accountId: account.id,
    name: 'bench',
    allowedModels: null,
    expiresAt: null,
  });
  const tag = randomBytes(3).toString('hex');
  let seq = 0;
  const reserve = (id: string) =>
    store.reserve({
      requestId: id,
      accountId: account.id,
      keyId: key.record.id,
      model: 'bench-chat',
      endpoint: 'chat',
      amountNano: 5_000_000n,
    });
  const rows: StoreBenchRow[] = [];
  const row = (
    op: StoreBenchRow['op'],
    inFlight: number,
    r: { samples: number[]; ms: number },
  ): StoreBenchRow => ({
    backend,
    op,
    inFlight,
    ops,
    latency: percentiles(r.samples),
    opsPerSec: Math.round(ops / (r.ms / 1000)),
  });
  // Warm-up: statement preparation, JIT, the first pages of each table.
  await timed(Math.min(200, ops), 1, async () => {
    const id = `req_w${tag}${seq++}`;
    await reserve(id);
    await store.settle(id, OUTCOME);
  });
  const ids = Array.from({ length: ops }, () => `req_b${tag}${seq++}`);
  rows.push(row('reserve', 1, await timed(ops, 1, (i) => reserve(ids[i] as string))));
  rows.push(row('settle', 1, await timed(ops, 1, (i) => store.settle(ids[i] as string, OUTCOME))));
  const both = async (): Promise<void> => {
    const id = `req_c${tag}${seq++}`;
    await reserve(id);
    await store.settle(id, OUTCOME);
  };
  rows.push(row('reserve+settle', 32, await timed(ops, 32, both)));
  // The same load spread over 32 accounts: one account's balance row is a lock every reserve and
  // settle of that account waits on, so this row shows what the single-account row is bound by.
  const others: string[] = [];
  for (let i = 0; i < 32; i++) {
    const a = await store.createAccount({ name: `bench-${i}` });
    await store.adjustBalance(a.id, 10n ** 17n, 'topup', 'bench');
    others.push(a.id);
  }
  const spread = async (i: number): Promise<void> => {
    const id = `req_d${tag}${seq++}`;
    const accountId = others[i % others.length] as string;
    await store.reserve({
      requestId: id,
      accountId,
      keyId: key.record.id,
      model: 'bench-chat',
      endpoint: 'chat',
      amountNano: 5_000_000n,
    });
    await store.settle(id, OUTCOME);
  };
  rows.push(row('reserve+settle, 32 accounts', 32, await timed(ops, 32, spread)));
  return rows;
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
    try {
      rows.push(...(await benchStore('postgres', store, opts.ops)));
    } finally {
      await store.close();
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
