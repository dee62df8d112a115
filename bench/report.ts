// The shape of a benchmark run's results (bench/results/*.json), the side-by-side table with
// ratios to the direct call and to the bare proxy, and the goals measured against (not asserted).
import type { LimitsBenchRow } from './limits-bench.ts';
import type { ClosedLoopResult, OpenLoopResult, StreamLoopResult } from './load.ts';
import type { ProfileSummary } from './cpuprofile-summary.ts';
import { addedP50Interval } from './round-interval.ts';
import type { ConfigBenchResult } from './procs/config.ts';
import type { StoreBenchRow } from './store-bench.ts';
import type { TelemetryBenchRow } from './telemetry-bench.ts';

export type SideId = 'direct' | 'proxy' | 'gateway' | 'gatewayPgRedis';

export const SIDE_LABELS: Record<SideId, string> = {
  direct: 'direct',
  proxy: 'bare proxy',
  gateway: 'gw PGlite+mem',
  gatewayPgRedis: 'gw PG+Redis',
};

export interface MemorySample {
  requests: number;
  rssMB: number;
  heapUsedMB: number;
  /** V8's committed heap: ~28 MB on the gateway after its idle trim, 100+ MB without one. */
  heapTotalMB: number;
}

export interface OpenStreamsResult {
  streams: number;
  /** Streams that had their first event when the sample was taken. */
  opened: number;
  openMs: number;
  /** How long the side idled before the streams opened (rssBeforeMB is read after it). */
  idleBeforeMs: number;
  rssBeforeMB: number;
  /** RSS the moment the last stream opened. */
  rssOpenMB: number;
  /** The highest of the RSS readings taken every 500 ms while every stream was open (the goal). */
  rssOpenMaxMB: number;
  openSamples: number;
  rssAfterMB: number;
  /** V8's committed heap before the streams and with them open (did the idle trim run?). */
  heapTotalBeforeMB: number;
  heapTotalOpenMB: number;
  ok: number;
  errors: number;
  firstError: string | null;
}

export interface HostStall {
  samples: number;
  p50: number;
  p99: number;
  max: number;
}

export interface BenchResults {
  startedAt: string;
  finishedAt: string;
  quick: boolean;
  machine: {
    cores: number;
    cpuModel: string;
    node: string;
    platform: string;
    totalMemMB: number;
    loadAvg1m: number;
  };
  params: Record<string, number | string>;
  skipped: Partial<Record<SideId, string>>;
  sides: SideId[];
  throughput: Partial<Record<SideId, ClosedLoopResult>>;
  latency: {
    ratePerSec: number;
    results: Partial<Record<SideId, OpenLoopResult>>;
    /**
     * How late an idle process's 2 ms timer woke while each side was measured (ms): the host's
     * own stalls, a floor under that side's tail (bench/procs/canary.ts).
     */
    hostStall: Partial<Record<SideId, HostStall>>;
    /** Memory trims (100–210 ms pauses) each gateway ran during the latency section. */
    memoryTrims: Partial<Record<SideId, number>>;
  };
  stream: Partial<Record<SideId, StreamLoopResult>>;
  /** Streams at a model's pace (absent in results written before session 11). */
  pacedStream?: Partial<Record<SideId, StreamLoopResult>>;
  memory: {
    afterWarmup: Partial<Record<SideId, MemorySample>>;
    /** The first sample is the warm gateway before the run; `requests` is how many were sent. */
    longRun: { side: SideId; requests: number; samples: MemorySample[] };
    openStreams: Partial<Record<SideId, OpenStreamsResult>>;
  };
  config: ConfigBenchResult;
  limits: LimitsBenchRow[];
  store: StoreBenchRow[];
  telemetry: TelemetryBenchRow[];
  profile: ProfileSummary & { file: string; side: SideId; rps: number };
}

/** The sides that are a gateway (the others are the direct call and the bare proxy). */
export const GATEWAYS: SideId[] = ['gateway', 'gatewayPgRedis'];

/** A number with its sign, to `digits` places (MB to one, ms to two). */
export function signed(v: number, digits = 1): string {
  return `${v >= 0 ? '+' : ''}${v.toFixed(digits)}`;
}

/** The middle value (the mean of the two middle ones for an even count); 0 for none. */
export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] ?? 0)
    : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

function fmt(v: number | null | undefined, digits: number): string {
  return v === null || v === undefined || !Number.isFinite(v) ? '–' : v.toFixed(digits);
}

interface Row {
  label: string;
  unit: string;
  digits: number;
  value: (side: SideId) => number | null;
  /** 'ratio': gateway ÷ reference; 'diff': gateway − reference (latency, ms). */
  compare: 'ratio' | 'diff';
}

/** The paced section's load, e.g. '16 streams/s at 50 tokens/s'. */
function pace(r: BenchResults): string {
  const gap = Number(r.params.pacedGapMs);
  return `${r.params.pacedRate} streams/s at ${Math.round(1000 / gap)} tokens/s`;
}

function rows(r: BenchResults): Row[] {
  const t = (s: SideId) => r.throughput[s] ?? null;
  const l = (s: SideId) => r.latency.results[s] ?? null;
  /** A figure over one side's slices' p99s; null where there were none (an older result). */
  const slices = (s: SideId, of: (v: number[]) => number): number | null => {
    const v = l(s)?.sliceP99Ms ?? [];
    return v.length > 0 ? of(v) : null;
  };
  const st = (s: SideId) => r.stream[s] ?? null;
  const ps = (s: SideId) => r.pacedStream?.[s] ?? null;
  /** A stream section's CPU a stream: all threads, and off the main thread (helpers, workers). */
  const cpuRows = (section: string, of: (s: SideId) => StreamLoopResult | null): Row[] => [
    {
      label: `${section} CPU/stream, all threads`,
      unit: 'µs',
      digits: 0,
      value: (s) => of(s)?.cpuPerStream?.allUs ?? null,
      compare: 'diff',
    },
    {
      label: `${section} CPU/stream, helpers+workers`,
      unit: 'µs',
      digits: 0,
      value: (s) => {
        const cpu = of(s)?.cpuPerStream;
        return cpu === undefined || cpu === null ? null : cpu.helpersUs + cpu.workersUs;
      },
      compare: 'diff',
    },
    {
      // Every side reads it (the direct call and the proxy: the servers' background), so the
      // Postgres gateway's column over the proxy's is what it adds there (session 68).
      label: `${section} CPU/stream, host's Postgres+Redis`,
      unit: 'µs',
      digits: 0,
      value: (s) => {
        const cpu = of(s)?.serviceCpuPerStream;
        return cpu === undefined || cpu === null ? null : cpu.postgresUs + cpu.redisUs;
      },
      compare: 'diff',
    },
  ];
  const c = r.params.concurrency;
  const rate = r.latency.ratePerSec;
  const mem = (s: SideId) => r.memory.afterWarmup[s]?.rssMB ?? null;
  return [
    {
      label: `non-stream throughput, c=${c}`,
      unit: 'req/s',
      digits: 0,
      value: (s) => t(s)?.rps ?? null,
      compare: 'ratio',
    },
    {
      label: 'host steal during throughput',
      unit: '%',
      digits: 1,
      value: (s) => t(s)?.hostStealPct ?? null,
      compare: 'diff',
    },
    {
      label: `non-stream latency @${rate}/s p50`,
      unit: 'ms',
      digits: 3,
      value: (s) => l(s)?.latency.p50 ?? null,
      compare: 'diff',
    },
    {
      label: `non-stream latency @${rate}/s p99`,
      unit: 'ms',
      digits: 3,
      value: (s) => l(s)?.latency.p99 ?? null,
      compare: 'diff',
    },
    {
      label: `non-stream latency @${rate}/s max`,
      unit: 'ms',
      digits: 3,
      value: (s) => l(s)?.latency.max ?? null,
      compare: 'diff',
    },
    {
      label: `non-stream latency @${rate}/s p99, median of the slices'`,
      unit: 'ms',
      digits: 3,
      value: (s) => slices(s, median),
      compare: 'diff',
    },
    {
      label: `non-stream latency @${rate}/s p99, highest slice's`,
      unit: 'ms',
      digits: 3,
      value: (s) => slices(s, (v) => Math.max(...v)),
      compare: 'diff',
    },
    {
      label: `host stall during @${rate}/s p99`,
      unit: 'ms',
      digits: 3,
      value: (s) => r.latency.hostStall[s]?.p99 ?? null,
      compare: 'diff',
    },
    {
      label: `host stall during @${rate}/s max`,
      unit: 'ms',
      digits: 3,
      value: (s) => r.latency.hostStall[s]?.max ?? null,
      compare: 'diff',
    },
    {
      label: `memory trims during @${rate}/s`,
      unit: '',
      digits: 0,
      value: (s) => r.latency.memoryTrims[s] ?? null,
      compare: 'diff',
    },
    {
      label: `host steal during @${rate}/s`,
      unit: '%',
      digits: 1,
      value: (s) => l(s)?.hostStealPct ?? null,
      compare: 'diff',
    },
    {
      label: 'stream TTFT p50',
      unit: 'ms',
      digits: 3,
      value: (s) => st(s)?.ttft.p50 ?? null,
      compare: 'diff',
    },
    {
      label: 'stream TTFT p99',
      unit: 'ms',
      digits: 3,
      value: (s) => st(s)?.ttft.p99 ?? null,
      compare: 'diff',
    },
    {
      // Each turn's first 8 streams: the burst that meets a side after its idle spell.
      label: 'stream TTFT p50, first wave of a turn',
      unit: 'ms',
      digits: 3,
      value: (s) => st(s)?.firstWaveTtft?.p50 ?? null,
      compare: 'diff',
    },
    {
      // The rest of each turn: the closed loop's steady state, 8 streams back to back.
      label: 'stream TTFT p50, later waves of a turn',
      unit: 'ms',
      digits: 3,
      value: (s) => st(s)?.laterWavesTtft?.p50 ?? null,
      compare: 'diff',
    },
    {
      label: 'stream TTLT p50',
      unit: 'ms',
      digits: 3,
      value: (s) => st(s)?.ttlt.p50 ?? null,
      compare: 'diff',
    },
    {
      label: 'stream TTLT p99',
      unit: 'ms',
      digits: 3,
      value: (s) => st(s)?.ttlt.p99 ?? null,
      compare: 'diff',
    },
    {
      label: 'host steal during streams',
      unit: '%',
      digits: 1,
      value: (s) => st(s)?.hostStealPct ?? null,
      compare: 'diff',
    },
    ...cpuRows('stream', st),
    {
      label: `paced stream TTFT p50 (${pace(r)})`,
      unit: 'ms',
      digits: 3,
      value: (s) => ps(s)?.ttft.p50 ?? null,
      compare: 'diff',
    },
    {
      label: 'paced stream TTFT p99',
      unit: 'ms',
      digits: 3,
      value: (s) => ps(s)?.ttft.p99 ?? null,
      compare: 'diff',
    },
    {
      label: 'paced stream connections opened',
      unit: '',
      digits: 0,
      value: (s) => ps(s)?.connections ?? null,
      compare: 'ratio',
    },
    {
      label: 'host steal during paced streams',
      unit: '%',
      digits: 1,
      value: (s) => ps(s)?.hostStealPct ?? null,
      compare: 'diff',
    },
    ...cpuRows('paced', ps),
    { label: 'RSS after warm-up', unit: 'MB', digits: 1, value: mem, compare: 'ratio' },
  ];
}

/** The side-by-side table: one column per side, then each gateway against direct and proxy. */
export function sideBySide(r: BenchResults): string[] {
  const sides = r.sides;
  const cols = [...sides.map((s) => SIDE_LABELS[s])];
  const cmp: string[] = [];
  for (const g of GATEWAYS) {
    if (!sides.includes(g)) continue;
    const short = g === 'gateway' ? 'gw' : 'pg';
    cmp.push(`${short} vs direct`, `${short} vs proxy`);
  }
  const w = 15;
  const out: string[] = [];
  out.push(
    `${'metric'.padEnd(34)} ${'unit'.padEnd(5)} ${[...cols, ...cmp].map((h) => h.padStart(w)).join('')}`,
  );
  for (const row of rows(r)) {
    const values = sides.map((s) => fmt(row.value(s), row.digits).padStart(w));
    const comparisons: string[] = [];
    for (const g of GATEWAYS) {
      if (!sides.includes(g)) continue;
      for (const ref of ['direct', 'proxy'] as const) {
        const a = row.value(g);
        const b = row.value(ref);
        let text = '–';
        if (a !== null && b !== null && (b !== 0 || row.compare === 'diff')) {
          text =
            row.compare === 'ratio'
              ? `${(a / b).toFixed(2)}×`
              : `${a - b >= 0 ? '+' : ''}${(a - b).toFixed(row.digits)}`;
        }
        comparisons.push(text.padStart(w));
      }
    }
    out.push(
      `${row.label.padEnd(34)} ${row.unit.padEnd(5)} ${values.join('')}${comparisons.join('')}`,
    );
  }
  return out;
}

export interface GoalCheck {
  goal: string;
  side: SideId;
  measured: string;
  met: boolean | null;
}

/**
 * ' (rounds min–max, median m)' of per-round values, with '; ' and `more` before the parenthesis
 * closes when given, or '' when there are fewer than two.
 */
function spread(values: number[], show: (x: number) => string, more: string | null = null): string {
  if (values.length < 2) return '';
  const sorted = [...values].sort((x, y) => x - y);
  const tail = more === null ? '' : `; ${more}`;
  return ` (rounds ${show(sorted[0]!)}–${show(sorted.at(-1)!)}, median ${show(median(sorted))}${tail})`;
}

/** '95% interval a to b' of an addedP50Interval, or null for none. */
export function intervalText(interval: [number, number] | null): string | null {
  return interval === null
    ? null
    : `95% interval ${signed(interval[0], 2)} to ${signed(interval[1], 2)}`;
}

/**
 * The side's rate over the proxy's in each round (one turn of each side a round, taken within
 * seconds of each other), as ' (rounds min–max%, median m%)'. The goal is judged on the whole
 * window; the spread shows how far one window can move it (session 21: 0.80× and 0.67× in two
 * runs of the same code).
 */
function roundSpread(
  side: ClosedLoopResult | undefined,
  proxy: ClosedLoopResult | undefined,
): string {
  const a = side?.turnRps ?? [];
  const b = proxy?.turnRps ?? [];
  const shares: number[] = [];
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (b[i]! > 0) shares.push((a[i]! / b[i]!) * 100);
  }
  return spread(shares, (x) => `${x.toFixed(0)}%`);
}

/**
 * A gateway's TTFT p50 over the proxy's, round by round, as the TTFT goals' spread: one 8-turn
 * section's added p50 read +0.06 to +0.85 ms on the same code in twelve runs (session 30), and a
 * full run read +1.08; the spread says whether a miss was the whole section or a few turns of it.
 * The 95% interval, from rounds drawn again (round-interval.ts), says how far another run like
 * this one could read; the goal is still judged on the figure itself.
 */
function ttftSpread(gw: StreamLoopResult | undefined, px: StreamLoopResult | undefined): string {
  const a = gw?.turnTtftP50 ?? [];
  const b = px?.turnTtftP50 ?? [];
  const added: number[] = [];
  for (let i = 0; i < Math.min(a.length, b.length); i++) added.push(a[i]! - b[i]!);
  const interval = addedP50Interval(gw?.turnTtfts ?? [], px?.turnTtfts ?? []);
  return spread(added, (x) => signed(x, 2), intervalText(interval));
}

/** The issue's goals, measured; reported, never asserted. */
export function goals(r: BenchResults): GoalCheck[] {
  const out: GoalCheck[] = [];
  const proxy = r.throughput.proxy?.rps ?? null;
  const lp = r.latency.results.proxy?.latency ?? null;
  for (const g of GATEWAYS) {
    if (!r.sides.includes(g)) continue;
    const rps = r.throughput[g]?.rps ?? null;
    if (rps !== null && proxy !== null) {
      const share = rps / proxy;
      out.push({
        goal: 'throughput ≥ 70% of bare proxy',
        side: g,
        measured: `${(share * 100).toFixed(0)}%${roundSpread(r.throughput[g], r.throughput.proxy)}`,
        met: share >= 0.7,
      });
    }
    const lg = r.latency.results[g]?.latency ?? null;
    if (lg !== null && lp !== null) {
      const d50 = lg.p50 - lp.p50;
      const d99 = lg.p99 - lp.p99;
      out.push({
        goal: 'added p50 < 0.5 ms over proxy',
        side: g,
        measured: `${d50.toFixed(3)} ms`,
        met: d50 < 0.5,
      });
      out.push({
        goal: 'added p99 < 2 ms over proxy',
        side: g,
        measured: `${d99.toFixed(3)} ms`,
        met: d99 < 2,
      });
    }
    // The TTFT goal, once per stream section, each on its own figures.
    const ttft = [
      [`${r.params.streamConcurrency} streams back to back`, r.stream[g], r.stream.proxy],
      [pace(r), r.pacedStream?.[g], r.pacedStream?.proxy],
    ] as const;
    for (const [load, gw, px] of ttft) {
      if (gw === undefined || px === undefined) continue;
      const d = gw.ttft.p50 - px.ttft.p50;
      out.push({
        goal: `TTFT p50 within 1 ms of proxy, ${load}`,
        side: g,
        measured: `${d.toFixed(3)} ms${ttftSpread(gw, px)}`,
        met: d <= 1,
      });
    }
  }
  const lr = r.memory.longRun;
  const first = lr.samples[0];
  const last = lr.samples[lr.samples.length - 1];
  if (first !== undefined && last !== undefined) {
    const heapGrowth = last.heapUsedMB - first.heapUsedMB;
    const rssGrowth = last.rssMB - first.rssMB;
    // Flat: the GC'd heap grows by under 10% of its warm size, comparing the median of the first
    // three samples with that of the last three. One sample after a full GC moves by ±1.5 MB
    // (what is in flight at that moment), 10% of a 27 MB heap is 2.7 (decision 0008).
    const heads = lr.samples.slice(0, 3).map((s) => s.heapUsedMB);
    const tails = lr.samples.slice(-3).map((s) => s.heapUsedMB);
    const trend = median(tails) - median(heads);
    out.push({
      goal: `memory flat over ${lr.requests} requests`,
      side: lr.side,
      measured: `heap ${signed(heapGrowth)} MB (medians ${signed(trend)}), RSS ${signed(rssGrowth)} MB`,
      met: trend < median(heads) * 0.1,
    });
  }
  for (const side of ['gateway', 'gatewayPgRedis'] as const) {
    const os = r.memory.openStreams[side];
    if (os === undefined) continue;
    out.push({
      goal: `${os.streams} open streams < 300 MB RSS`,
      side,
      measured: `${os.rssOpenMaxMB.toFixed(1)} MB (${os.opened} open, max of ${os.openSamples})`,
      met: os.opened === os.streams ? os.rssOpenMaxMB < 300 : null,
    });
  }
  return out;
}

export function printReport(r: BenchResults): void {
  const m = r.machine;
  console.log('');
  console.log(
    `Switchyard benchmark ${r.quick ? '(quick) ' : ''}${r.startedAt}: ${m.cores} cores (${m.cpuModel}), Node ${m.node}, load ${m.loadAvg1m}`,
  );
  for (const [side, why] of Object.entries(r.skipped)) console.log(`  skipped ${side}: ${why}`);
  console.log('');
  for (const line of sideBySide(r)) console.log(line);
  console.log('');
  console.log('goals (reported, not asserted)');
  for (const g of goals(r)) {
    const met = g.met === null ? 'n/a' : g.met ? 'met' : 'NOT met';
    console.log(
      `  ${g.goal.padEnd(38)} ${SIDE_LABELS[g.side].padEnd(14)} ${g.measured.padEnd(26)} ${met}`,
    );
  }
  console.log('');
  const lr = r.memory.longRun;
  console.log(
    `memory over the long run (${SIDE_LABELS[lr.side]}, after GC): requests → RSS MB / heap MB`,
  );
  console.log(
    `  ${lr.samples.map((s) => `${s.requests}: ${s.rssMB.toFixed(0)}/${s.heapUsedMB.toFixed(1)}`).join('  ')}`,
  );
  for (const [side, os] of Object.entries(r.memory.openStreams)) {
    console.log(
      `open streams (${SIDE_LABELS[side as SideId]}): ${os.opened}/${os.streams} open in ${os.openMs} ms; RSS ${os.idleBeforeMs > 0 ? `(idle ${os.idleBeforeMs / 1000} s) ` : ''}${os.rssBeforeMB.toFixed(1)} → ${os.rssOpenMB.toFixed(1)} MB open (highest ${os.rssOpenMaxMB.toFixed(1)} over ${os.openSamples} readings) → ${os.rssAfterMB.toFixed(1)} MB after (V8 heap ${os.heapTotalBeforeMB.toFixed(1)} → ${os.heapTotalOpenMB.toFixed(1)} MB); ${os.errors} errors`,
    );
  }
  const c = r.config;
  console.log('');
  console.log(
    `config: ${c.models} models × ${c.channelsPerModel} channels (${(c.yamlBytes / 1e6).toFixed(1)} MB YAML)`,
  );
  console.log(
    `  compileDir ${c.compileColdMs} ms cold, ${c.compileWarmMs} ms warm; table heap ${(c.tableHeapBytes / 1e6).toFixed(1)} MB (peak +${(c.compilePeakHeapBytes / 1e6).toFixed(1)} MB)`,
  );
  console.log(
    `  main thread per reload: deserialize ${c.deserializeMs} ms + deepFreeze ${c.deepFreezeMs} ms (worker serialize ${c.serializeMs} ms)`,
  );
  const all = [c.firstReload, ...c.reloads];
  console.log(
    `  hot reload (TableHolder): ${all.map((x) => `${x.reloadMs} ms, stall max ${x.maxDelayMs} ms`).join('; ')} (idle floor ${c.idleMaxDelayMs} ms)`,
  );
  console.log('');
  const p = r.profile;
  console.log(
    `gateway CPU profile (${SIDE_LABELS[p.side]}, non-stream closed loop at ${p.rps} req/s): ${p.file}`,
  );
  console.log('  top places by self time');
  for (const x of p.places.slice(0, 12))
    console.log(`    ${x.percent.toFixed(1).padStart(5)}%  ${x.name}`);
  console.log('  top functions by self time');
  for (const x of p.functions.slice(0, 15))
    console.log(`    ${x.percent.toFixed(1).padStart(5)}%  ${x.name}`);
}
