// `npm run bench:cpu`: the throughput section's closed loop (c=32) in 1 s turns, with the CPU of
// every thread of each side's process, of the mock upstream and of this load generator, read
// from /proc around each turn and divided by the side's requests. It says where a request's CPU
// goes (the gateway's main thread, V8's helper threads, the PGlite thread) where the ratio alone
// cannot: at c=32 this 2-core host is CPU-bound, and the ratio follows the CPU a request costs
// all processes together (docs/performance.md, sessions 24 and 25). Linux only.
//
// Sides: the bare proxy and the embedded-store gateway; `--four` adds the direct call and the
// Postgres+Redis gateway, as `npm run bench` lays its turns out (each side idles ~3 s between
// turns; the bare proxy ran faster in that layout, docs/performance.md session 25). `--idle=MS`
// idles between every turn.
// `--rounds=N` (10) and `--warmup=MS` (8000) size it.
import { setTimeout as sleep } from 'node:timers/promises';
import { startChild, type BenchChild } from './child.ts';
import { GATEWAY_ENV, GATEWAY_NODE_FLAGS, PG_URL, REDIS_URL } from './gateway-env.ts';
import { chatBody, closedLoop, interleavedClosedLoop } from './load.ts';
import { threadCpu, type ThreadCpu } from './proc-cpu.ts';
import type { GatewayArgs } from './procs/gateway.ts';
import type { UpstreamArgs } from './procs/upstream.ts';

const argv = process.argv.slice(2);
const option = (name: string, fallback: number): number => {
  const a = argv.find((x) => x.startsWith(`--${name}=`));
  return a === undefined ? fallback : Number(a.slice(name.length + 3));
};
const FOUR = argv.includes('--four');
const ROUNDS = option('rounds', 10);
const WARMUP_MS = option('warmup', 8000);
const IDLE_MS = option('idle', 0);

function addDelta(into: ThreadCpu, from: ThreadCpu, to: ThreadCpu): void {
  for (const [name, v] of to) into.set(name, (into.get(name) ?? 0) + v - (from.get(name) ?? 0));
}

const total = (m: ThreadCpu): number => [...m.values()].reduce((a, b) => a + b, 0);

type SideId = 'direct' | 'proxy' | 'gateway' | 'gatewayPgRedis';
interface Account {
  self: ThreadCpu;
  upstream: ThreadCpu;
  loadgen: ThreadCpu;
}

const children: BenchChild[] = [];
try {
  const upstreamArgs: UpstreamArgs = {
    streamChunks: 100,
    streamGapMs: 1,
    pacedChunks: 100,
    pacedGapMs: 20,
    slowChunks: 10,
    slowGapMs: 250,
  };
  const upstream = await startChild('upstream', 'upstream', upstreamArgs);
  children.push(upstream);
  const gatewayArgs = (pgUrl: string | null, redisUrl: string | null): GatewayArgs => ({
    upstream: upstream.url,
    upstreamKey: upstream.key,
    pgUrl,
    redisUrl,
    slowChannels: 1,
  });
  const proc: Partial<Record<SideId, BenchChild>> = { direct: upstream };
  proc.proxy = await startChild('proxy', 'proxy', { upstream: upstream.url, key: upstream.key });
  proc.gateway = await startChild(
    'gateway',
    'gateway',
    gatewayArgs(null, null),
    GATEWAY_NODE_FLAGS,
    GATEWAY_ENV,
  );
  children.push(proc.proxy, proc.gateway);
  if (FOUR) {
    proc.gatewayPgRedis = await startChild(
      'gatewayPgRedis',
      'gateway',
      gatewayArgs(PG_URL, REDIS_URL),
      GATEWAY_NODE_FLAGS,
      GATEWAY_ENV,
    );
    children.push(proc.gatewayPgRedis);
  }
  const ids: SideId[] = FOUR
    ? ['direct', 'proxy', 'gateway', 'gatewayPgRedis']
    : ['proxy', 'gateway'];
  const child = (id: SideId): BenchChild => {
    const c = proc[id];
    if (c === undefined) throw new Error(`no process for ${id}`);
    return c;
  };
  const sides = ids.map((id) => ({ id, target: { url: child(id).url, key: child(id).key } }));
  const body = chatBody('bench-chat', false);
  for (const s of sides) {
    console.log(`warm-up: ${s.id}`);
    await closedLoop(s.target, { concurrency: 32, durationMs: WARMUP_MS, body });
  }

  const accounts = new Map<SideId, Account>(
    ids.map((id) => [id, { self: new Map(), upstream: new Map(), loadgen: new Map() }]),
  );
  // interleavedClosedLoop calls `between` before every turn with the side whose turn it is: the
  // CPU read there closes the last turn's account and opens the next one's.
  let open: (Account & { id: SideId }) | null = null;
  const close = (): void => {
    if (open === null) return;
    const a = accounts.get(open.id)!;
    // The direct side has no process of its own: its "self" is the upstream.
    if (open.id !== 'direct') addDelta(a.self, open.self, threadCpu(child(open.id).pid));
    addDelta(a.upstream, open.upstream, threadCpu(upstream.pid));
    addDelta(a.loadgen, open.loadgen, threadCpu(process.pid));
    open = null;
  };
  const between = async (id: SideId): Promise<void> => {
    close();
    await upstream.memory(true);
    if (IDLE_MS > 0) await sleep(IDLE_MS);
    open = {
      id,
      self: id === 'direct' ? new Map() : threadCpu(child(id).pid),
      upstream: threadCpu(upstream.pid),
      loadgen: threadCpu(process.pid),
    };
  };
  console.log(`${ROUNDS} rounds of 1 s turns${IDLE_MS > 0 ? `, ${IDLE_MS} ms idle between` : ''}`);
  const results = await interleavedClosedLoop(sides, {
    concurrency: 32,
    sliceMs: 1000,
    slices: ROUNDS,
    body,
    between,
  });
  close();

  const proxyRps = results.proxy.rps;
  console.log(
    '\nside            req/s  × proxy   µs a request: side (by thread) + upstream + load generator = all',
  );
  for (const id of ids) {
    const r = results[id];
    const a = accounts.get(id)!;
    const per = (us: number): string => (us / r.requests).toFixed(1);
    const threads = [...a.self]
      .filter(([, v]) => v > 0)
      .map(([name, v]) => `${name} ${per(v)}`)
      .join(', ');
    const all = total(a.self) + total(a.upstream) + total(a.loadgen);
    console.log(
      `${id.padEnd(15)} ${String(r.rps).padStart(6)}  ${(r.rps / proxyRps).toFixed(3)}   ` +
        `${id === 'direct' ? '-' : `${per(total(a.self))} (${threads})`} + ${per(total(a.upstream))} + ` +
        `${per(total(a.loadgen))} = ${per(all)}`,
    );
  }
  console.log('turns (req/s):');
  for (const id of ids) console.log(`  ${id.padEnd(15)} ${results[id].turnRps.join(' ')}`);
} finally {
  for (const c of children.reverse()) await c.stop().catch(() => undefined);
}
