// The config figures in their own process (a clean heap): compile time and retained heap of a
// generated N models × C channels config, and the main thread's event-loop stall while the
// TableHolder recompiles it in its worker and swaps the table in.
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { deserialize, serialize } from 'node:v8';
import { deepFreeze } from '../../src/config/compile.ts';
import { TableHolder } from '../../src/config/reloader.ts';
import { compileDir } from '../../src/config/source.ts';
import type { RoutingTable } from '../../src/table/types.ts';
import { writeLargeConfig } from '../gen-config.ts';
import { childArgs, toParent } from './ipc.ts';

export interface ConfigArgs {
  models: number;
  channelsPerModel: number;
  /** Hot reloads measured after the first (which also starts the worker). */
  reloads: number;
}

export interface ReloadFigure {
  /** Wall time of `reload()`, compile in the worker included. */
  reloadMs: number;
  /** Largest event-loop delay on the main thread while it ran (monitorEventLoopDelay, 1 ms). */
  maxDelayMs: number;
  p99DelayMs: number;
}

export interface ConfigBenchResult {
  models: number;
  channelsPerModel: number;
  yamlBytes: number;
  /** First compile in the process (cold JIT), then the best of two more. */
  compileColdMs: number;
  compileWarmMs: number;
  /** Heap held by one compiled table after a full GC. */
  tableHeapBytes: number;
  /** Heap growth across one compile before any GC (table plus its garbage). */
  compilePeakHeapBytes: number;
  /**
   * The main thread's share of a reload: decoding the table the worker posted (v8 deserialize, as
   * postMessage does) and deepFreeze. Encoding happens in the worker.
   */
  serializeMs: number;
  deserializeMs: number;
  deepFreezeMs: number;
  /** The same loop watched for as long, with no reload: the monitor's own floor. */
  idleMaxDelayMs: number;
  firstReload: ReloadFigure;
  reloads: ReloadFigure[];
}

const gc = (): void => (globalThis as { gc?: () => void }).gc?.();
const ms = (v: number): number => Math.round(v * 100) / 100;

async function watched(run: () => Promise<unknown>): Promise<ReloadFigure> {
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  await sleep(20);
  const t = performance.now();
  await run();
  const reloadMs = performance.now() - t;
  await sleep(20);
  h.disable();
  return {
    reloadMs: ms(reloadMs),
    maxDelayMs: ms(h.max / 1e6),
    p99DelayMs: ms(h.percentile(99) / 1e6),
  };
}

const args = childArgs<ConfigArgs>();
const dir = await mkdtemp(join(tmpdir(), 'switchyard-bench-config-'));
try {
  await writeLargeConfig(dir, args.models, args.channelsPerModel);
  let yamlBytes = 0;
  for (const f of await readdir(dir)) yamlBytes += (await stat(join(dir, f))).size;

  gc();
  const heap0 = process.memoryUsage().heapUsed;
  let t = performance.now();
  const first = await compileDir(dir, 'serve');
  const compileColdMs = performance.now() - t;
  const compilePeakHeapBytes = process.memoryUsage().heapUsed - heap0;
  if (first.table === null) throw new Error(`the generated config does not compile`);
  gc();
  const tableHeapBytes = process.memoryUsage().heapUsed - heap0;
  let compileWarmMs = Infinity;
  for (let i = 0; i < 2; i++) {
    t = performance.now();
    await compileDir(dir, 'serve');
    compileWarmMs = Math.min(compileWarmMs, performance.now() - t);
  }
  gc();

  t = performance.now();
  const encoded = serialize(first.table);
  const serializeMs = performance.now() - t;
  t = performance.now();
  const copy = deserialize(encoded) as RoutingTable;
  const deserializeMs = performance.now() - t;
  t = performance.now();
  deepFreeze(copy);
  const deepFreezeMs = performance.now() - t;

  const idle = await watched(() => sleep(Math.max(50, compileWarmMs)));
  const holder = new TableHolder(dir, deepFreeze(first.table));
  const firstReload = await watched(() => holder.reload());
  const reloads: ReloadFigure[] = [];
  for (let i = 0; i < args.reloads; i++) reloads.push(await watched(() => holder.reload()));
  if (holder.status.reloads.success !== args.reloads + 1) throw new Error('a reload failed');
  await holder.close();

  const result: ConfigBenchResult = {
    models: args.models,
    channelsPerModel: args.channelsPerModel,
    yamlBytes,
    compileColdMs: ms(compileColdMs),
    compileWarmMs: ms(compileWarmMs),
    tableHeapBytes,
    compilePeakHeapBytes,
    serializeMs: ms(serializeMs),
    deserializeMs: ms(deserializeMs),
    deepFreezeMs: ms(deepFreezeMs),
    idleMaxDelayMs: idle.maxDelayMs,
    firstReload,
    reloads,
  };
  toParent({ type: 'result', result });
} finally {
  await rm(dir, { recursive: true, force: true });
}
process.exit(0);
