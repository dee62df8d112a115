// The gateway under test in its own process, with the full pipeline on: authentication, RPM and
// capacity limits, reservation and settlement, usage log, tracing (exporter none, the default).
// Store and limiter are the embedded pair (PGlite in a temp data_dir, in memory) or Postgres in a
// fresh schema and Redis under a fresh key prefix; both are dropped when the child stops.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { yuanToNano } from '../../src/billing/money.ts';
import { createGateway } from '../../src/gateway.ts';
import { createLimiter } from '../../src/limits/create-limiter.ts';
import type { GatewayLimiter } from '../../src/limits/resilient-limiter.ts';
import { childArgs, serveParent, toParent } from './ipc.ts';

export interface GatewayArgs {
  /** Upstream origin (the mock), without /v1. */
  upstream: string;
  upstreamKey: string;
  /** postgres://… base URL, or null for PGlite. */
  pgUrl: string | null;
  /** redis://… URL, or null for the in-memory limiter. */
  redisUrl: string | null;
  /** Channels the slow-stream model spreads over (see SLOW_CHANNELS in bench/run.ts). */
  slowChannels: number;
}

const args = childArgs<GatewayArgs>();
const tag = randomBytes(4).toString('hex');
const dir = await mkdtemp(join(tmpdir(), 'switchyard-bench-'));
const schema = `sy_bench_${tag}`;

async function pgAdmin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: args.pgUrl ?? '' });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

let storeUrl = '';
if (args.pgUrl !== null) {
  await pgAdmin(`CREATE SCHEMA ${schema}`);
  storeUrl = `${args.pgUrl}?options=${encodeURIComponent(`-c search_path=${schema}`)}`;
}

const channel = (id: string): string => `  - id: ${id}
    protocol: openai
    base_url: ${args.upstream}/v1
    api_keys: ["\${BENCH_KEY}"]
    capacity: 100000
    timeouts: { connect_ms: 2000, first_byte_ms: 30000, total_ms: 120000 }`;
const slow = Array.from({ length: args.slowChannels }, (_, i) => `up-slow-${i}`);

const files: Record<string, string> = {
  'gateway.yaml': `gateway:
  listen: { host: 127.0.0.1, port: 0 }
  store: { url: "${storeUrl}", data_dir: "${join(dir, 'store')}" }
  telemetry: { exporter: none }
  metrics: { enabled: true }
`,
  'channels.yaml': `channels:\n${[channel('up-main'), ...slow.map(channel)].join('\n')}\n`,
  'models.yaml': `models:
  - name: bench-chat
    owned_by: bench
    endpoints: [chat]
    max_output_tokens: 4096
    channels: [{ channel: up-main, upstream_model: bench-chat }]
  - name: bench-stream
    owned_by: bench
    endpoints: [chat]
    max_output_tokens: 4096
    channels: [{ channel: up-main, upstream_model: bench-stream }]
  - name: bench-paced
    owned_by: bench
    endpoints: [chat]
    max_output_tokens: 4096
    channels: [{ channel: up-main, upstream_model: bench-paced }]
  - name: bench-slow
    owned_by: bench
    endpoints: [chat]
    max_output_tokens: 4096
    channels: [${slow.map((id) => `{ channel: ${id}, upstream_model: bench-slow }`).join(', ')}]
`,
  'prices.yaml': `prices:
  - { model: bench-chat, input: 2, cache_hit: 0.5, output: 8 }
  - { model: bench-stream, input: 2, cache_hit: 0.5, output: 8 }
  - { model: bench-paced, input: 2, cache_hit: 0.5, output: 8 }
  - { model: bench-slow, input: 2, cache_hit: 0.5, output: 8 }
`,
  // RPM on, high enough never to reject: every request still does the full admit.
  'limits.yaml': `limits:
  rpm: { default: 100000000, scope: account }
  blacklist:
    rules:
      - { on: auth_failure, max: 1000, window_seconds: 60, ban_seconds: 60 }
`,
};
await Promise.all(Object.entries(files).map(([name, text]) => writeFile(join(dir, name), text)));
process.env.BENCH_KEY = args.upstreamKey;

const keyPrefix = `switchyard-bench:${tag}:`;
const limiter: GatewayLimiter | null =
  args.redisUrl === null
    ? null
    : createLimiter({ redisUrl: args.redisUrl, onUnreachable: 'fail_closed', keyPrefix });

const gateway = await createGateway({
  configDir: dir,
  port: 0,
  watch: false,
  logLevel: false,
  limiter,
});
const store = gateway.ctx.store;
const account = await store.createAccount({ name: 'bench' });
await store.adjustBalance(account.id, yuanToNano('100000000') ?? 0n, 'topup', 'bench');
const key = await store.createKey({
  accountId: account.id,
  name: 'bench',
  allowedModels: null,
  expiresAt: null,
});

async function dropRedisKeys(url: string): Promise<void> {
  const admin = new Redis(url);
  let cursor = '0';
  do {
    const [next, keys] = await admin.scan(cursor, 'MATCH', `${keyPrefix}*`, 'COUNT', 1000);
    if (keys.length > 0) await admin.del(...keys);
    cursor = next;
  } while (cursor !== '0');
  await admin.quit();
}

serveParent(async () => {
  await gateway.close();
  if (limiter !== null) await limiter.close();
  if (args.redisUrl !== null) await dropRedisKeys(args.redisUrl);
  if (args.pgUrl !== null) await pgAdmin(`DROP SCHEMA ${schema} CASCADE`);
  await rm(dir, { recursive: true, force: true });
});
toParent({ type: 'ready', url: gateway.url, key: key.plaintext });
