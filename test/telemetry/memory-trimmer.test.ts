// The memory trimmer: after a burst, once the event loop is idle, the gateway gives the burst's
// memory back (V8 alone never does in a server; decision 0018).
import { createServer } from 'node:http';
import { getHeapStatistics } from 'node:v8';
import { afterAll, describe, expect, it } from 'vitest';
import {
  MemoryTrimmer,
  processProbe,
  type MemoryTrim,
  type MemoryTrimProbe,
  type MemoryTrimSettings,
} from '../../src/telemetry/memory-trimmer.ts';
import { RequestTraffic } from '../../src/telemetry/request-traffic.ts';
import { E2E_CONFIG, startHarness, type Harness } from '../e2e/harness.ts';
import { parsePrometheusText, sampleValue } from './prom-text.ts';

const MB = 1024 * 1024;
const SETTINGS: MemoryTrimSettings = {
  enabled: true,
  checkMs: 5000,
  idleBelow: 0.05,
  minReclaimBytes: 64 * MB,
};

/** A process whose load and RSS the test sets; a collection brings RSS to `afterCollect`. */
function fakeProcess(rss: number): MemoryTrimProbe & {
  load: number;
  arrived: number;
  open: number;
  rss: number;
  heap: number;
  heapAfterCollect: number;
  afterCollect: number;
  collections: number;
  /** What each allocator trim reports; the steps of each trim in order. */
  allocatorReleases: boolean | null;
  steps: string[];
  advance(ms: number): void;
} {
  let now = 0;
  return {
    load: 0,
    arrived: 0,
    open: 0,
    rss,
    heap: 50 * MB,
    heapAfterCollect: 50 * MB,
    afterCollect: rss,
    collections: 0,
    allocatorReleases: null,
    steps: [],
    utilization() {
      return this.load;
    },
    traffic() {
      const seen = { arrived: this.arrived, open: this.open };
      this.arrived = 0;
      return seen;
    },
    rssBytes() {
      return this.rss;
    },
    heapTotalBytes() {
      return this.heap;
    },
    collect() {
      this.steps.push('collect');
      this.collections++;
      this.rss = this.afterCollect;
      this.heap = this.heapAfterCollect;
      now += 120;
    },
    releaseAllocator() {
      this.steps.push('allocator');
      now += 5;
      return this.allocatorReleases;
    },
    nowMs: () => now,
    advance(ms) {
      now += ms;
    },
  };
}

/** Spends the start-up's trim (start-up counts as a burst) and the minute after it. */
function pastStartup(t: MemoryTrimmer, p: ReturnType<typeof fakeProcess>): void {
  const rss = p.rss;
  p.afterCollect = rss;
  expect(t.check()).toBeNull();
  expect(t.check()).not.toBeNull();
  p.advance(60_000);
  p.collections = 0;
  p.steps = [];
}

describe('the memory trimmer', () => {
  it('trims once after start, when the process first idles (start-up is a burst)', () => {
    // A fresh embedded gateway idle for 12 s read 230.6 MB; one trim took it to 178.1 MB.
    const p = fakeProcess(230 * MB);
    const t = new MemoryTrimmer(
      () => SETTINGS,
      p,
      () => undefined,
    );
    // A request in the first period: not yet two quiet periods in a row.
    p.arrived = 1;
    expect(t.check()).toBeNull();
    expect(t.check()).toBeNull();
    p.afterCollect = 178 * MB;
    expect(t.check()?.rssAfterBytes).toBe(178 * MB);
    // Spent: idle on, nothing grew, no second one however long it waits.
    p.advance(120_000);
    expect(t.check()).toBeNull();
    expect(p.collections).toBe(1);
  });

  it('trims once the loop is idle and RSS grew, and measures growth from the trimmed level', () => {
    const p = fakeProcess(200 * MB);
    const trims: MemoryTrim[] = [];
    const t = new MemoryTrimmer(
      () => SETTINGS,
      p,
      (x) => trims.push(x),
    );

    // The burst: RSS grows, but the loop is busy.
    p.load = 0.95;
    p.rss = 440 * MB;
    expect(t.check()).toBeNull();
    // Load falls to a trickle: still above idle.
    p.load = 0.2;
    expect(t.check()).toBeNull();
    // Idle: one trim, back to 190 MB: the collection, then glibc's free pages (decision 0046).
    p.load = 0.01;
    p.afterCollect = 190 * MB;
    p.allocatorReleases = true;
    expect(t.check()).toEqual({
      rssBeforeBytes: 440 * MB,
      rssAfterBytes: 190 * MB,
      pauseMs: 125,
      allocatorReleased: true,
    });
    expect(trims).toHaveLength(1);
    expect(p.steps).toEqual(['collect', 'allocator']);
    // Still idle, and nothing grew since: no second trim.
    p.rss = 230 * MB;
    expect(t.check()).toBeNull();
    // 64 MB over the trimmed level is worth one again, but not within a minute of the last.
    p.rss = 254 * MB + 1;
    p.advance(50_000);
    expect(t.check()).toBeNull();
    p.advance(10_000);
    p.afterCollect = 200 * MB;
    expect(t.check()?.rssAfterBytes).toBe(200 * MB);
    expect(p.collections).toBe(2);
  });

  it('does nothing when disabled, and follows RSS down when it falls by itself', () => {
    const p = fakeProcess(300 * MB);
    let settings = { ...SETTINGS };
    const t = new MemoryTrimmer(
      () => settings,
      p,
      () => undefined,
    );
    pastStartup(t, p);
    settings = { ...SETTINGS, enabled: false };
    p.rss = 500 * MB;
    expect(t.check()).toBeNull();
    expect(p.collections).toBe(0);

    settings = { ...SETTINGS };
    p.rss = 100 * MB; // e.g. a worker's memory was freed
    expect(t.check()).toBeNull();
    p.rss = 100 * MB + 64 * MB; // growth counts from 100 MB now
    expect(t.check()).not.toBeNull();
  });

  it("trims after V8's heap grew even when RSS started high", () => {
    // PGlite's first WASM compile can leave the start level above what a load later reaches.
    const p = fakeProcess(520 * MB);
    const t = new MemoryTrimmer(
      () => SETTINGS,
      p,
      () => undefined,
    );
    pastStartup(t, p);
    // Moderate load (not a burst): the heap grew by 40 MB only.
    p.load = 0.3;
    p.rss = 560 * MB;
    p.heap = 90 * MB;
    expect(t.check()).toBeNull();
    p.load = 0;
    expect(t.check()).toBeNull();
    // More: 100 MB over the start; idle afterwards, though the heap shrank a little.
    p.load = 0.3;
    p.heap = 150 * MB;
    expect(t.check()).toBeNull();
    p.load = 0;
    p.heap = 140 * MB;
    p.afterCollect = 480 * MB;
    expect(t.check()?.rssAfterBytes).toBe(480 * MB);
    // Trimmed: the heap's floor is its size now.
    p.heap = 100 * MB;
    expect(t.check()).toBeNull();
  });

  it('trims once the loop is idle after a busy period, whatever the memory figures say', () => {
    // A heap full of start-up garbage at start made a 130 MB heap after load look like 30 MB.
    const p = fakeProcess(300 * MB);
    p.heap = 100 * MB;
    const t = new MemoryTrimmer(
      () => SETTINGS,
      p,
      () => undefined,
    );
    p.load = 0.9;
    p.heap = 130 * MB;
    expect(t.check()).toBeNull();
    p.load = 0.01;
    p.afterCollect = 250 * MB;
    expect(t.check()?.rssAfterBytes).toBe(250 * MB);
    // The burst is spent: idle again, nothing grew, no second trim.
    expect(t.check()).toBeNull();
    expect(p.collections).toBe(1);
  });

  it('trims only after two whole periods with no request arriving and none open', () => {
    // The bench's latency turns: 500 req/s for 1 s in every 4 read as an idle loop (under 5%),
    // and a 126 ms trim inside a turn took p99 to +21 ms.
    const p = fakeProcess(300 * MB);
    const t = new MemoryTrimmer(
      () => SETTINGS,
      p,
      () => undefined,
    );
    p.load = 0.9;
    p.rss = 500 * MB;
    p.arrived = 40_000;
    expect(t.check()).toBeNull();
    // A quiet loop, but requests still arrived in the period.
    p.load = 0.02;
    p.arrived = 500;
    expect(t.check()).toBeNull();
    // None arrived, but a long stream is still open.
    p.open = 1;
    expect(t.check()).toBeNull();
    // Quiet at last, but one quiet period is only a lull: the bench's turns leave 6 s gaps.
    p.open = 0;
    expect(t.check()).toBeNull();
    // A request in the next period starts the count again.
    p.arrived = 1;
    expect(t.check()).toBeNull();
    expect(t.check()).toBeNull();
    // The second whole quiet period in a row: the burst's memory goes back.
    p.afterCollect = 220 * MB;
    expect(t.check()?.rssAfterBytes).toBe(220 * MB);
  });

  it("collects for real without exposing gc on the process's global", () => {
    const exposedBefore = 'gc' in globalThis;
    const probe = processProbe(new RequestTraffic(createServer()));
    if (probe === null) throw new Error('Node 24 can collect on request');
    expect('gc' in globalThis).toBe(exposedBefore);
    // Garbage that a scavenge alone would not take back: promoted, then dropped.
    let keep: object[] = [];
    for (let i = 0; i < 400_000; i++) keep.push({ i, s: `row ${i}`, a: [i] });
    const grown = getHeapStatistics().total_heap_size;
    keep = [];
    probe.collect();
    expect(keep).toHaveLength(0);
    expect(getHeapStatistics().total_heap_size).toBeLessThan(grown);
    expect(probe.utilization()).toBeGreaterThanOrEqual(0);
    expect(probe.utilization()).toBeLessThanOrEqual(1);
  });
});

describe('a gateway after a burst', () => {
  let h: Harness | null = null;
  afterAll(async () => {
    await h?.close();
  });

  it('returns the memory once idle and counts it on /metrics', async () => {
    h = await startHarness({
      files: (mockUrl) => {
        const files = E2E_CONFIG(mockUrl);
        files['gateway.yaml'] =
          `${files['gateway.yaml'] ?? ''}  memory_trim: { check_seconds: 0.05, idle_below: 1, min_reclaim_mb: 1 }\n`;
        return files;
      },
    });
    // The "burst": memory the test process grows by (a vitest worker is this gateway's process).
    let burst: string[] = [];
    for (let i = 0; i < 300_000; i++) burst.push(`payload ${i} `.repeat(4));
    expect(burst).toHaveLength(300_000);
    burst = [];

    let trims = 0;
    for (let i = 0; i < 100 && trims === 0; i++) {
      await new Promise((r) => setTimeout(r, 50));
      const text = await (await fetch(`${h.gateway.url}/metrics`)).text();
      trims = sampleValue(parsePrometheusText(text), 'switchyard_memory_trims_total', {}) ?? 0;
    }
    expect(trims).toBeGreaterThanOrEqual(1);
  });
});
