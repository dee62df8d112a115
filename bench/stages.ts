// Reads the rows bench/stage-probe.ts wrote for one side and sums up a section of them: where a
// stream's first token waits, from its arrival at the server to its first byte to the client.
import { existsSync, readFileSync } from 'node:fs';
import { PATH_STEPS } from '../src/telemetry/path-steps.ts';
import { median } from './report.ts';

export interface StageRow {
  /** Arrival, epoch ms (performance.timeOrigin + now). */
  at: number;
  /** µs after arrival; null when it did not happen (no upstream call, no head). */
  made: number | null;
  head: number | null;
  first: number;
  /**
   * µs after arrival at which the first write's bytes went to the socket's handle (node corks a
   * response's writes to the end of the tick); null where the probe did not read it.
   */
  sent: number | null;
  /**
   * µs from the load generator's send of the request to its 'request' event on the server (the
   * two clocks are the same host's); null where the request was not stamped.
   */
  fromClient: number | null;
  /** Run-queue wait of the main thread between arrival and the upstream request, µs; null: unknown. */
  waitUs: number | null;
  ahead: number;
  /**
   * µs of the upstream request → head span the event loop was not idle (working for other
   * requests and streams while the head may have waited); null when the probe did not read it.
   */
  headBusyUs: number | null;
  /**
   * µs after arrival at which each step of a gateway's path ended (src/telemetry/path-steps.ts),
   * in path order; empty where the server publishes none (the bare proxy, an older gateway).
   */
  steps: { step: string; at: number }[];
}

export interface StageSummary {
  requests: number;
  /** Medians, µs. */
  toUpstream: number;
  upstreamToHead: number;
  /** Median of headBusyUs over the rows that have it; NaN when none has. */
  upstreamToHeadBusy: number;
  headToFirst: number;
  toFirst: number;
  /** Median µs from the first write's call to its bytes going to the socket's handle; NaN: none. */
  firstToSent: number;
  /** Median µs from the client's send to the server's 'request' event; NaN: unstamped. */
  fromClient: number;
  /** Requests that found no other request between arrival and first write, and their medians. */
  alone: number;
  aloneToUpstream: number;
  aloneToFirst: number;
  /** Share of requests whose path to the upstream waited for a core, and their mean wait (µs). */
  preempted: number | null;
  preemptedMeanUs: number | null;
}

function optional(s: string): number | null {
  const n = Number(s);
  return n < 0 ? null : n;
}

export function readStageRows(file: string): StageRow[] {
  if (!existsSync(file)) return [];
  const rows: StageRow[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const f = line.split('\t');
    if (f.length < 6) continue;
    rows.push({
      at: Number(f[0]),
      made: optional(f[1]!),
      head: optional(f[2]!),
      first: Number(f[3]),
      waitUs: optional(f[4]!),
      ahead: Number(f[5]),
      headBusyUs: f[6] === undefined ? null : optional(f[6]),
      steps: stepsOf(f[7] ?? ''),
      sent: f[8] === undefined ? null : optional(f[8]),
      fromClient: f[9] === undefined ? null : optional(f[9]),
    });
  }
  return rows;
}

/** "front:55.2,observer:75.0" → the steps with their µs after arrival. */
function stepsOf(text: string): StageRow['steps'] {
  if (text === '') return [];
  return text.split(',').map((pair) => {
    const colon = pair.lastIndexOf(':');
    return { step: pair.slice(0, colon), at: Number(pair.slice(colon + 1)) };
  });
}

/** report.ts's median, but NaN (printed '–') for no values rather than 0. */
function medianOf(values: number[]): number {
  return values.length === 0 ? Number.NaN : median(values);
}

/** Whether a request went upstream and had its head: the rows the stage medians are over. */
function wentUpstream(r: StageRow): boolean {
  return r.made !== null && r.head !== null;
}

/** The medians of a request's path (µs) over rows that went upstream. */
function pathMedians(
  rows: StageRow[],
): Pick<StageSummary, 'toUpstream' | 'upstreamToHead' | 'upstreamToHeadBusy' | 'toFirst'> {
  return {
    toUpstream: medianOf(rows.map((r) => r.made!)),
    upstreamToHead: medianOf(rows.map((r) => r.head! - r.made!)),
    upstreamToHeadBusy: medianOf(
      rows.flatMap((r) => (r.headBusyUs === null ? [] : [r.headBusyUs])),
    ),
    toFirst: medianOf(rows.map((r) => r.first)),
  };
}

/** The rows of requests that went upstream and arrived within [fromMs, toMs). */
export function summariseStages(rows: StageRow[], fromMs: number, toMs: number): StageSummary {
  const inside = rows.filter((r) => r.at >= fromMs && r.at < toMs && wentUpstream(r));
  const made = (r: StageRow): number => r.made!;
  const alone = inside.filter((r) => r.ahead === 0);
  const known = inside.filter((r) => r.waitUs !== null);
  const waited = known.filter((r) => r.waitUs! > 0);
  return {
    requests: inside.length,
    ...pathMedians(inside),
    headToFirst: medianOf(inside.map((r) => r.first - r.head!)),
    fromClient: medianOf(inside.flatMap((r) => (r.fromClient === null ? [] : [r.fromClient]))),
    firstToSent: medianOf(inside.flatMap((r) => (r.sent === null ? [] : [r.sent - r.first]))),
    alone: alone.length,
    aloneToUpstream: medianOf(alone.map(made)),
    aloneToFirst: medianOf(alone.map((r) => r.first)),
    preempted: known.length === 0 ? null : waited.length / known.length,
    preemptedMeanUs:
      waited.length === 0 ? null : waited.reduce((sum, r) => sum + r.waitUs!, 0) / waited.length,
  };
}

/** µs as printed: whole, or '–' where nothing was measured. */
function us(n: number): string {
  return Number.isNaN(n) ? '–' : String(Math.round(n));
}

export function stageLine(side: string, s: StageSummary): string {
  const preempted =
    s.preempted === null
      ? ''
      : `; path preempted ${(s.preempted * 100).toFixed(0)}%` +
        (s.preemptedMeanUs === null ? '' : ` (mean ${Math.round(s.preemptedMeanUs)} µs)`);
  return (
    `  ${side.padEnd(7)} client's send to arrival ${us(s.fromClient)}, ` +
    `to upstream ${us(s.toUpstream)}, upstream to head ${us(s.upstreamToHead)} ` +
    `(loop busy ${us(s.upstreamToHeadBusy)}), ` +
    `head to first write ${us(s.headToFirst)}, arrival to first write ${us(s.toFirst)}, ` +
    `its bytes to the kernel ${us(s.firstToSent)} ` +
    `(${s.requests} requests; ${s.alone} alone: to upstream ${us(s.aloneToUpstream)}, ` +
    `to first write ${us(s.aloneToFirst)})${preempted}`
  );
}

/** What the first requests of each turn (a burst after the side's idle spell) waited for. */
export interface WaveSummary {
  turns: number;
  requests: number;
  /** Medians over the wave's requests, µs. */
  toUpstream: number;
  upstreamToHead: number;
  upstreamToHeadBusy: number;
  toFirst: number;
  /**
   * Median over the turns of the time from the wave's first arrival to its last (µs): the
   * arrivals are sent together, so this is mostly the server's loop taking them in one by one.
   */
  arrivalSpread: number;
}

/**
 * The first `wave` requests of each turn within [fromMs, toMs): a turn starts at an arrival
 * `gapMs` or more after the one before it (the side idled while the others took their turns).
 * Session 48 split a slow host's back-to-back TTFT this way with a scratch script: both gateways'
 * first waves read 3.6–4.0 ms from upstream request to head against 1.4–1.7 for later waves (the
 * bare proxy 2.8 against 1.3), their loops busy 3.4–3.5 ms of it taking in the wave's later
 * arrivals, which spread over 2.1–3.5 ms (the proxy's 0.7).
 */
export function summariseFirstWave(
  rows: StageRow[],
  fromMs: number,
  toMs: number,
  wave: number,
  gapMs: number,
): WaveSummary {
  const inside = rows.filter((r) => r.at >= fromMs && r.at < toMs).sort((a, b) => a.at - b.at);
  const waves: StageRow[][] = [];
  let last = -Infinity;
  for (const r of inside) {
    if (r.at - last >= gapMs) waves.push([]);
    last = r.at;
    const current = waves[waves.length - 1]!;
    if (current.length < wave) current.push(r);
  }
  const upstream = waves.flat().filter(wentUpstream);
  return {
    turns: waves.length,
    requests: upstream.length,
    ...pathMedians(upstream),
    arrivalSpread: medianOf(
      waves.filter((w) => w.length > 1).map((w) => (w[w.length - 1]!.at - w[0]!.at) * 1000),
    ),
  };
}

export function waveLine(side: string, w: WaveSummary): string {
  return (
    `  ${side.padEnd(7)} to upstream ${us(w.toUpstream)}, upstream to head ${us(w.upstreamToHead)} ` +
    `(loop busy ${us(w.upstreamToHeadBusy)}), arrival to first write ${us(w.toFirst)}, ` +
    `arrivals spread ${us(w.arrivalSpread)} (${w.requests} requests in ${w.turns} turns)`
  );
}

/** The medians of each step of the gateways' paths, and the requests they are over. */
export interface StepSummary {
  requests: number;
  /** µs from the step before (arrival for the first), median over the requests that had it. */
  steps: { step: string; us: number }[];
}

/**
 * Each path step's own time over the requests that arrived within [fromMs, toMs), went upstream
 * and published steps: a step's end less the end of the one before it in that request (a step a
 * request skipped, such as the RPM hit of a model without a limit, counts in the next one), and
 * last `upstream`, from the last step to the upstream request. Null when no request had steps.
 */
export function summariseSteps(rows: StageRow[], fromMs: number, toMs: number): StepSummary | null {
  const inside = rows.filter(
    (r) => r.at >= fromMs && r.at < toMs && wentUpstream(r) && r.steps.length > 0,
  );
  if (inside.length === 0) return null;
  // A step this checkout does not name (another checkout's gateway) comes after the named ones.
  const order: string[] = [...PATH_STEPS];
  const spans = new Map<string, number[]>(order.map((step) => [step, []]));
  for (const r of inside) {
    let before = 0;
    for (const { step, at } of r.steps) {
      let list = spans.get(step);
      if (list === undefined) {
        list = [];
        spans.set(step, list);
        order.push(step);
      }
      list.push(at - before);
      before = at;
    }
  }
  order.push('upstream');
  spans.set(
    'upstream',
    inside.map((r) => r.made! - r.steps[r.steps.length - 1]!.at),
  );
  return {
    requests: inside.length,
    steps: order
      .filter((step) => spans.get(step)!.length > 0)
      .map((step) => ({ step, us: medianOf(spans.get(step)!) })),
  };
}

export function stepLine(side: string, s: StepSummary | null): string {
  if (s === null) return `  ${side.padEnd(7)} – (no steps published)`;
  const steps = s.steps.map(({ step, us: t }) => `${step} ${us(t)}`).join(', ');
  return `  ${side.padEnd(7)} ${steps} (${s.requests} requests)`;
}
