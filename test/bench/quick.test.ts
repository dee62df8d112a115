// `npm run bench:quick` end to end: every section of the benchmark runs and leaves a number in the
// results JSON. Speed is never asserted here (it lives in bench/ and docs/performance.md).
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import type { BenchResults, SideId } from '../../bench/report.ts';

const RUN = fileURLToPath(new URL('../../bench/run.ts', import.meta.url));

function runQuick(out: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [RUN, '--quick', '--out', out], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    child.on('exit', (code) => resolve({ code, output }));
  });
}

const dir = await mkdtemp(join(tmpdir(), 'switchyard-bench-test-'));
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('npm run bench:quick', () => {
  // ~60 s alone; 120 s was not enough inside the whole suite on a slow host (session 5: the suite
  // took 386 s instead of ~230 and this run 120+).
  it('measures every section and writes the results JSON', { timeout: 300_000 }, async () => {
    const out = join(dir, 'quick.json');
    const run = await runQuick(out);
    expect(run.code, run.output.slice(-3000)).toBe(0);
    if (process.platform === 'linux') {
      expect(run.output).toMatch(/stream CPU\/stream, all threads\s+µs\s+–\s+\d+/);
      expect(run.output).toMatch(/paced CPU\/stream, helpers\+workers\s+µs\s+–\s+\d+/);
    }
    const r = JSON.parse(await readFile(out, 'utf8')) as BenchResults;

    expect(r.machine.cores).toBeGreaterThan(0);
    expect(r.machine.node).toMatch(/^v\d+/);
    const gatewaySides: SideId[] = ['gateway', 'gatewayPgRedis'];
    if (r.skipped.gatewayPgRedis !== undefined) {
      console.warn(`[bench] the Postgres+Redis gateway was skipped: ${r.skipped.gatewayPgRedis}`);
    }
    const sides = r.sides;
    expect(sides).toEqual(expect.arrayContaining(['direct', 'proxy', 'gateway']));
    for (const side of sides) {
      expect(r.throughput[side]?.rps, side).toBeGreaterThan(0);
      expect(r.latency.results[side]?.latency.p50, side).toBeGreaterThan(0);
      expect(r.latency.results[side]?.latency.p99, side).toBeGreaterThan(0);
      // Each slice's own p99, so a pooled tail can be placed in its turn.
      const sliceP99s = r.latency.results[side]?.sliceP99Ms ?? [];
      expect(sliceP99s.length, side).toBe(r.params.latencySlices);
      expect(Math.max(...sliceP99s), side).toBeGreaterThan(0);
      // The host-stall canary woke during each side's slices (lateness itself may be 0).
      expect(r.latency.hostStall[side]?.samples, side).toBeGreaterThan(0);
      expect(r.stream[side]?.ttft.p50, side).toBeGreaterThan(0);
      expect(r.stream[side]?.ttlt.p50, side).toBeGreaterThan(0);
      expect(r.pacedStream?.[side]?.ttft.p50, side).toBeGreaterThan(0);
      // One TTFT p50 a turn, for the report's spread by round beside the TTFT goals.
      expect(r.stream[side]?.turnTtftP50?.length, side).toBe(r.params.streamSlices);
      expect(r.pacedStream?.[side]?.turnTtftP50?.length, side).toBe(r.params.pacedSlices);
      for (const p50 of r.stream[side]?.turnTtftP50 ?? []) expect(p50, side).toBeGreaterThan(0);
      // Each turn's first wave apart (the burst after the side's idle spell) and the rest of its
      // streams, together every stream of the section; neither when paced.
      const stream = r.stream[side];
      expect(stream?.firstWaveTtft?.p50, side).toBeGreaterThan(0);
      expect(stream?.laterWavesTtft?.p50, side).toBeGreaterThan(0);
      expect((stream?.firstWaveTtft?.n ?? 0) + (stream?.laterWavesTtft?.n ?? 0), side).toBe(
        stream?.streams,
      );
      expect(r.pacedStream?.[side]?.firstWaveTtft, side).toBeNull();
      expect(r.pacedStream?.[side]?.laterWavesTtft, side).toBeNull();
      // Each process's CPU a stream over both stream sections (Linux); the direct side has none.
      for (const section of [r.stream[side], r.pacedStream?.[side]]) {
        const cpu = section?.cpuPerStream;
        if (side === 'direct' || process.platform !== 'linux') {
          expect(cpu ?? null, side).toBeNull();
          continue;
        }
        expect(cpu?.allUs, side).toBeGreaterThan(0);
        expect(cpu!.allUs, side).toBeGreaterThanOrEqual(cpu!.mainUs);
        expect(cpu!.helpersUs + cpu!.workersUs, side).toBeLessThanOrEqual(cpu!.allUs);
      }
      // The host's Postgres and Redis CPU a stream over each side's turns, every side (Linux).
      for (const section of [r.stream[side], r.pacedStream?.[side]]) {
        const services = section?.serviceCpuPerStream;
        if (process.platform !== 'linux') {
          expect(services ?? null, side).toBeNull();
          continue;
        }
        expect(services?.postgresUs, side).toBeGreaterThanOrEqual(0);
        expect(services?.redisUs, side).toBeGreaterThanOrEqual(0);
      }
      // Counted from the load generator's pools, so a middle that drops idle connections shows.
      expect(r.pacedStream?.[side]?.connections, side).toBeGreaterThan(0);
      // The host's steal over each section's turns: a share, or null where /proc/stat is absent.
      for (const steal of [
        r.throughput[side]?.hostStealPct,
        r.latency.results[side]?.hostStealPct,
        r.stream[side]?.hostStealPct,
        r.pacedStream?.[side]?.hostStealPct,
      ]) {
        if (process.platform === 'linux') {
          expect(steal, side).toBeGreaterThanOrEqual(0);
          expect(steal, side).toBeLessThanOrEqual(100);
        } else expect(steal, side).toBeNull();
      }
      if (side !== 'direct') expect(r.memory.afterWarmup[side]?.rssMB, side).toBeGreaterThan(0);
    }
    for (const side of gatewaySides.filter((s) => sides.includes(s))) {
      // A gateway that answered errors would still have a rate: every request must succeed.
      expect(r.throughput[side]?.errors, side).toBe(0);
      expect(r.stream[side]?.errors, side).toBe(0);
      expect(r.pacedStream?.[side]?.errors, side).toBe(0);
    }
    expect(r.latency.ratePerSec).toBeGreaterThan(0);
    expect(r.memory.longRun.samples.length).toBeGreaterThan(1);
    for (const s of r.memory.longRun.samples) expect(s.heapUsedMB).toBeGreaterThan(0);
    for (const side of ['proxy', 'gateway'] as const) {
      const os = r.memory.openStreams[side];
      expect(os?.opened, side).toBe(os?.streams);
      expect(os?.rssOpenMB, side).toBeGreaterThan(0);
      expect(os?.rssOpenMaxMB, side).toBeGreaterThanOrEqual(os?.rssOpenMB ?? Infinity);
    }
    expect(r.config.compileColdMs).toBeGreaterThan(0);
    expect(r.config.tableHeapBytes).toBeGreaterThan(0);
    expect(r.config.firstReload.maxDelayMs).toBeGreaterThan(0);
    expect(r.limits.length).toBeGreaterThan(0);
    for (const row of r.limits) expect(row.opsPerSec).toBeGreaterThan(0);
    expect(r.store.length).toBeGreaterThan(0);
    for (const row of r.store) expect(row.opsPerSec).toBeGreaterThan(0);
    expect(r.telemetry.length).toBeGreaterThan(0);
    for (const row of r.telemetry) expect(row.nsPerOp).toBeGreaterThan(0);
    expect(r.profile.busyMs).toBeGreaterThan(0);
    expect(r.profile.functions.length).toBeGreaterThan(0);
  });
});
