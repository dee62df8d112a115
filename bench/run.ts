// `npm run bench`: the gateway's overhead against a direct call to the upstream and against a bare
// node:http + undici proxy, measured side by side in one run on this machine, plus the config,
// limiter and telemetry figures. `--quick` runs every section small (the test drives it).
// Writes bench/results/bench-<time>.json (or --out <file>) and prints the table.
import { mkdir, writeFile } from 'node:fs/promises';
import { cpus, loadavg, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Redis } from 'ioredis';
import pg from 'pg';
import { startChild, type BenchChild } from './child.ts';
import { profileFiles, summariseProfileFile } from './cpuprofile-summary.ts';
import { runLimitsBench } from './limits-bench.ts';
import {
  chatBody,
  closedLoop,
  holdStreams,
  interleavedClosedLoop,
  interleavedOpenLoop,
  interleavedPacedStreamLoop,
  openLoop,
  interleavedStreamLoop,
  type StreamLoopResult,
  type Target,
} from './load.ts';
import { ServiceTurns, TurnCpu } from './proc-cpu.ts';
import type { ConfigArgs, ConfigBenchResult } from './procs/config.ts';
import type { GatewayArgs } from './procs/gateway.ts';
import type { ProxyArgs } from './procs/proxy.ts';
import type { UpstreamArgs } from './procs/upstream.ts';
import {
  GATEWAYS,
  printReport,
  type BenchResults,
  type MemorySample,
  type OpenStreamsResult,
  type SideId,
} from './report.ts';
import { GATEWAY_ENV, GATEWAY_NODE_FLAGS, PG_URL, REDIS_URL } from './gateway-env.ts';
import { runStoreBench } from './store-bench.ts';
import { runTelemetryBench } from './telemetry-bench.ts';

/**
 * Channels the slow-stream model spreads over: the gateway's per-channel undici pool holds 256
 * connections (src/relay/upstreams.ts), so 1,000 streams on one channel would queue 744 of them.
 */
const SLOW_CHANNELS = 5;

/** How often RSS is read while the slow streams are all open. */
const OPEN_SAMPLE_MS = 500;

// This process is the load generator: its own garbage is collected between turns (BetweenTurns in
// load.ts), with `gc` exposed here so that every way of starting the bench does it.
setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

const argv = process.argv.slice(2);
const quick = argv.includes('--quick');
const outIndex = argv.indexOf('--out');
const outFile = outIndex >= 0 ? (argv[outIndex + 1] ?? null) : null;

const P = quick
  ? {
      concurrency: 16,
      warmupMs: 300,
      throughputMs: 1000,
      throughputSlices: 2,
      maxRate: 300,
      openLoopMs: 1000,
      latencySlices: 2,
      openLoopConnections: 64,
      streamChunks: 30,
      streamGapMs: 1,
      streamWarmupSlices: 1,
      streamConcurrency: 4,
      streamMs: 1000,
      streamSlices: 2,
      pacedChunks: 10,
      pacedGapMs: 20,
      pacedRate: 10,
      pacedConnections: 16,
      pacedMs: 1000,
      pacedSlices: 2,
      longRunRequests: 2000,
      longRunMaxMs: 30_000,
      longRunSamples: 4,
      openStreams: 200,
      idleBeforeHoldMs: 0,
      slowChunks: 10,
      slowGapMs: 150,
      profileMs: 1000,
      configModels: 1000,
      configChannels: 4,
      configReloads: 1,
      limitsOps: 2000,
      storeOps: 100,
      turnGapMs: 0,
    }
  : {
      concurrency: 32,
      // Each side warms up this long before its throughput is measured: the gateway's JIT and
      // PGlite's WASM tier-up take ~5-8 s under load to settle. Measured after 3 s, the gateway
      // still spent ~117 µs a request in V8's compiler threads (16-20 µs once settled) and did
      // 2,824 req/s against 4,558 in the next 5 s (scratch run, thread CPU from /proc).
      warmupMs: 10_000,
      // Taken in 1 s turns (interleavedClosedLoop): with four sides each idles 3 s between its
      // turns, too short for a 5 s memory-trim period to read as idle (decision 0018). 30 turns,
      // not 10: one side's 1 s turns here ranged up to 2x (the bare proxy 3,951-8,120 req/s in
      // one run of session 22) and a gateway's ratio to the proxy round by round 0.47-1.15, so
      // ten turns left the ratio ~±6% from run to run; thirty take that to ~±4%.
      throughputMs: 30_000,
      throughputSlices: 30,
      maxRate: 500,
      // The open loop's 20 s per side are taken in 1 s turns (interleavedOpenLoop in load.ts):
      // 10,000 samples a side, so a p99 is the 100th slowest, not the 50th, and one host stall
      // in one side's turn moves it less.
      openLoopMs: 20_000,
      latencySlices: 20,
      openLoopConnections: 128,
      streamChunks: 100,
      streamGapMs: 1,
      // Untimed turns before the timed ones. The stream path's code (the pump, the SSE parser, the
      // chat relay) is first run in this section, whatever the earlier ones did, and V8 takes
      // ~10 s of streams to settle it: after 1 s of warm-up, the gateway's V8 threads spent 3,139
      // µs a stream in the first turn and 300-800 only from the fifth on, and its TTFT p50 fell
      // turn by turn from 6.7 to 2.8 ms (proxy 2.1-4.2). After 10 s: 313-752 µs and 3.2-4.6 ms
      // with no trend (scratch, session 10).
      streamWarmupSlices: 8,
      streamConcurrency: 8,
      // Taken in 1 s turns (interleavedStreamLoop), like the latency and throughput sections. 16
      // turns, not 8: twelve 8-turn sections of the same code on one host read a gateway's added
      // p50 +0.06 to +0.85 ms (SD ~0.25; session 30, scratch), a quarter of the 1 ms goal.
      streamMs: 16_000,
      streamSlices: 16,
      // Streams at a model's pace: 100 chunks 20 ms apart (50 tokens/s, ~2 s a stream), started
      // 16 a second on the open loop's schedule, so ~32 are open (1,600 chunks/s). The section
      // above sends 8 streams' chunks back to back (8,000 chunks/s), which keeps this host's two
      // cores busy: its TTFT measures how the extra CPU of each side queues a new stream's first
      // byte. This one measures the first byte at a rate every side sustains, as the open loop
      // does for non-streamed latency (decision 0008, session 11 addendum). Started in a closed
      // loop instead, 32 equal streams began together every ~2 s, and TTFT measured the burst
      // (p50 16.8 ms direct, 24.3 through the proxy).
      pacedChunks: 100,
      pacedGapMs: 20,
      pacedRate: 16,
      pacedConnections: 64,
      pacedMs: 24_000,
      // 4 s of starts a turn (plus ~2 s for the last streams to end): ~64 timed streams a turn.
      pacedSlices: 6,
      longRunRequests: 200_000,
      // The embedded store settles ~400-700 requests/s here: 200,000 would take 5-8 minutes,
      // past the 10-minute budget of the whole run; the report says how many were sent.
      longRunMaxMs: 180_000,
      longRunSamples: 10,
      openStreams: 1000,
      // Each side idles this long before its streams open, as every side did before the long run
      // existed: long enough for the gateway's memory trim to give back what the previous
      // sections grew (decision 0018: two whole 5 s checks with no request, so 10-15 s).
      // rssBeforeMB is read after it.
      idleBeforeHoldMs: 17_000,
      slowChunks: 40,
      slowGapMs: 250,
      profileMs: 8000,
      configModels: 5000,
      configChannels: 4,
      configReloads: 3,
      limitsOps: 20_000,
      storeOps: 2000,
      // Quiet time before every interleaved turn (see `between`): 400 ms as in bench:ab, ~2 min a
      // run over its ~320 turns.
      turnGapMs: 400,
    };

const MB = 1024 * 1024;
const mb = (bytes: number): number => Math.round((bytes / MB) * 10) / 10;

async function pgReachable(): Promise<string | null> {
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return null;
  } catch (err) {
    return `Postgres at ${PG_URL} unreachable: ${err instanceof Error ? err.message : String(err)}`;
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function redisReachable(): Promise<string | null> {
  const probe = new Redis(REDIS_URL, {
    lazyConnect: true,
    connectTimeout: 1000,
    retryStrategy: () => null,
  });
  probe.on('error', () => {});
  try {
    await probe.connect();
    return (await probe.ping()) === 'PONG' ? null : `Redis at ${REDIS_URL} did not answer PING`;
  } catch (err) {
    return `Redis at ${REDIS_URL} unreachable: ${err instanceof Error ? err.message : String(err)}`;
  } finally {
    probe.disconnect();
  }
}

function log(msg: string): void {
  process.stderr.write(`[bench] ${msg}\n`);
}

/**
 * Each gateway's memory trims so far (`switchyard_memory_trims_total` on its /metrics). A trim is
 * a 100–210 ms pause; one inside a latency turn was the +13–32 ms p99 of earlier runs (decision
 * 0018, session 7 addendum), so the report shows how many fell in the latency section.
 */
async function memoryTrims(
  children: Partial<Record<SideId, BenchChild>>,
): Promise<Partial<Record<SideId, number>>> {
  const out: Partial<Record<SideId, number>> = {};
  for (const side of GATEWAYS) {
    const c = children[side];
    if (c === undefined) continue;
    const text = await (await fetch(`${c.url}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith('switchyard_memory_trims_total'));
    if (line !== undefined) out[side] = Number(line.split(' ').pop());
  }
  return out;
}

async function memorySample(
  child: BenchChild,
  requests: number,
  gc: boolean,
): Promise<MemorySample> {
  const m = await child.memory(gc);
  return {
    requests,
    rssMB: mb(m.rssBytes),
    heapUsedMB: mb(m.heapUsedBytes),
    heapTotalMB: mb(m.heapTotalBytes),
  };
}

async function main(): Promise<void> {
  const startedAt = new Date().toISOString();
  const children: BenchChild[] = [];
  const resultsDir = fileURLToPath(new URL('./results/', import.meta.url));
  await mkdir(resultsDir, { recursive: true });
  const stamp = startedAt.replace(/[:.]/g, '-');
  try {
    const [pgDown, redisDown] = await Promise.all([pgReachable(), redisReachable()]);
    const skipped: BenchResults['skipped'] = {};
    if (pgDown !== null || redisDown !== null)
      skipped.gatewayPgRedis = [pgDown, redisDown].filter((x) => x !== null).join('; ');
    if (skipped.gatewayPgRedis !== undefined) {
      if (process.env.CI)
        throw new Error(`the benchmark needs Postgres and Redis in CI: ${skipped.gatewayPgRedis}`);
      console.warn(`[bench] skipping the Postgres+Redis gateway: ${skipped.gatewayPgRedis}`);
    }

    log('starting upstream, proxy and gateways');
    const upstreamArgs: UpstreamArgs = {
      streamChunks: P.streamChunks,
      streamGapMs: P.streamGapMs,
      pacedChunks: P.pacedChunks,
      pacedGapMs: P.pacedGapMs,
      slowChunks: P.slowChunks,
      slowGapMs: P.slowGapMs,
    };
    const upstream = await startChild('upstream', 'upstream', upstreamArgs);
    children.push(upstream);
    // Before every turn of the interleaved sections: the garbage of the two processes every side
    // shares goes first, so the side after the fastest one does not pay for it (decision 0008,
    // session 8 addendum); then a quiet gap longer than a gateway's write-behind (settlements are
    // written up to 200 ms after they come, plus the write), so that work and Postgres's part in it
    // finish outside every turn. Without it, in both full runs of session 35, the bare proxy's
    // turns right after the Postgres+Redis gateway's read p99s of 23.1 and 27.8 ms at the median
    // against 12.7 and 11.6 after the direct call's (decision 0008, session 35 addendum; bench:ab
    // has had the same gap since session 26).
    // Set through the stream sections only (see withCpu below).
    let turnCpu: TurnCpu<SideId> | null = null;
    let serviceTurns: ServiceTurns<SideId> | null = null;
    const between = async (next: string): Promise<void> => {
      collectGarbage();
      await upstream.memory(true);
      if (P.turnGapMs > 0) await sleep(P.turnGapMs);
      turnCpu?.turn(next as SideId);
      serviceTurns?.turn(next as SideId);
    };
    const gatewayArgs = (pgUrl: string | null, redisUrl: string | null): GatewayArgs => ({
      upstream: upstream.url,
      upstreamKey: upstream.key,
      pgUrl,
      redisUrl,
      slowChannels: SLOW_CHANNELS,
    });
    const proxyArgs: ProxyArgs = { upstream: upstream.url, key: upstream.key };
    const started = await Promise.all([
      startChild('proxy', 'proxy', proxyArgs),
      startChild('gateway', 'gateway', gatewayArgs(null, null), GATEWAY_NODE_FLAGS, GATEWAY_ENV),
      skipped.gatewayPgRedis === undefined
        ? startChild(
            'gatewayPgRedis',
            'gateway',
            gatewayArgs(PG_URL, REDIS_URL),
            GATEWAY_NODE_FLAGS,
            GATEWAY_ENV,
          )
        : null,
    ]);
    const [proxy, gateway, gatewayPg] = started;
    for (const c of started) if (c !== null) children.push(c);

    const sides: SideId[] = [
      'direct',
      'proxy',
      'gateway',
      ...(gatewayPg !== null ? (['gatewayPgRedis'] as const) : []),
    ];
    const child: Partial<Record<SideId, BenchChild>> = {
      proxy,
      gateway,
      ...(gatewayPg !== null ? { gatewayPgRedis: gatewayPg } : {}),
    };
    const target = (side: SideId): Target => {
      const c = side === 'direct' ? upstream : child[side];
      if (c === undefined) throw new Error(`no process for ${side}`);
      return { url: c.url, key: c.key };
    };
    const chat = chatBody('bench-chat', false);
    const streamed = chatBody('bench-stream', true);
    const paced = chatBody('bench-paced', true);

    const results: BenchResults = {
      startedAt,
      finishedAt: '',
      quick,
      machine: {
        cores: cpus().length,
        cpuModel: cpus()[0]?.model ?? 'unknown',
        node: process.version,
        platform: `${process.platform} ${process.arch}`,
        totalMemMB: Math.round(totalmem() / MB),
        loadAvg1m: Math.round((loadavg()[0] ?? 0) * 100) / 100,
      },
      params: { ...P, slowChannels: SLOW_CHANNELS, chatBodyBytes: Buffer.byteLength(chat) },
      skipped,
      sides,
      throughput: {},
      latency: { ratePerSec: 0, results: {}, hostStall: {}, memoryTrims: {} },
      stream: {},
      pacedStream: {},
      memory: {
        afterWarmup: {},
        longRun: { side: 'gateway', requests: P.longRunRequests, samples: [] },
        openStreams: {},
      },
      config: null as unknown as ConfigBenchResult,
      limits: [],
      store: [],
      telemetry: [],
      profile: {
        totalMs: 0,
        busyMs: 0,
        functions: [],
        places: [],
        file: '',
        side: 'gateway',
        rps: 0,
      },
    };

    // Non-streamed throughput at fixed concurrency: each side warmed up, then all measured in turns.
    for (const side of sides) {
      log(`throughput warm-up: ${side}`);
      await closedLoop(target(side), {
        concurrency: P.concurrency,
        durationMs: P.warmupMs,
        body: chat,
      });
      const c = child[side];
      if (c !== undefined) results.memory.afterWarmup[side] = await memorySample(c, 0, false);
    }
    log(
      `throughput: ${P.throughputSlices} slices of ${P.throughputMs / P.throughputSlices} ms a side, in turns`,
    );
    results.throughput = await interleavedClosedLoop(
      sides.map((id) => ({ id, target: target(id) })),
      {
        concurrency: P.concurrency,
        sliceMs: P.throughputMs / P.throughputSlices,
        slices: P.throughputSlices,
        body: chat,
        between,
      },
    );

    // Added latency at a rate every side sustains: at most half the slowest side's throughput.
    const slowest = Math.min(...sides.map((s) => results.throughput[s]?.rps ?? 0));
    const rate = Math.max(10, Math.min(P.maxRate, Math.floor(slowest / 2 / 10) * 10));
    results.latency.ratePerSec = rate;
    for (const side of sides) {
      log(`open loop at ${rate}/s, warm-up: ${side}`);
      await openLoop(target(side), {
        ratePerSec: rate,
        durationMs: Math.min(1000, P.warmupMs),
        body: chat,
        connections: P.openLoopConnections,
      });
    }
    log(
      `open loop at ${rate}/s: ${P.latencySlices} slices of ${P.openLoopMs / P.latencySlices} ms a side, in turns`,
    );
    // Started for this section only: its 500 wake-ups a second would tax the throughput runs.
    const canary = await startChild('canary', 'canary', {});
    const trimsBefore = await memoryTrims(child);
    children.push(canary);
    const windows = new Map<SideId, [number, number][]>();
    results.latency.results = await interleavedOpenLoop(
      sides.map((id) => ({ id, target: target(id) })),
      {
        ratePerSec: rate,
        sliceMs: P.openLoopMs / P.latencySlices,
        slices: P.latencySlices,
        body: chat,
        connections: P.openLoopConnections,
        between,
        onSlice: (id, fromUs, toUs) => {
          const list = windows.get(id) ?? [];
          list.push([fromUs, toUs]);
          windows.set(id, list);
        },
      },
    );
    for (const side of sides) {
      const { samples, p50, p99, max } = await canary.lateness(windows.get(side) ?? []);
      results.latency.hostStall[side] = { samples, p50, p99, max };
    }
    const trimsAfter = await memoryTrims(child);
    for (const side of sides) {
      const before = trimsBefore[side];
      const after = trimsAfter[side];
      if (before !== undefined && after !== undefined)
        results.latency.memoryTrims[side] = after - before;
    }
    await canary.stop();

    // Streams: time to first and last token, warmed up in turns, then measured in turns. The
    // warm-up rotates like the measured turns, so no side idles through the others' warm-up and
    // takes its first timed turn cold.
    const streamTurnMs = P.streamMs / P.streamSlices;
    const streamTurns = (slices: number): Promise<Record<SideId, StreamLoopResult>> =>
      interleavedStreamLoop(
        sides.map((id) => ({ id, target: target(id) })),
        {
          concurrency: P.streamConcurrency,
          sliceMs: streamTurnMs,
          slices,
          body: streamed,
          between,
        },
      );
    log(`streams warm-up: ${P.streamWarmupSlices} turns of ${streamTurnMs} ms per side`);
    await streamTurns(P.streamWarmupSlices);
    log(`streams: ${P.streamSlices} turns of ${streamTurnMs} ms per side`);
    // Each process's CPU a stream over its own turns (proc-cpu.ts's TurnCpu): on 2 cores, what a
    // side spends beside the proxy (its V8 helpers and store thread included) is taken from the
    // streams that start while others run (docs/performance.md, session 64). And the host's
    // Postgres and Redis CPU over each side's turns, which a gateway on them adds to the same
    // cores beside its process (session 68; bench:ab has printed it since session 63).
    const pids: Partial<Record<SideId, number>> = {};
    for (const id of sides) {
      const pid = child[id]?.pid;
      if (pid !== undefined) pids[id] = pid;
    }
    const withCpu = (section: Partial<Record<SideId, StreamLoopResult>>): void => {
      turnCpu?.turn(null);
      serviceTurns?.turn(null);
      for (const id of sides) {
        const r = section[id];
        if (r === undefined) continue;
        r.cpuPerStream = turnCpu?.perStream(id, r.streams) ?? null;
        r.serviceCpuPerStream = serviceTurns?.perStream(id, r.streams) ?? null;
      }
      turnCpu = null;
      serviceTurns = null;
    };
    turnCpu = new TurnCpu(pids);
    serviceTurns = new ServiceTurns();
    results.stream = await streamTurns(P.streamSlices);
    withCpu(results.stream);

    // Streams at a model's pace, right after the section above (the stream path is warm).
    const pacedTurnMs = P.pacedMs / P.pacedSlices;
    log(`paced streams: ${P.pacedSlices} turns of ${pacedTurnMs} ms per side`);
    turnCpu = new TurnCpu(pids);
    serviceTurns = new ServiceTurns();
    results.pacedStream = await interleavedPacedStreamLoop(
      sides.map((id) => ({ id, target: target(id) })),
      {
        ratePerSec: P.pacedRate,
        connections: P.pacedConnections,
        sliceMs: pacedTurnMs,
        slices: P.pacedSlices,
        body: paced,
        between,
      },
    );
    withCpu(results.pacedStream);

    // Memory over a long run (after GC), on the default deployment, from the warm gateway on:
    // up to longRunRequests, or as many as longRunMaxMs allows.
    log(`long run: up to ${P.longRunRequests} requests through the gateway`);
    const batch = Math.ceil(P.longRunRequests / P.longRunSamples);
    const longRun = results.memory.longRun;
    longRun.samples.push(await memorySample(gateway, 0, true));
    const runUntil = performance.now() + P.longRunMaxMs;
    let done = 0;
    while (done < P.longRunRequests && performance.now() < runUntil) {
      const r = await closedLoop(target('gateway'), {
        concurrency: P.concurrency,
        durationMs: runUntil - performance.now(),
        body: chat,
        maxRequests: batch,
      });
      done += r.requests + r.errors;
      if (r.errors > 0) log(`long run: ${r.errors} errors (${r.firstError ?? ''})`);
      longRun.samples.push(await memorySample(gateway, done, true));
    }
    longRun.requests = done;

    // Many slow streams held open at once.
    const slow = chatBody('bench-slow', true);
    const slowMs = P.slowChunks * P.slowGapMs;
    // Both gateways: the embedded store's baseline (PGlite's WASM heap, ~500 MB) dominates the
    // first, so the second shows what the streams themselves cost.
    const holders = [
      ['proxy', proxy],
      ['gateway', gateway],
      ...(gatewayPg !== null ? ([['gatewayPgRedis', gatewayPg]] as const) : []),
    ] as const;
    for (const [side, c] of holders) {
      log(`${P.openStreams} open streams: ${side}`);
      await sleep(P.idleBeforeHoldMs);
      const before = await memorySample(c, 0, false);
      const heldAt = performance.now();
      const held = holdStreams(target(side), P.openStreams, slow);
      const openMs = await held.allOpen(slowMs);
      const opened = held.opened();
      const open = await memorySample(c, 0, false);
      // The moment the last stream opens is not the highest RSS of the hold: with their chunks
      // flowing, the embedded gateway read 297.1 MB at that moment and 300.6 MB 2 s later
      // (session 33, smaps read from outside). So RSS is read every 500 ms while every stream is
      // surely still open (the first ends slowMs after the hold began), and the goal is judged on
      // the highest reading.
      const lastSampleBy = heldAt + slowMs - OPEN_SAMPLE_MS;
      let rssOpenMaxMB = open.rssMB;
      let openSamples = 1;
      while (performance.now() + OPEN_SAMPLE_MS < lastSampleBy) {
        await sleep(OPEN_SAMPLE_MS);
        rssOpenMaxMB = Math.max(rssOpenMaxMB, (await memorySample(c, 0, false)).rssMB);
        openSamples++;
      }
      const end = await held.finished();
      const after = await memorySample(c, 0, false);
      const os: OpenStreamsResult = {
        streams: P.openStreams,
        opened,
        openMs,
        idleBeforeMs: P.idleBeforeHoldMs,
        rssBeforeMB: before.rssMB,
        rssOpenMB: open.rssMB,
        rssOpenMaxMB,
        openSamples,
        rssAfterMB: after.rssMB,
        heapTotalBeforeMB: before.heapTotalMB,
        heapTotalOpenMB: open.heapTotalMB,
        ok: end.ok,
        errors: end.errors,
        firstError: end.firstError,
      };
      results.memory.openStreams[side] = os;
    }

    // A CPU profile of the gateway during the non-stream throughput section, in its own process.
    // It starts only now: idle under --cpu-prof, a process still samples ~900 times a second on
    // each of its two isolates (main and PGlite worker), ~3,700 context switches a second that
    // landed on every earlier section when it started with the others (decision 0008, session
    // 15 addendum). --cpu-prof writes the profile at exit; only the load window is summarised.
    log('cpu profile of the gateway under load');
    const profileDir = join(outFile !== null ? dirname(outFile) : resultsDir, `profile-${stamp}`);
    const profiled = await startChild(
      'profiled',
      'gateway',
      gatewayArgs(null, null),
      [...GATEWAY_NODE_FLAGS, '--cpu-prof', `--cpu-prof-dir=${profileDir}`],
      GATEWAY_ENV,
    );
    children.push(profiled);
    await closedLoop(
      { url: profiled.url, key: profiled.key },
      { concurrency: P.concurrency, durationMs: P.warmupMs, body: chat },
    );
    const fromUs = (await profiled.memory(false)).monotonicUs;
    const prof = await closedLoop(
      { url: profiled.url, key: profiled.key },
      { concurrency: P.concurrency, durationMs: P.profileMs, body: chat },
    );
    const toUs = (await profiled.memory(false)).monotonicUs;
    await profiled.stop();
    // The main thread's: its PGlite worker and initdb child write theirs beside it, and the
    // directory's order picked any of the three.
    const profileFile = (await profileFiles(profileDir, profiled.pid)).main;
    results.profile = {
      ...(await summariseProfileFile(profileFile, 30, { fromUs, toUs })),
      file: profileFile,
      side: 'gateway',
      rps: prof.rps,
    };

    for (const c of children.splice(0).reverse()) await c.stop();

    log(`config: ${P.configModels} models × ${P.configChannels} channels`);
    const configArgs: ConfigArgs = {
      models: P.configModels,
      channelsPerModel: P.configChannels,
      reloads: P.configReloads,
    };
    results.config = (await (
      await startChild('config', 'config', configArgs)
    ).result()) as ConfigBenchResult;

    log('limiter cost per call');
    results.limits = await runLimitsBench({
      redisUrl: redisDown === null ? REDIS_URL : null,
      ops: P.limitsOps,
    });
    log('store cost per call');
    results.store = await runStoreBench({
      pgUrl: pgDown === null ? PG_URL : null,
      ops: P.storeOps,
    });
    log('telemetry cost per request');
    results.telemetry = await runTelemetryBench({ quick });

    results.finishedAt = new Date().toISOString();
    const file = outFile ?? join(resultsDir, `bench-${stamp}${quick ? '-quick' : ''}.json`);
    await writeFile(file, JSON.stringify(results, null, 2) + '\n');
    printReport(results);
    console.log(`\nraw results: ${file}`);
  } finally {
    for (const c of children.reverse()) await c.stop().catch(() => undefined);
  }
}

await main();
