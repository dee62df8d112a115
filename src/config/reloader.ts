// Holds the table the runtime serves and swaps it when config/ changes (chokidar). A burst of saves
// compiles once (debounce); a broken edit never replaces a good table (DESIGN invariant 3): the old
// one keeps serving and the error is kept for /health, the log and the reload metric.
import { Worker } from 'node:worker_threads';
import { watch, type FSWatcher } from 'chokidar';
import { deepFreezeInSlices, type CompileResult } from './compile.ts';
import { formatDiagnostic, sortDiagnostics, type Diagnostic } from './diagnostics.ts';
import type { RoutingTable } from '../table/types.ts';

export interface ReloadStatus {
  version: string;
  loadedAtMs: number;
  lastReloadAtMs: number | null;
  lastReloadOk: boolean | null;
  /** The diagnostics of the last failed reload (null once a reload succeeds). */
  lastError: string | null;
  reloads: { success: number; failure: number };
}

export interface ReloaderEvents {
  onSwap?: (next: RoutingTable, previous: RoutingTable) => void;
  onFailure?: (message: string, diagnostics: readonly Diagnostic[]) => void;
}

/**
 * How long the compile worker is kept after a reload before it is stopped. A kept worker held
 * 23-51 MB of RSS (its own isolate with the compiler's modules and their heap) for the life of the
 * process, after a single reload (benchmark, session 4); a new one costs its start-up (~0.3 s,
 * off the main thread) on the next reload. Thirty seconds keeps one worker through an editing
 * session's saves and the benchmark's back-to-back reloads.
 */
export const WORKER_LINGER_MS = 30_000;

export class TableHolder {
  /** The table in force; a request reads it once, at entry (DESIGN invariant 2). */
  current: RoutingTable;
  readonly status: ReloadStatus;
  private readonly dir: string;
  private readonly events: ReloaderEvents;
  private readonly debounceMs: number;
  private readonly workerLingerMs: number;
  private linger: NodeJS.Timeout | null = null;
  private watcher: FSWatcher | null = null;
  private worker: Worker | null = null;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private nextId = 1;
  private readonly pending = new Map<number, (r: CompileResult | Error) => void>();

  constructor(
    dir: string,
    initial: RoutingTable,
    events: ReloaderEvents = {},
    debounceMs = 150,
    workerLingerMs = WORKER_LINGER_MS,
  ) {
    this.dir = dir;
    this.workerLingerMs = workerLingerMs;
    this.current = initial;
    this.events = events;
    this.debounceMs = debounceMs;
    this.status = {
      version: initial.version,
      loadedAtMs: Date.now(),
      lastReloadAtMs: null,
      lastReloadOk: null,
      lastError: null,
      reloads: { success: 0, failure: 0 },
    };
  }

  /** Starts watching the directory; changes reload after debounceMs of quiet. */
  async watch(): Promise<void> {
    this.watcher = watch(this.dir, {
      ignoreInitial: true,
      depth: 0,
      awaitWriteFinish: { stabilityThreshold: 50, pollInterval: 20 },
    });
    this.watcher.on('all', (_event, path) => {
      if (/\.ya?ml$/.test(path)) this.schedule();
    });
    await new Promise<void>((resolve) => this.watcher?.once('ready', () => resolve()));
  }

  private schedule(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.reload();
    }, this.debounceMs);
  }

  /** Compiles the directory now (in the worker) and swaps on success. Serialised: one at a time. */
  async reload(): Promise<boolean> {
    if (this.running !== null) {
      this.again = true;
      await this.running;
      return this.status.lastReloadOk === true;
    }
    let ok = false;
    this.running = (async () => {
      do {
        this.again = false;
        ok = await this.reloadOnce();
      } while (this.again);
    })();
    try {
      await this.running;
    } finally {
      this.running = null;
    }
    return ok;
  }

  private async reloadOnce(): Promise<boolean> {
    const result = await this.compileInWorker();
    this.status.lastReloadAtMs = Date.now();
    if (result instanceof Error || result.table === null) {
      const diagnostics = result instanceof Error ? [] : sortDiagnostics(result.diagnostics);
      const message =
        result instanceof Error
          ? result.message
          : diagnostics.filter((d) => d.severity === 'error').map(formatDiagnostic).join('\n');
      this.status.lastReloadOk = false;
      this.status.lastError = message;
      this.status.reloads.failure++;
      this.events.onFailure?.(message, diagnostics);
      return false;
    }
    const table = await deepFreezeInSlices(result.table);
    const previous = this.current;
    this.current = table;
    this.status.version = result.table.version;
    this.status.lastReloadOk = true;
    this.status.lastError = null;
    this.status.reloads.success++;
    this.events.onSwap?.(this.current, previous);
    return true;
  }

  /** True while a compile worker thread exists (between a reload and the end of its linger). */
  get compileWorkerRunning(): boolean {
    return this.worker !== null;
  }

  private compileInWorker(): Promise<CompileResult | Error> {
    if (this.linger !== null) {
      clearTimeout(this.linger);
      this.linger = null;
    }
    if (this.worker === null) {
      const worker = new Worker(new URL('./compile-worker.ts', import.meta.url));
      worker.unref();
      worker.on('message', (msg: { id: number; result?: CompileResult; error?: string }) => {
        const done = this.pending.get(msg.id);
        this.pending.delete(msg.id);
        if (this.pending.size === 0) this.stopWorkerLater(worker);
        done?.(msg.result ?? new Error(msg.error ?? 'compile failed'));
      });
      worker.on('error', (err) => {
        for (const done of this.pending.values()) done(err);
        this.pending.clear();
        if (this.worker === worker) this.worker = null;
      });
      this.worker = worker;
    }
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      this.worker?.postMessage({ id, dir: this.dir, mode: 'serve', env: { ...process.env } });
    });
  }

  /** Stops the worker once it has been idle for workerLingerMs (WORKER_LINGER_MS). */
  private stopWorkerLater(worker: Worker): void {
    if (this.linger !== null) clearTimeout(this.linger);
    this.linger = setTimeout(() => {
      this.linger = null;
      if (this.worker !== worker || this.pending.size > 0) return;
      this.worker = null;
      void worker.terminate();
    }, this.workerLingerMs);
    this.linger.unref();
  }

  async close(): Promise<void> {
    if (this.timer !== null) clearTimeout(this.timer);
    if (this.linger !== null) clearTimeout(this.linger);
    this.linger = null;
    await this.watcher?.close();
    await this.worker?.terminate();
    this.worker = null;
  }
}
