// Gives back the memory of a burst once the burst is over. V8's own memory reducer never fires in
// a Node server: it waits for a low allocation rate that it samples only at collections, so an
// idle process keeps reading "high alloc". After 10 s at 5,000 req/s the gateway held 370–445 MB
// of RSS (53 MB of live heap) for as long as it then idled (decision 0018). When two whole check
// periods saw no request and a nearly idle event loop, after a busy period or after memory grew
// past its level at the last trim, one memory-reducing full collection (V8's "last resort":
// compacts the old space, shrinks the young generation, releases pooled pages) takes it back:
// 371 → 190 MB, a 100–210 ms pause. Then glibc's malloc_trim gives back the free pages inside its
// arenas, which free() never returns (231 → 182 MB, decision 0046).
import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { GatewayEntry } from '../table/types.ts';
import type { AllocatorTrim } from './allocator-trim.ts';
import type { RequestTraffic, TrafficSince } from './request-traffic.ts';

/**
 * checkMs: how often to look, and the period the event loop must have been idle over; idleBelow:
 * the event-loop utilisation (0–1) under which it counts as idle; minReclaimBytes: what must look
 * reclaimable for a trim: RSS grown over its level after the last trim (or at start), or V8's
 * heap grown (its largest size seen since then over its size then). The second catches a burst
 * when RSS started high (PGlite's first WASM compile briefly holds 250–500 MB).
 */
export type MemoryTrimSettings = GatewayEntry['memoryTrim'];

export interface MemoryTrim {
  rssBeforeBytes: number;
  rssAfterBytes: number;
  /** The whole pause: the collection and the allocator trim. */
  pauseMs: number;
  /** Whether the allocator gave pages back; null where it cannot be asked (no addon). */
  allocatorReleased: boolean | null;
}

/**
 * A check period at or above this event-loop utilisation counts as a burst: once the loop is idle
 * again the trimmer runs even if its memory figures missed the growth (RSS and V8's heap at start
 * can already be high: a heap still full of start-up garbage read 100 MB, and a 130 MB heap after
 * load then looked like only 30 MB of growth).
 */
const BURST_UTILIZATION = 0.5;

/**
 * Whole check periods in a row with no request before a trim (10 s at the default 5 s). One was
 * not enough: the benchmark's turns leave one side idle for up to 6 s between its turns, a trim
 * then fired in such a gap (session 7 full run), and its 100–210 ms pause can run into the next
 * turn's first requests. The same holds for any traffic with short lulls.
 */
const QUIET_PERIODS = 2;

/**
 * Trims at least this far apart. A period counts as idle only when no request arrived in it, so a
 * trim never lands on live traffic; this spacing is the second guard, against a process whose
 * memory figures keep looking reclaimable (an idle Postgres+Redis gateway's pollers alone use
 * 3–4% of the event loop).
 */
const MIN_TRIM_INTERVAL_MS = 60_000;

/** What the trimmer reads and does; the real process by default, injected in tests. */
export interface MemoryTrimProbe {
  /** The event loop's utilisation since the previous call (0–1). */
  utilization(): number;
  /** Requests that arrived since the previous call, and those open now. */
  traffic(): TrafficSince;
  rssBytes(): number;
  /** V8's committed heap (what process.memoryUsage() calls heapTotal). */
  heapTotalBytes(): number;
  /** A full collection that returns memory to the system. */
  collect(): void;
  /** The allocator's free pages back to the system: true if any; null where unavailable. */
  releaseAllocator(): boolean | null;
  nowMs(): number;
}

type GcFunction = (options?: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/**
 * V8's gc function without exposing `gc` to the gateway's own global: --expose-gc is set only
 * while a fresh context is made, and the function is taken from that context. Null where V8's
 * flags cannot be changed at run time.
 */
function gcFunction(): GcFunction | null {
  const exposed = (globalThis as { gc?: GcFunction }).gc;
  if (exposed !== undefined) return exposed;
  try {
    setFlagsFromString('--expose-gc');
    try {
      const gc: unknown = runInNewContext('typeof gc === "function" ? gc : null');
      return typeof gc === 'function' ? (gc as GcFunction) : null;
    } finally {
      setFlagsFromString('--no-expose-gc');
    }
  } catch {
    return null;
  }
}

/**
 * The running process, or null when this Node cannot run a collection on request. Without
 * `allocatorTrim` (no addon) the trim is the collection alone.
 */
export function processProbe(
  traffic: RequestTraffic,
  allocatorTrim: AllocatorTrim | null = null,
): MemoryTrimProbe | null {
  const gc = gcFunction();
  if (gc === null) return null;
  let last: EventLoopUtilization = performance.eventLoopUtilization();
  return {
    utilization() {
      const now = performance.eventLoopUtilization();
      const u = performance.eventLoopUtilization(now, last).utilization;
      last = now;
      return u;
    },
    traffic: () => traffic.take(),
    rssBytes: () => process.memoryUsage.rss(),
    heapTotalBytes: () => getHeapStatistics().total_heap_size,
    collect: () => gc({ type: 'major', execution: 'sync', flavor: 'last-resort' }),
    releaseAllocator: () => (allocatorTrim === null ? null : allocatorTrim()),
    nowMs: () => performance.now(),
  };
}

export class MemoryTrimmer {
  private timer: NodeJS.Timeout | null = null;
  /** RSS and V8's heap after the last trim (or at start): growth is measured from here. */
  private rssFloor: number;
  private heapFloor: number;
  /** V8's largest heap seen since the last trim. */
  private heapPeak: number;
  /**
   * The busiest check period since the last trim. Start-up counts as a burst: PGlite's first WASM
   * compile and the config's leave garbage and free pages behind (a fresh embedded gateway idle for
   * 12 s: 230.6 MB; one trim: 178.1), so the first quiet spell after start trims once.
   */
  private utilizationPeak = BURST_UTILIZATION;
  private lastTrimMs = -Infinity;
  /** Check periods in a row that saw no request arrive and none open. */
  private quietPeriods = 0;
  private readonly settings: () => MemoryTrimSettings;
  private readonly probe: MemoryTrimProbe;
  private readonly onTrim: (trim: MemoryTrim) => void;

  constructor(
    settings: () => MemoryTrimSettings,
    probe: MemoryTrimProbe,
    onTrim: (trim: MemoryTrim) => void,
  ) {
    this.settings = settings;
    this.probe = probe;
    this.onTrim = onTrim;
    this.rssFloor = probe.rssBytes();
    this.heapFloor = this.heapPeak = probe.heapTotalBytes();
  }

  /**
   * One look: trims when the last QUIET_PERIODS periods saw no request arrive and none open, the
   * last one's event loop was under idle_below, and since the last trim either a period was busy
   * (a burst) or enough looks reclaimable.
   */
  check(): MemoryTrim | null {
    const s = this.settings();
    const utilization = this.probe.utilization();
    const traffic = this.probe.traffic();
    const rss = this.probe.rssBytes();
    const heap = this.probe.heapTotalBytes();
    this.rssFloor = Math.min(this.rssFloor, rss);
    this.heapFloor = Math.min(this.heapFloor, heap);
    this.heapPeak = Math.max(this.heapPeak, heap);
    this.utilizationPeak = Math.max(this.utilizationPeak, utilization);
    this.quietPeriods = traffic.arrived > 0 || traffic.open > 0 ? 0 : this.quietPeriods + 1;
    if (!s.enabled || utilization >= s.idleBelow) return null;
    if (this.quietPeriods < QUIET_PERIODS) return null;
    if (this.probe.nowMs() - this.lastTrimMs < MIN_TRIM_INTERVAL_MS) return null;
    const reclaimable = Math.max(rss - this.rssFloor, this.heapPeak - this.heapFloor);
    if (reclaimable < s.minReclaimBytes && this.utilizationPeak < BURST_UTILIZATION) return null;
    const started = this.probe.nowMs();
    this.probe.collect();
    // After the collection: V8 frees its own malloc'd memory (worklists, zones) during it.
    const allocatorReleased = this.probe.releaseAllocator();
    this.lastTrimMs = this.probe.nowMs();
    const pauseMs = this.lastTrimMs - started;
    this.rssFloor = this.probe.rssBytes();
    this.heapFloor = this.heapPeak = this.probe.heapTotalBytes();
    this.utilizationPeak = 0;
    const trim = { rssBeforeBytes: rss, rssAfterBytes: this.rssFloor, pauseMs, allocatorReleased };
    this.onTrim(trim);
    return trim;
  }

  start(): void {
    if (this.timer !== null) return;
    const schedule = (): void => {
      this.timer = setTimeout(() => {
        this.check();
        schedule();
      }, this.settings().checkMs);
      this.timer.unref();
    };
    // The first period's utilisation counts from now, not from the process's start.
    this.probe.utilization();
    schedule();
  }

  stop(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }
}
