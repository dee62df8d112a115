// The load generator (runs in the parent): closed loop at fixed concurrency, open loop at a fixed
// rate with latency measured from each request's scheduled send time (no coordinated omission),
// streams timed to their first `data:` byte and to their end, and long-held slow streams.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import { cpuTicks, StealCount } from './host-steal.ts';
import type { CpuPerStream, ServiceCpuPerStream } from './proc-cpu.ts';
import { balancedRounds } from './turn-order.ts';

export interface Target {
  /** Origin (gateway, proxy or the upstream itself), e.g. http://127.0.0.1:8080. */
  url: string;
  key: string;
}

/** Milliseconds, rounded to the microsecond. */
export interface Percentiles {
  n: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

const CHAT_PATH = '/v1/chat/completions';
const DATA = Buffer.from('data:');

/**
 * A chat request of the usual shape: a system prompt and a ~600-character question (≈ 1 kB of
 * JSON), max_tokens set, usage asked for when streaming.
 */
export function chatBody(model: string, stream: boolean): string {
  const question =
    'Summarise the trade-offs between a sliding-window log and a token bucket for per-account ' +
    'rate limits in an API gateway that runs as several stateless processes behind a load ' +
    'balancer with Redis holding shared state. Mention memory per bucket, accuracy at the ' +
    'window edge, the number of Redis round trips per request, and what happens when Redis is ' +
    'unreachable for a few seconds. Answer in at most five short paragraphs, without code, ' +
    'and end with a one-line recommendation for a team of ten engineers.';
  return JSON.stringify({
    model,
    messages: [
      { role: 'system', content: 'You are a concise senior backend engineer.' },
      { role: 'user', content: question },
    ],
    max_tokens: 512,
    temperature: 0.2,
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
  });
}

/**
 * Now in CLOCK_MONOTONIC µs, the clock process.hrtime reads in every process on the host and V8's
 * CPU profiles use: what windows handed between processes (canary slices, profile sections) are in.
 */
export const monotonicUs = (): number => Number(process.hrtime.bigint() / 1000n);

const round3 = (ms: number): number => Math.round(ms * 1000) / 1000;

/** The q-quantile of sorted samples as every figure here takes it: the ceil(q·n)-th smallest. */
export function sortedAt(sorted: Float64Array, q: number): number {
  return sorted[Math.max(0, Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1))] ?? 0;
}

export function percentiles(samples: number[]): Percentiles {
  if (samples.length === 0) return { n: 0, mean: 0, p50: 0, p90: 0, p99: 0, max: 0 };
  const s = Float64Array.from(samples).sort();
  const at = (q: number): number => sortedAt(s, q);
  let sum = 0;
  for (const v of s) sum += v;
  return {
    n: s.length,
    mean: round3(sum / s.length),
    p50: round3(at(0.5)),
    p90: round3(at(0.9)),
    p99: round3(at(0.99)),
    max: round3(s[s.length - 1] ?? 0),
  };
}

function headers(target: Target): Record<string, string> {
  const h: Record<string, string> = {
    authorization: `Bearer ${target.key}`,
    'content-type': 'application/json',
  };
  if (stampSends) h[SENT_HEADER] = (performance.timeOrigin + performance.now()).toFixed(3);
  return h;
}

/** The epoch ms (µs precision) at which the load generator sent a request, when stamped. */
export const SENT_HEADER = 'x-bench-sent';
let stampSends = false;

/**
 * Every request from now on carries the time it was sent (SENT_HEADER), for bench/stage-probe.ts
 * to tell the wait before a server's 'request' event from the server's own path (`bench:ab
 * --stages`). Off in `npm run bench`: its requests stay as they were.
 */
export function stampSendTimes(on: boolean): void {
  if (on === stampSends) return;
  stampSends = on;
  if (on) subscribe(SEND_HEADERS, onSendHeaders);
  else unsubscribe(SEND_HEADERS, onSendHeaders);
}

const SEND_HEADERS = 'undici:client:sendHeaders';
/** By origin: µs from a stamped request's send to undici writing its head to the socket. */
const writeDelays = new Map<string, number[]>();
const SENT_IN_HEAD = new RegExp(`\r\n${SENT_HEADER}: ([0-9.]+)\r\n`, 'i');

function onSendHeaders(message: unknown): void {
  const { request, headers } = message as { request: { origin?: unknown }; headers: string };
  const m = SENT_IN_HEAD.exec(headers);
  if (m === null) return;
  const origin = String(request.origin);
  let list = writeDelays.get(origin);
  if (list === undefined) writeDelays.set(origin, (list = []));
  list.push((performance.timeOrigin + performance.now() - Number(m[1])) * 1000);
}

/** Forgets the write delays so far (a section's measuring starts). */
export function clearWriteDelays(): void {
  writeDelays.clear();
}

/**
 * The µs each stamped request to `origin` waited in the load generator, from its send to undici
 * writing its head (a free connection, the client's own loop), since the last call; emptied.
 */
export function takeWriteDelays(origin: string): number[] {
  const list = writeDelays.get(origin) ?? [];
  writeDelays.delete(origin);
  return list;
}

function countData(chunk: Buffer): number {
  let n = 0;
  let i = chunk.indexOf(DATA);
  while (i !== -1) {
    n++;
    i = chunk.indexOf(DATA, i + DATA.length);
  }
  return n;
}

interface OneResult {
  ok: boolean;
  /** First body bytes containing `data:` (streams), ms after `t0`; null when none came. */
  firstMs: number | null;
  endMs: number;
  events: number;
  error: string | null;
}

/** One request, read to its end; times are measured from t0 (the scheduled or actual send). */
async function one(pool: Pool, target: Target, body: string, t0: number): Promise<OneResult> {
  try {
    const res = await pool.request({
      method: 'POST',
      path: CHAT_PATH,
      headers: headers(target),
      body,
    });
    let firstMs: number | null = null;
    let events = 0;
    let text = '';
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      const n = countData(chunk);
      if (n > 0 && firstMs === null) firstMs = performance.now() - t0;
      events += n;
      if (res.statusCode !== 200 && text.length < 300) text += chunk.toString('utf8');
    }
    const endMs = performance.now() - t0;
    const ok = res.statusCode === 200;
    return {
      ok,
      firstMs,
      endMs,
      events,
      error: ok ? null : `HTTP ${res.statusCode}: ${text.slice(0, 300)}`,
    };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    return { ok: false, firstMs: null, endMs: performance.now() - t0, events: 0, error: message };
  }
}

export interface ClosedLoopResult {
  concurrency: number;
  elapsedMs: number;
  requests: number;
  errors: number;
  firstError: string | null;
  rps: number;
  /** Each turn's own rate, in the order taken: one a round in the interleaved sections. */
  turnRps: number[];
  latency: Percentiles;
  /**
   * The host's steal over this side's turns, % of the machine's CPU time (host-steal.ts); null
   * without /proc/stat, absent before session 56.
   */
  hostStealPct?: number | null;
}

/**
 * Untimed work before every turn, so that no turn pays for the one before it. The bench collects
 * the garbage of the two processes every side shares (the load generator and the upstream mock):
 * the rotating order of the time kept the sides' cyclic order, so the side after the fastest one
 * always inherited its garbage in both. Two identical gateways measured 2,658 and 3,694 req/s
 * that way (the first always ran after the bare proxy), and 2,532 and 2,464 with the garbage
 * collected between turns (decision 0008, session 8 addendum). It is told the side whose turn
 * comes next (bench:cpu reads each process's CPU around that side's turns).
 */
export type BetweenTurns<K extends string = string> = (next: K) => Promise<void>;

/** A loop of `concurrency` taken in turns: `slices` turns of `sliceMs` a side. */
interface TurnLoopOptions<K extends string = string> {
  concurrency: number;
  sliceMs: number;
  slices: number;
  body: string;
  between?: BetweenTurns<K>;
}

/**
 * Measures several sides in turns: `rounds` rounds, one side at a time, in an order that changes
 * every round so that each side follows each other side equally often (decision 0008, session 5;
 * decision 0056). Each side has its own pool of `connections` and its own sink,
 * which `slice` fills a turn at a time and `result` sums up at the end. `between` runs before
 * every turn, outside its time.
 */
async function inTurns<K extends string, Sink, R extends { hostStealPct?: number | null }>(
  sides: readonly { id: K; target: Target }[],
  opts: { connections: number; rounds: number; between?: BetweenTurns<K> | undefined },
  newSink: () => Sink,
  slice: (pool: Pool, target: Target, sink: Sink, id: K) => Promise<void>,
  result: (sink: Sink, connects: number) => R,
): Promise<Record<K, R>> {
  const runs = sides.map((s) => ({
    ...s,
    pool: new Pool(s.target.url, { connections: opts.connections, pipelining: 1 }),
    sink: newSink(),
    connects: 0,
    steal: new StealCount(),
  }));
  // A middle that drops idle connections makes its side reconnect after each idle spell: counted
  // so the report shows it (decision 0027).
  for (const run of runs) run.pool.on('connect', () => run.connects++);
  const order = balancedRounds(runs.length);
  for (let round = 0; round < opts.rounds; round++) {
    for (const index of order[round % order.length]!) {
      const run = runs[index]!;
      if (opts.between !== undefined) await opts.between(run.id);
      const before = cpuTicks();
      await slice(run.pool, run.target, run.sink, run.id);
      run.steal.add(before, cpuTicks());
    }
  }
  const out = {} as Record<K, R>;
  for (const run of runs) {
    await run.pool.close();
    const r = result(run.sink, run.connects);
    r.hostStealPct = run.steal.percent();
    out[run.id] = r;
  }
  return out;
}

/** One side measured once: inTurns with a single side and a single round. */
async function alone<Sink, R extends { hostStealPct?: number | null }>(
  target: Target,
  connections: number,
  newSink: () => Sink,
  slice: (pool: Pool, target: Target, sink: Sink) => Promise<void>,
  result: (sink: Sink) => R,
): Promise<R> {
  const out = await inTurns(
    [{ id: 'alone', target }],
    { connections, rounds: 1 },
    newSink,
    slice,
    result,
  );
  return out.alone;
}

/** What one side's closed-loop slices gathered. */
interface ClosedLoopSink {
  latencies: number[];
  sent: number;
  errors: number;
  firstError: string | null;
  elapsedMs: number;
  turnRps: number[];
}

/**
 * `concurrency` loops on `pool`, each sending its next request when the last one ended, for
 * `durationMs` or until `maxRequests` have been sent in all.
 */
async function closedSlice(
  pool: Pool,
  target: Target,
  opts: { concurrency: number; durationMs: number; body: string; maxRequests?: number },
  sink: ClosedLoopSink,
): Promise<void> {
  const max = opts.maxRequests ?? Infinity;
  let sent = 0;
  const answeredBefore = sink.latencies.length;
  const started = performance.now();
  const deadline = started + opts.durationMs;
  const loop = async (): Promise<void> => {
    while (sent < max && performance.now() < deadline) {
      sent++;
      const r = await one(pool, target, opts.body, performance.now());
      if (r.ok) sink.latencies.push(r.endMs);
      else {
        sink.errors++;
        sink.firstError ??= r.error;
      }
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency }, loop));
  const elapsed = performance.now() - started;
  sink.sent += sent;
  sink.elapsedMs += elapsed;
  sink.turnRps.push(Math.round((sink.latencies.length - answeredBefore) / (elapsed / 1000)));
}

function closedResult(concurrency: number, sink: ClosedLoopSink): ClosedLoopResult {
  return {
    concurrency,
    elapsedMs: Math.round(sink.elapsedMs),
    requests: sink.latencies.length,
    errors: sink.errors,
    firstError: sink.firstError,
    rps: Math.round(sink.latencies.length / (sink.elapsedMs / 1000)),
    turnRps: sink.turnRps,
    latency: percentiles(sink.latencies),
    hostStealPct: null,
  };
}

const newClosedSink = (): ClosedLoopSink => ({
  latencies: [],
  sent: 0,
  errors: 0,
  firstError: null,
  elapsedMs: 0,
  turnRps: [],
});

/**
 * `concurrency` loops, each sending its next request when the last one ended, for `durationMs`
 * or until `maxRequests` have been sent in total.
 */
export async function closedLoop(
  target: Target,
  opts: { concurrency: number; durationMs: number; body: string; maxRequests?: number },
): Promise<ClosedLoopResult> {
  return alone(
    target,
    opts.concurrency,
    newClosedSink,
    (pool, t, sink) => closedSlice(pool, t, opts, sink),
    (sink) => closedResult(opts.concurrency, sink),
  );
}

/**
 * The closed loop of several sides taken in turns, as interleavedOpenLoop does for the open loop:
 * `slices` rounds of `sliceMs` a side, the order changing every round, each side's requests and
 * time summed. A host spell (decision 0008, session 5) that would have fallen on one side's ten
 * seconds now falls on every side: one run measured the direct call at 5,200 req/s against
 * 17,000–27,000 in the others, and a gateway at 1.00× the proxy.
 */
export async function interleavedClosedLoop<K extends string>(
  sides: readonly { id: K; target: Target }[],
  opts: TurnLoopOptions<K>,
): Promise<Record<K, ClosedLoopResult>> {
  return inTurns(
    sides,
    { connections: opts.concurrency, rounds: opts.slices, between: opts.between },
    newClosedSink,
    (pool, target, sink) =>
      closedSlice(
        pool,
        target,
        { concurrency: opts.concurrency, durationMs: opts.sliceMs, body: opts.body },
        sink,
      ),
    (sink) => closedResult(opts.concurrency, sink),
  );
}

export interface OpenLoopResult {
  ratePerSec: number;
  scheduled: number;
  requests: number;
  errors: number;
  firstError: string | null;
  /** Completions per second over the whole run, scheduled start to last completion. */
  achievedRps: number;
  /** From the scheduled send time to the end of the body. */
  latency: Percentiles;
  /**
   * Each slice's own p99 (ms), in the order run: whether a pooled tail came from one turn or from
   * all of them (the Postgres+Redis gateway's +2.63 ms p99 of session 34 could not be placed).
   */
  sliceP99Ms: number[];
  /**
   * The host's steal over this side's turns, % of the machine's CPU time (host-steal.ts); null
   * without /proc/stat, absent before session 56.
   */
  hostStealPct?: number | null;
}

/** What one side's open-loop slices gathered. */
interface OpenLoopSink {
  latencies: number[];
  sliceP99Ms: number[];
  scheduled: number;
  errors: number;
  firstError: string | null;
  elapsedMs: number;
}

const newSink = (): OpenLoopSink => ({
  latencies: [],
  sliceP99Ms: [],
  scheduled: 0,
  errors: 0,
  firstError: null,
  elapsedMs: 0,
});

function sinkResult(ratePerSec: number, sink: OpenLoopSink): OpenLoopResult {
  return {
    ratePerSec,
    scheduled: sink.scheduled,
    requests: sink.latencies.length,
    errors: sink.errors,
    firstError: sink.firstError,
    achievedRps: Math.round(sink.latencies.length / (sink.elapsedMs / 1000)),
    latency: percentiles(sink.latencies),
    sliceP99Ms: sink.sliceP99Ms,
    hostStealPct: null,
  };
}

/**
 * Sends request i at start + i/rate whether or not earlier ones have answered, each timed from
 * its scheduled send time: a late request's wait counts in its latency, so a stall shows as the
 * stall, not as one slow sample. Resolves once every request has ended.
 */
async function atRate(
  pool: Pool,
  target: Target,
  opts: { ratePerSec: number; durationMs: number; body: string },
  record: (r: OneResult) => void,
): Promise<{ total: number; elapsedMs: number }> {
  const total = Math.max(1, Math.round((opts.ratePerSec * opts.durationMs) / 1000));
  const interval = 1000 / opts.ratePerSec;
  const pending: Promise<void>[] = [];
  const start = performance.now() + 5;
  let next = 0;
  while (next < total) {
    const now = performance.now();
    while (next < total && start + next * interval <= now) {
      const scheduled = start + next * interval;
      next++;
      pending.push(one(pool, target, opts.body, scheduled).then(record));
    }
    if (next < total) await sleep(Math.max(0, start + next * interval - performance.now()));
  }
  await Promise.all(pending);
  return { total, elapsedMs: performance.now() - start };
}

/** One turn of the open loop: requests at a fixed rate, each timed to the end of its body. */
async function openSlice(
  pool: Pool,
  target: Target,
  opts: { ratePerSec: number; durationMs: number; body: string },
  sink: OpenLoopSink,
): Promise<void> {
  const from = sink.latencies.length;
  const { total, elapsedMs } = await atRate(pool, target, opts, (r) => {
    if (r.ok) sink.latencies.push(r.endMs);
    else {
      sink.errors++;
      sink.firstError ??= r.error;
    }
  });
  sink.scheduled += total;
  sink.elapsedMs += elapsedMs;
  sink.sliceP99Ms.push(percentiles(sink.latencies.slice(from)).p99);
}

/** One side's open loop at a fixed rate, for `durationMs`. */
export async function openLoop(
  target: Target,
  opts: { ratePerSec: number; durationMs: number; body: string; connections: number },
): Promise<OpenLoopResult> {
  return alone(
    target,
    opts.connections,
    newSink,
    (pool, t, sink) => openSlice(pool, t, opts, sink),
    (sink) => sinkResult(opts.ratePerSec, sink),
  );
}

/** Requests at a fixed rate, for several sides in turns (the open loop, the paced streams). */
interface AtRateTurnOptions {
  ratePerSec: number;
  sliceMs: number;
  slices: number;
  body: string;
  connections: number;
  between?: BetweenTurns;
}

/**
 * The open loop of several sides taken in turns: `slices` rounds, each side `sliceMs` a round
 * (the order changing every round), each side's latencies pooled. On a shared host, stalls come
 * in spells of seconds (another tenant, the hypervisor): run one side's ten seconds after
 * another's and a spell lands in one side's tail and not the other's, which is how the same code
 * measured +5 and +21 ms of added p99 in two runs. `onSlice` hears each slice's side and its
 * window in process.hrtime µs (for the host-stall canary).
 */
export async function interleavedOpenLoop<K extends string>(
  sides: readonly { id: K; target: Target }[],
  opts: AtRateTurnOptions & { onSlice?: (id: K, fromUs: number, toUs: number) => void },
): Promise<Record<K, OpenLoopResult>> {
  return inTurns(
    sides,
    { connections: opts.connections, rounds: opts.slices, between: opts.between },
    newSink,
    async (pool, target, sink, id) => {
      const fromUs = monotonicUs();
      await openSlice(
        pool,
        target,
        { ratePerSec: opts.ratePerSec, durationMs: opts.sliceMs, body: opts.body },
        sink,
      );
      opts.onSlice?.(id, fromUs, monotonicUs());
    },
    (sink) => sinkResult(opts.ratePerSec, sink),
  );
}

export interface StreamLoopResult {
  concurrency: number;
  /** Connections the load generator opened to this side over the section's turns. */
  connections: number;
  streams: number;
  errors: number;
  firstError: string | null;
  /** `data:` events per stream (the last stream's count): chunks + role + usage + [DONE]. */
  eventsPerStream: number;
  ttft: Percentiles;
  ttlt: Percentiles;
  /**
   * The side's process CPU a stream over its own turns (bench/proc-cpu.ts), set by the full run;
   * null for the direct side (no process of its own) or off Linux. Absent before session 64.
   */
  cpuPerStream?: CpuPerStream | null;
  /**
   * The host's Postgres and Redis CPU a stream over this side's turns (bench/proc-cpu.ts's
   * ServiceTurns), set by the full run: what a gateway on them adds to the same 2 cores beside its
   * own process. The other sides read the servers' background. Null off Linux; absent before
   * session 68.
   */
  serviceCpuPerStream?: ServiceCpuPerStream | null;
  /**
   * Each turn's own TTFT p50, in the order taken: one a round, so a gateway's turn can be set
   * against the bare proxy's of the same round (the report's spread of the TTFT goals). Absent in
   * results written before session 30.
   */
  turnTtftP50?: number[];
  /**
   * Each turn's TTFTs (ms, to the µs), in the order taken: the report draws rounds from them for
   * the TTFT goals' 95% interval (bench/round-interval.ts). Absent before session 50.
   */
  turnTtfts?: number[][];
  /**
   * TTFT of each turn's first `concurrency` streams (a closed loop's first wave, the burst that
   * meets a side after its idle spell between turns), null for paced turns; absent before session
   * 47. A gateway's first wave waits on whatever went cold in the spell (decision 0059).
   */
  firstWaveTtft?: Percentiles | null;
  /**
   * TTFT of the rest of each turn's streams (the closed loop's steady state, after its first
   * wave), null for paced turns; absent before session 57. With the first wave it says where a
   * section's gap is: on session 57's host one run's was all in the first wave (later waves under
   * the proxy's) and another's mostly in the later waves.
   */
  laterWavesTtft?: Percentiles | null;
  /**
   * The host's steal over this side's turns, % of the machine's CPU time (host-steal.ts); null
   * without /proc/stat, absent before session 56.
   */
  hostStealPct?: number | null;
}

/** What one side's stream slices gathered. */
interface StreamSink {
  ttft: number[];
  /** Where each turn's streams begin in `ttft`. */
  turnStarts: number[];
  ttlt: number[];
  errors: number;
  events: number;
  firstError: string | null;
}

const newStreamSink = (): StreamSink => ({
  ttft: [],
  turnStarts: [],
  ttlt: [],
  errors: 0,
  events: 0,
  firstError: null,
});

/** Adds one stream's times to the sink, or counts it as an error. */
function recordStream(sink: StreamSink, r: OneResult): void {
  if (r.ok && r.firstMs !== null) {
    sink.ttft.push(r.firstMs);
    sink.ttlt.push(r.endMs);
    sink.events = r.events;
  } else {
    sink.errors++;
    sink.firstError ??= r.error ?? 'a stream with no data: event';
  }
}

/** `concurrency` loops of streamed requests on `pool` for `durationMs`, each timed to its first `data:` and to its end. */
async function streamSlice(
  pool: Pool,
  target: Target,
  opts: { concurrency: number; durationMs: number; body: string },
  sink: StreamSink,
): Promise<void> {
  sink.turnStarts.push(sink.ttft.length);
  const deadline = performance.now() + opts.durationMs;
  const loop = async (): Promise<void> => {
    while (performance.now() < deadline) {
      recordStream(sink, await one(pool, target, opts.body, performance.now()));
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency }, loop));
}

/**
 * A closed loop's TTFTs turn by turn, split into each turn's first wave and the rest. Each loop's
 * first stream is recorded before its second starts: a turn's first `concurrency` records are its
 * first wave, the burst that meets a side after its idle spell between turns.
 */
export function splitWaves(
  turns: readonly (readonly number[])[],
  concurrency: number,
): { first: number[]; later: number[] } {
  const first: number[] = [];
  const later: number[] = [];
  for (const turn of turns) {
    for (let i = 0; i < turn.length; i++) (i < concurrency ? first : later).push(turn[i]!);
  }
  return { first, later };
}

function streamResult(
  concurrency: number,
  sink: StreamSink,
  connects: number,
  firstWave: boolean,
): StreamLoopResult {
  const turns = sink.turnStarts.map((from, i) => sink.ttft.slice(from, sink.turnStarts[i + 1]));
  const waves = firstWave ? splitWaves(turns, concurrency) : null;
  return {
    concurrency,
    connections: connects,
    streams: sink.ttft.length,
    errors: sink.errors,
    firstError: sink.firstError,
    eventsPerStream: sink.events,
    ttft: percentiles(sink.ttft),
    ttlt: percentiles(sink.ttlt),
    turnTtftP50: turns.map((turn) => percentiles(turn).p50),
    turnTtfts: turns.map((turn) => turn.map(round3)),
    firstWaveTtft: waves === null ? null : percentiles(waves.first),
    laterWavesTtft: waves === null ? null : percentiles(waves.later),
    hostStealPct: null,
  };
}

/**
 * A closed loop of streamed requests, each timed to its first `data:` and to its end, for several
 * sides in `slices` turns of `sliceMs` each, the order changing every round, so a spell of the
 * host lands on every side alike (as interleavedOpenLoop does for latency).
 */
export async function interleavedStreamLoop<K extends string>(
  sides: readonly { id: K; target: Target }[],
  opts: TurnLoopOptions,
): Promise<Record<K, StreamLoopResult>> {
  return inTurns(
    sides,
    { connections: opts.concurrency, rounds: opts.slices, between: opts.between },
    newStreamSink,
    (pool, target, sink) =>
      streamSlice(
        pool,
        target,
        { concurrency: opts.concurrency, durationMs: opts.sliceMs, body: opts.body },
        sink,
      ),
    (sink, connects) => streamResult(opts.concurrency, sink, connects, true),
  );
}

/**
 * Streams started at a fixed rate (the open loop's schedule, `atRate`), each timed from its
 * scheduled start to its first `data:` and to its end, for several sides in turns. Streams that
 * all start at once (a closed loop of equal streams) arrive in bursts, and a first token then
 * waits behind the burst's other requests on every side. `concurrency` in the result is the
 * pool's size, the most streams a side could hold open.
 */
export async function interleavedPacedStreamLoop<K extends string>(
  sides: readonly { id: K; target: Target }[],
  opts: AtRateTurnOptions,
): Promise<Record<K, StreamLoopResult>> {
  return inTurns(
    sides,
    { connections: opts.connections, rounds: opts.slices, between: opts.between },
    newStreamSink,
    async (pool, target, sink) => {
      sink.turnStarts.push(sink.ttft.length);
      await atRate(
        pool,
        target,
        { ratePerSec: opts.ratePerSec, durationMs: opts.sliceMs, body: opts.body },
        (r) => recordStream(sink, r),
      );
    },
    (sink, connects) => streamResult(opts.connections, sink, connects, false),
  );
}

export interface HeldStreams {
  /** Streams that have received their first `data:` event so far. */
  opened(): number;
  /** Resolves when every stream has its first event, or after `timeoutMs`; ms since the start. */
  allOpen(timeoutMs: number): Promise<number>;
  /** Resolves when every stream has ended. */
  finished(): Promise<{ ok: number; errors: number; firstError: string | null }>;
}

/** Opens `count` streams at once and keeps reading them (they end when the upstream ends them). */
export function holdStreams(target: Target, count: number, body: string): HeldStreams {
  const pool = new Pool(target.url, { connections: count, pipelining: 1 });
  let opened = 0;
  let ok = 0;
  let errors = 0;
  let firstError: string | null = null;
  const started = performance.now();
  const all = Array.from({ length: count }, async () => {
    try {
      const res = await pool.request({
        method: 'POST',
        path: CHAT_PATH,
        headers: headers(target),
        body,
      });
      let first = true;
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        if (first && countData(chunk) > 0) {
          first = false;
          opened++;
        }
      }
      if (res.statusCode === 200) ok++;
      else {
        errors++;
        firstError ??= `HTTP ${res.statusCode}`;
      }
    } catch (err) {
      errors++;
      firstError ??= err instanceof Error ? err.message : String(err);
    }
  });
  const done = Promise.all(all).then(async () => {
    await pool.close();
    return { ok, errors, firstError };
  });
  return {
    opened: () => opened,
    async allOpen(timeoutMs) {
      const until = started + timeoutMs;
      while (opened + errors < count && performance.now() < until) await sleep(20);
      return Math.round(performance.now() - started);
    },
    finished: () => done,
  };
}
