// `npm run bench:ab -- <other checkout>`: the stream sections of `npm run bench` (back to back,
// then at a model's pace) with two gateways side by side in one run: the one in <other checkout>
// (a `git worktree` of the commit to compare with, with node_modules beside it) and this one,
// each with the direct call and the bare proxy, in turns. The TTFT gaps of one change are
// a few tenths of a ms and this host's noise moves them more between runs than that, so a change
// is judged against its base inside one run (decision 0029). `--quick` runs it small; `--pg` runs
// both gateways on Postgres and Redis (each its own fresh schema and key prefix) instead of the
// embedded store and in-memory limits. `--stages` stamps every request on the proxy and both
// gateways (bench/stage-probe.ts) and prints, after each section, the medians from arrival to
// the upstream request, to its head (with how long the event loop was busy meanwhile) and to the
// first byte out, and how often the path to the upstream waited for a core, and back to back the
// same over each turn's first wave (the burst after a side's idle spell), then each gateway's
// path to the upstream request split into the steps it publishes (src/telemetry/path-steps.ts);
// the probe's few µs a request are in that run's TTFTs.
// Each section also prints the host's Postgres and Redis CPU a stream over each side's turns.
// `--this-flags="<node flags>"` starts only this checkout's gateway with those flags on top of
// npm start's, to judge a flag against the same code without it in one run.
// `--this-on=<pg|pglite>+<redis|memory>` starts only this checkout's gateway on that store and
// limiter (base keeps --pg's choice), to judge a backend pair against another with the same code
// in one run: `npm run bench:ab -- . --pg --this-on=pglite+redis` (session 46).
// `--preload=N` sends the bare proxy and both gateways N non-streamed requests each (32 at a time)
// before the stream sections, as `npm run bench` does with its throughput and latency sections
// first (~200,000; the proxy too since session 63):
// the state a full run measures streams in (a grown heap, usage rows, lease and limiter state).
// `--this-preload=N` sends them to this checkout's gateway only: with `.` as the other checkout,
// it measures what that state alone does to the stream figures (session 61).
// `--profiles[=µs]` runs both gateways under `--cpu-prof` (a sample every 500 µs unless given) and
// prints after the run, for each section, where each one's main thread spent its time a stream
// within it, side by side (bench/profile-diff.ts), and where the profiles are kept. The sampling
// costs: V8's sampler thread took ~28 ms of CPU a paced stream at 500 µs, so that run's TTFTs are
// not the unprofiled ones.
// `--processes=N` does all of it N times, every side started afresh each time, and ends with
// this − base of each run, their mean and a 95% interval over the runs: one run's interval is
// drawn from its rounds, which share their processes, and two runs with the same code on both
// sides read −0.81 and +1.08 ms back to back, each interval excluding 0 (session 54).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { startChild, type BenchChild } from './child.ts';
import { GATEWAY_ENV, GATEWAY_NODE_FLAGS, PG_URL, REDIS_URL } from './gateway-env.ts';
import {
  chatBody,
  closedLoop,
  interleavedPacedStreamLoop,
  interleavedStreamLoop,
  clearWriteDelays,
  monotonicUs,
  stampSendTimes,
  takeWriteDelays,
  type StreamLoopResult,
  type Target,
} from './load.ts';
import type { GatewayArgs } from './procs/gateway.ts';
import { cpuPerStream, readCpu, ServiceTurns, type CpuReading } from './proc-cpu.ts';
import { printProfileDiff, readThreadProfiles, type ProfileWindow } from './profile-diff.ts';
import { intervalText, median, signed } from './report.ts';
import { addedP50Interval, mean, meanInterval } from './round-interval.ts';
import {
  readStageRows,
  stageLine,
  summariseFirstWave,
  summariseStages,
  summariseSteps,
  stepLine,
  waveLine,
} from './stages.ts';
import type { UpstreamArgs } from './procs/upstream.ts';

setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

const argv = process.argv.slice(2);
const quick = argv.includes('--quick');
const onPostgres = argv.includes('--pg');
const baseDir = argv.find((a) => !a.startsWith('--'));
if (baseDir === undefined) {
  console.error(
    'usage: npm run bench:ab -- <other checkout> [--quick] [--pg] [--stages] [--this-flags="…"]' +
      ' [--this-on=<pg|pglite>+<redis|memory>] [--preload=N | --this-preload=N] [--processes=N]' +
      ' [--profiles[=µs]]',
  );
  process.exit(2);
}
const THIS_ON_ARG = '--this-on=';
const thisOnArg = argv.find((a) => a.startsWith(THIS_ON_ARG))?.slice(THIS_ON_ARG.length) ?? null;
const thisOn = ((): { pg: boolean; redis: boolean } => {
  if (thisOnArg === null) return { pg: onPostgres, redis: onPostgres };
  const [store, limits] = thisOnArg.split('+');
  if ((store !== 'pg' && store !== 'pglite') || (limits !== 'redis' && limits !== 'memory')) {
    console.error(`--this-on takes <pg|pglite>+<redis|memory>, not "${thisOnArg}"`);
    process.exit(2);
  }
  return { pg: store === 'pg', redis: limits === 'redis' };
})();
const PROCESSES_ARG = '--processes=';
const processesArg = argv.find((a) => a.startsWith(PROCESSES_ARG))?.slice(PROCESSES_ARG.length);
const processes = processesArg === undefined ? 1 : Number(processesArg);
if (!Number.isInteger(processes) || processes < 1) {
  console.error(`--processes takes a whole number of runs, 1 or more, not "${processesArg}"`);
  process.exit(2);
}
/** A whole number of requests given as `<prefix>N`, or 0 when the argument is not there. */
function countArg(prefix: string): number {
  const text = argv.find((a) => a.startsWith(prefix))?.slice(prefix.length);
  if (text === undefined) return 0;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) {
    console.error(`${prefix.slice(0, -1)} takes a whole number of requests, not "${text}"`);
    process.exit(2);
  }
  return n;
}
const profilesArg = argv.find((a) => a === '--profiles' || a.startsWith('--profiles='));
/** The gateways' CPU profiles' sampling interval (µs), or null without `--profiles`. */
const profileIntervalUs = ((): number | null => {
  if (profilesArg === undefined) return null;
  const text = profilesArg.split('=')[1];
  const us = text === undefined ? 500 : Number(text);
  if (!Number.isInteger(us) || us < 50) {
    console.error(`--profiles takes a sampling interval of 50 µs or more, not "${text}"`);
    process.exit(2);
  }
  return us;
})();
const preloadBoth = countArg('--preload=');
const preloadThis = countArg('--this-preload=');
const THIS_FLAGS_ARG = '--this-flags=';
const thisFlags = (argv.find((a) => a.startsWith(THIS_FLAGS_ARG)) ?? THIS_FLAGS_ARG)
  .slice(THIS_FLAGS_ARG.length)
  .split(' ')
  .filter((f) => f !== '');

/** A child's node flags as its process was started, read back from Linux's /proc. */
function nodeFlagsOf(pid: number): string {
  try {
    const words = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return words.filter((w) => w.startsWith('--')).join(' ');
  } catch {
    return '(unknown)';
  }
}
const stagesDir = argv.includes('--stages') ? mkdtempSync(join(tmpdir(), 'sy-stages-')) : null;
// Each request carries its send time, so the probe can tell the wait before a server's 'request'
// event (its loop busy, the socket's bytes unread) from the server's own path.
stampSendTimes(stagesDir !== null);
/** Streams each side holds open back to back: a turn starts with this many at once. */
const WAVE = 8;

// The same sizes as bench/run.ts's stream sections (full) or a few seconds' worth (quick).
const P = quick
  ? { chunks: 20, warmup: 1, turns: 2, turnMs: 500, pacedTurns: 2, pacedTurnMs: 1000, gapMs: 0 }
  : {
      chunks: 100,
      warmup: 8,
      turns: 8,
      turnMs: 1000,
      pacedTurns: 8,
      pacedTurnMs: 4000,
      gapMs: 400,
    };

type Side = 'direct' | 'proxy' | 'base' | 'this';
const SIDES: readonly Side[] = ['direct', 'proxy', 'base', 'this'];

/**
 * Each side's process CPU a stream over a section (proc-cpu.ts's cpuPerStream): an idle
 * Postgres+Redis gateway spent ~8 ms a second over its threads; its worker's 2.3 read as ~200 µs
 * a back-to-back stream (session 46). The direct side has no process of its own. Ticks are 10
 * ms: ~1,000 streams a section make it ~10 µs. Beside the main thread, V8's helper threads and
 * worker threads take cores from the upstream and the load generator on a 2-core host.
 */
function cpuLines(
  pids: Partial<Record<Side, number>>,
  before: Partial<Record<Side, CpuReading | null>>,
  results: Record<Side, StreamLoopResult>,
): string[] {
  return SIDES.map((side) => {
    const pid = pids[side];
    const cpu = cpuPerStream(
      before[side],
      pid === undefined ? null : readCpu(pid),
      results[side].streams,
    );
    if (cpu === null) return '';
    return (
      `  cpu/stream main ${cpu.mainUs} µs, all threads ${cpu.allUs} µs ` +
      `(V8 helpers ${cpu.helpersUs}, workers ${cpu.workersUs})`
    );
  });
}

/** Prints a section's line: each side's Postgres and Redis µs a stream; nothing off Linux. */
function printServices(
  services: ServiceTurns<Side>,
  results: Record<Side, StreamLoopResult>,
): void {
  services.turn(null);
  const cells = SIDES.map((side) => {
    const used = services.perStream(side, results[side].streams);
    return used === null ? null : `${side} ${used.postgresUs} + ${used.redisUs}`;
  });
  if (cells.every((c) => c === null)) return;
  const line = cells.map((c, i) => c ?? `${SIDES[i]} –`).join(', ');
  console.log(`  host's Postgres + Redis CPU over each side's turns (µs a stream): ${line}`);
}

/** Prints a section's table; returns this checkout's TTFT p50 minus the base's (ms). */
function show(title: string, results: Record<Side, StreamLoopResult>, cpu: string[]): number {
  const proxy = results.proxy.ttft.p50;
  console.log(`\n${title}: TTFT p50 / p99, added p50 over the bare proxy (ms)`);
  SIDES.forEach((side, i) => {
    const r = results[side];
    const added = r.ttft.p50 - proxy;
    console.log(
      `  ${side.padEnd(7)} ${r.ttft.p50.toFixed(2).padStart(7)} / ${r.ttft.p99.toFixed(2).padStart(7)}` +
        `  ${signed(added, 2)}  (${r.streams} streams, ${r.errors} errors)` +
        (cpu[i] ?? ''),
    );
    // A failed stream is a finding of its own: say what the first one was.
    if (r.errors > 0) console.log(`    first error: ${r.firstError ?? '(none recorded)'}`);
  });
  // What a burst after a side's idle spell meets (each turn's first wave), and the rest.
  const waves = [
    ['first wave', (r: StreamLoopResult) => r.firstWaveTtft],
    ['later waves', (r: StreamLoopResult) => r.laterWavesTtft],
  ] as const;
  for (const [name, of] of waves) {
    const proxyWave = of(results.proxy);
    if (proxyWave === null || proxyWave === undefined) continue;
    const cells = SIDES.map((side) => {
      const p50 = of(results[side])?.p50 ?? NaN;
      return `${side} ${p50.toFixed(2)} (${signed(p50 - proxyWave.p50, 2)})`;
    });
    console.log(`  ${name} of each turn, TTFT p50 (added over the proxy): ${cells.join(', ')}`);
  }
  // The A/B's answer, with how far another run like this could move it (decision 0061).
  const mine = results.this;
  const interval = intervalText(
    addedP50Interval(mine.turnTtfts ?? [], results.base.turnTtfts ?? []),
  );
  const difference = mine.ttft.p50 - results.base.ttft.p50;
  if (interval !== null)
    console.log(`  this − base: TTFT p50 ${signed(difference, 2)} ms (${interval})`);
  // How much of the machine the VM's host took meanwhile (bench/host-steal.ts), side by side.
  const steal = SIDES.map((side) => {
    const pct = results[side].hostStealPct;
    return `${side} ${pct === null || pct === undefined ? '–' : pct.toFixed(1)}`;
  });
  console.log(`  host steal over each side's turns (% of the CPU time): ${steal.join(', ')}`);
  return difference;
}

/** The probe's environment for one side: its rows go to <stagesDir>/<side>.tsv. */
function probeEnv(side: Side): Record<string, string> {
  if (stagesDir === null) return {};
  const probe = new URL('./stage-probe.ts', import.meta.url).href;
  const inherited = process.env.NODE_OPTIONS ?? '';
  return {
    NODE_OPTIONS: `${inherited} --import=${probe}`.trim(),
    SWITCHYARD_STAGES_FILE: join(stagesDir, `${side}.tsv`),
  };
}

/**
 * After a section: each probed side's stages over the requests that arrived within it, and, back
 * to back (`wave`: the streams a turn starts with), over each turn's first wave alone.
 */
async function showStages(fromMs: number, toMs: number, wave = 0): Promise<void> {
  if (stagesDir === null) return;
  await sleep(400); // the probe appends its rows every 200 ms
  const sides = ['proxy', 'base', 'this'] as const;
  const rows = new Map(sides.map((side) => [side, readStageRows(join(stagesDir, `${side}.tsv`))]));
  console.log('  stages (medians, µs; alone: no other request open at its arrival)');
  for (const side of sides)
    console.log(stageLine(side, summariseStages(rows.get(side)!, fromMs, toMs)));
  // The first part of "client's send to arrival": the load generator's own wait before it wrote.
  const waits = sides.map((side) => {
    const list = takeWriteDelays(sideOrigins[side] ?? '');
    return `${side} ${list.length === 0 ? '–' : Math.round(median(list))}`;
  });
  console.log(`  load generator, send to its write of the head (medians, µs): ${waits.join(', ')}`);
  if (wave > 0) {
    // A side idles for the other sides' turns, so half a turn without an arrival starts a turn.
    console.log(`  stages of each turn's first ${wave} streams (medians, µs)`);
    for (const side of sides)
      console.log(
        waveLine(side, summariseFirstWave(rows.get(side)!, fromMs, toMs, wave, P.turnMs / 2)),
      );
  }
  // Where each gateway's path to the upstream request went, step by step (src/telemetry/path-steps.ts).
  console.log(
    "  steps of each gateway's path to its upstream request (medians, µs, each from the last)",
  );
  for (const side of ['base', 'this'] as const)
    console.log(stepLine(side, summariseSteps(rows.get(side)!, fromMs, toMs)));
}

const epochMs = (): number => performance.timeOrigin + performance.now();

/** A gateway's node flags for `--profiles`: its profiles go to `dir`. */
function profileFlags(dir: string | null): string[] {
  if (dir === null || profileIntervalUs === null) return [];
  return ['--cpu-prof', `--cpu-prof-dir=${dir}`, `--cpu-prof-interval=${profileIntervalUs}`];
}

/** Each probed side's origin, as undici names it in its diagnostics (load.ts's write delays). */
const sideOrigins: Partial<Record<Side, string>> = {};

const other = (await import(pathToFileURL(join(resolve(baseDir), 'bench', 'child.ts')).href)) as {
  startChild: typeof startChild;
};

/** One run of both sections with every side started afresh; this − base TTFT p50 of each (ms). */
async function runOnce(): Promise<{ backToBack: number; paced: number }> {
  const children: BenchChild[] = [];
  // --profiles: each gateway writes its profiles at exit; each section's window is kept for them.
  const profileDir =
    profileIntervalUs === null ? null : mkdtempSync(join(tmpdir(), 'sy-ab-profiles-'));
  const windows: ProfileWindow[] = [];
  let result: { backToBack: number; paced: number };
  let gatewayPids: { base: number; this: number } | null = null;
  try {
    const upstreamArgs: UpstreamArgs = {
      streamChunks: P.chunks,
      streamGapMs: 1,
      pacedChunks: P.chunks,
      pacedGapMs: 20,
      slowChunks: 10,
      slowGapMs: 250,
    };
    const upstream = await startChild('upstream', 'upstream', upstreamArgs);
    children.push(upstream);
    const gatewayArgs: GatewayArgs = {
      upstream: upstream.url,
      upstreamKey: upstream.key,
      pgUrl: onPostgres ? PG_URL : null,
      redisUrl: onPostgres ? REDIS_URL : null,
      slowChannels: 1,
    };
    const [proxy, base, mine] = await Promise.all([
      startChild(
        'proxy',
        'proxy',
        { upstream: upstream.url, key: upstream.key },
        [],
        probeEnv('proxy'),
      ),
      other.startChild(
        'base',
        'gateway',
        gatewayArgs,
        [...GATEWAY_NODE_FLAGS, ...profileFlags(profileDir)],
        {
          ...GATEWAY_ENV,
          ...probeEnv('base'),
        },
      ),
      startChild(
        'this',
        'gateway',
        {
          ...gatewayArgs,
          pgUrl: thisOn.pg ? PG_URL : null,
          redisUrl: thisOn.redis ? REDIS_URL : null,
        },
        [...GATEWAY_NODE_FLAGS, ...thisFlags, ...profileFlags(profileDir)],
        { ...GATEWAY_ENV, ...probeEnv('this') },
      ),
    ]);
    children.push(proxy, base, mine);
    gatewayPids = { base: base.pid, this: mine.pid };
    for (const [side, c] of [
      ['proxy', proxy],
      ['base', base],
      ['this', mine],
    ] as const)
      sideOrigins[side] = new URL(c.url).origin;
    if (thisFlags.length > 0)
      console.log(`node flags: base ${nodeFlagsOf(base.pid)}; this ${nodeFlagsOf(mine.pid)}`);
    if (thisOnArg !== null) {
      const on = (pg: boolean, redis: boolean): string =>
        `${pg ? 'Postgres' : 'PGlite'} + ${redis ? 'Redis' : 'in-memory limits'}`;
      console.log(
        `backends: base ${on(onPostgres, onPostgres)}; this ${on(thisOn.pg, thisOn.redis)}`,
      );
    }
    const target = (c: BenchChild): Target => ({ url: c.url, key: c.key });
    const sides = [
      { id: 'direct' as const, target: target(upstream) },
      { id: 'proxy' as const, target: target(proxy) },
      { id: 'base' as const, target: target(base) },
      { id: 'this' as const, target: target(mine) },
    ];
    // The sides ran in a fixed cycle, so 'this' always followed 'base' and met the tail of base's
    // write-behind (settlements are written up to 200 ms after a stream ends) in its first turns:
    // with the same code on both sides, 'this' read +0.54 ms of back-to-back TTFT over 'base'; with
    // 400 ms between turns, -0.30 (session 26). The gap (longer than the write-behind's 200 ms bound
    // plus a write) lets that work finish outside every turn; quick mode measures nothing and skips
    // it. The order now also puts each side after each other side equally often (decision 0056).
    // Read over the measured sections' turns only (null through the warm-up).
    let services: ServiceTurns<Side> | null = null;
    const between = async (next: string): Promise<void> => {
      collectGarbage();
      await upstream.memory(true);
      if (P.gapMs > 0) await sleep(P.gapMs);
      services?.turn(next as Side);
    };
    const streamed = chatBody('bench-stream', true);
    const backToBack = (slices: number): Promise<Record<Side, StreamLoopResult>> =>
      interleavedStreamLoop(sides, {
        concurrency: WAVE,
        sliceMs: P.turnMs,
        slices,
        body: streamed,
        between,
      });
    const pids: Partial<Record<Side, number>> = {
      proxy: proxy.pid,
      base: base.pid,
      this: mine.pid,
    };
    const cpuNow = (): Partial<Record<Side, CpuReading | null>> => {
      const now: Partial<Record<Side, CpuReading | null>> = {};
      for (const side of SIDES) {
        const pid = pids[side];
        if (pid !== undefined) now[side] = readCpu(pid);
      }
      return now;
    };
    const preloads = [
      { side: proxy, n: preloadBoth },
      { side: base, n: preloadBoth },
      { side: mine, n: preloadBoth + preloadThis },
    ].filter((p) => p.n > 0);
    for (const { side, n } of preloads) {
      const r = await closedLoop(target(side), {
        concurrency: 32,
        durationMs: Infinity,
        maxRequests: n,
        body: chatBody('bench-chat', false),
      });
      console.log(
        `preload: ${side.name} ${r.requests} non-streamed requests at ${r.rps} req/s, ${r.errors} errors`,
      );
    }
    await backToBack(P.warmup);
    clearWriteDelays();
    let before = cpuNow();
    services = new ServiceTurns<Side>();
    let from = epochMs();
    let fromUs = monotonicUs();
    const b2b = await backToBack(P.turns);
    /** Keeps a section's window, from `fromUs` to now, for the gateways' profiles. */
    const keepWindow = (title: string, r: Record<Side, StreamLoopResult>): void => {
      windows.push({
        title,
        fromUs,
        toUs: monotonicUs(),
        streams: { base: r.base.streams, this: r.this.streams },
      });
    };
    keepWindow('8 streams back to back', b2b);
    const backToBackDifference = show('8 streams back to back', b2b, cpuLines(pids, before, b2b));
    printServices(services, b2b);
    await showStages(from, epochMs(), WAVE);
    clearWriteDelays();
    before = cpuNow();
    services = new ServiceTurns<Side>();
    from = epochMs();
    fromUs = monotonicUs();
    const paced = await interleavedPacedStreamLoop(sides, {
      ratePerSec: 16,
      connections: 64,
      sliceMs: P.pacedTurnMs,
      slices: P.pacedTurns,
      body: chatBody('bench-paced', true),
      between,
    });
    keepWindow('16 streams/s at 50 tokens/s', paced);
    const pacedDifference = show(
      '16 streams/s at 50 tokens/s',
      paced,
      cpuLines(pids, before, paced),
    );
    printServices(services, paced);
    await showStages(from, epochMs());
    result = { backToBack: backToBackDifference, paced: pacedDifference };
  } finally {
    for (const c of children.reverse()) await c.stop().catch(() => undefined);
  }
  // The profiles are written as the gateways exit, so they are read after the run.
  if (profileDir !== null && gatewayPids !== null) {
    const base = await readThreadProfiles(profileDir, gatewayPids.base);
    const mine = await readThreadProfiles(profileDir, gatewayPids.this);
    console.log(`\ngateways' CPU profiles (a sample every ${profileIntervalUs} µs)`);
    for (const window of windows) printProfileDiff(window, base, mine);
    // Kept for a closer look (a function's callers, its lines): the figures above are sums.
    console.log(
      `  profiles kept in ${profileDir} (base process ${gatewayPids.base}, this` +
        ` ${gatewayPids.this}; sections' windows in their clock: ` +
        `${windows.map((w) => `${w.fromUs}–${w.toUs}`).join(', ')})`,
    );
  }
  return result;
}

// `--processes=N`: N runs, each with its own processes. A process keeps what it started with for
// the whole run (its heap's layout, what V8 optimised and when, which cores its threads share),
// and the rounds of one run cannot show how far starting it again moves a figure (meanInterval).
const differences: { backToBack: number; paced: number }[] = [];
try {
  for (let run = 1; run <= processes; run++) {
    if (processes > 1) console.log(`\nprocesses ${run} of ${processes}`);
    differences.push(await runOnce());
  }
} finally {
  if (stagesDir !== null) rmSync(stagesDir, { recursive: true, force: true });
}
if (processes > 1) {
  console.log(`\nthis − base over ${processes} runs, each with its processes started afresh (ms):`);
  for (const [title, key] of [
    ['8 streams back to back', 'backToBack'],
    ['16 streams/s at 50 tokens/s', 'paced'],
  ] as const) {
    const values = differences.map((d) => d[key]);
    console.log(
      `  ${title}: ${values.map((v) => signed(v, 2)).join(', ')}; mean ${signed(mean(values), 2)}` +
        ` (${intervalText(meanInterval(values)) ?? ''})`,
    );
  }
}
