// Cost per call of the limiter's hot-path operations, memory and Redis, sequential and with 64 in
// flight. Run alone: `node bench/limits-bench.ts [--redis redis://127.0.0.1:6379] [--ops 20000]`.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { createLimiter } from '../src/limits/create-limiter.ts';
import type { Limiter } from '../src/limits/limiter.ts';

export type LimitsBenchRow = {
  backend: 'memory' | 'redis';
  op: 'hitRpm' | 'acquire+release' | 'isBlacklisted';
  inFlight: number;
  ops: number;
  usPerOp: number;
  opsPerSec: number;
  /**
   * Calls that failed (counted, not thrown): on this shared host a stall can outlast the Redis
   * client's command timeout, and one such call used to end the whole benchmark run.
   */
  errors: number;
};

type Op = (i: number) => Promise<unknown>;

const IN_FLIGHT = [1, 64] as const;

function operations(limiter: Limiter): Array<[LimitsBenchRow['op'], Op]> {
  return [
    // 100 account buckets with a limit that never rejects, so every call does the full admit.
    ['hitRpm', (i) => limiter.hitRpm(`rpm:bench-model:acct:${i % 100}`, 1_000_000_000)],
    [
      'acquire+release',
      async (i) => {
        const lease = await limiter.acquireSlot(`bench-ch-${i % 10}`, 1_000_000, 60_000);
        if (lease !== null) await limiter.releaseSlot(lease);
      },
    ],
    // 10 sources restricted, lookups spread over 1,000: the usual answer is "not restricted".
    ['isBlacklisted', (i) => limiter.isBlacklisted(`ip:10.0.${i % 1000}`)],
  ];
}

async function measure(
  op: Op,
  ops: number,
  inFlight: number,
): Promise<{ us: number; errors: number }> {
  let next = 0;
  let errors = 0;
  const worker = async (): Promise<void> => {
    while (next < ops) {
      try {
        await op(next++);
      } catch {
        errors++;
      }
    }
  };
  const started = process.hrtime.bigint();
  await Promise.all(Array.from({ length: inFlight }, worker));
  return { us: Number(process.hrtime.bigint() - started) / 1000, errors };
}

async function benchBackend(
  backend: LimitsBenchRow['backend'],
  limiter: Limiter,
  ops: number,
): Promise<LimitsBenchRow[]> {
  for (let i = 0; i < 10; i++) await limiter.addToBlacklist(`ip:10.0.${i * 100}`, 600_000, 'bench');
  const rows: LimitsBenchRow[] = [];
  for (const [name, op] of operations(limiter)) {
    await measure(op, Math.min(ops, 2_000), 1); // warm-up: JIT, script load
    for (const inFlight of IN_FLIGHT) {
      const { us, errors } = await measure(op, ops, inFlight);
      rows.push({
        backend,
        op: name,
        inFlight,
        ops,
        usPerOp: Math.round((us / ops) * 100) / 100,
        opsPerSec: Math.round(ops / (us / 1e6)),
        errors,
      });
    }
  }
  return rows;
}

async function deleteKeys(url: string, prefix: string): Promise<void> {
  const admin = new Redis(url);
  let cursor = '0';
  do {
    const [next, keys] = await admin.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    if (keys.length > 0) await admin.del(...keys);
    cursor = next;
  } while (cursor !== '0');
  await admin.quit();
}

/** Runs the benchmark, prints a table and returns the rows (Redis rows only with a URL). */
export async function runLimitsBench(opts: {
  redisUrl: string | null;
  ops: number;
}): Promise<LimitsBenchRow[]> {
  const memory = createLimiter({ redisUrl: null, onUnreachable: 'fail_open' });
  const rows = await benchBackend('memory', memory, opts.ops);
  await memory.close();

  if (opts.redisUrl !== null) {
    const keyPrefix = `switchyard-bench:${randomBytes(4).toString('hex')}:`;
    const redis = createLimiter({
      redisUrl: opts.redisUrl,
      onUnreachable: 'fail_closed',
      keyPrefix,
    });
    try {
      rows.push(...(await benchBackend('redis', redis, opts.ops)));
    } finally {
      await redis.close();
      await deleteKeys(opts.redisUrl, keyPrefix);
    }
  }

  console.log(`limiter cost per call (${opts.ops} ops each)`);
  console.log('backend  operation        in flight     µs/op        ops/s   errors');
  for (const r of rows) {
    console.log(
      `${r.backend.padEnd(8)} ${r.op.padEnd(16)} ${String(r.inFlight).padStart(9)} ` +
        `${r.usPerOp.toFixed(2).padStart(9)} ${String(r.opsPerSec).padStart(12)} ${String(r.errors).padStart(8)}`,
    );
  }
  return rows;
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const flag = (name: string): string | null => {
    const i = args.indexOf(name);
    return i >= 0 ? (args[i + 1] ?? null) : null;
  };
  const noRedis = args.includes('--no-redis');
  await runLimitsBench({
    redisUrl: noRedis ? null : (flag('--redis') ?? 'redis://127.0.0.1:6379'),
    ops: Number(flag('--ops') ?? 20_000),
  });
}
