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

export class TableHolder {
  /** The table in force; a request reads it once, at entry (DESIGN invariant 2). */
  current: RoutingTable;
  readonly status: ReloadStatus;
  private readonly dir: string;
  private readonly events: ReloaderEvents;
  private readonly debounceMs: number;
  private watcher: FSWatcher | null = null;
  private worker: Worker | null = null;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private nextId = 1;
  private readonly pending = new Map<number, (r: CompileResult | Error) => void>();

  constructor(dir: string, initial: RoutingTable, events: ReloaderEvents = {}, debounceMs = 150) {
    this.dir = dir;
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

  private compileInWorker(): Promise<CompileResult | Error> {
    if (this.worker === null) {
      const worker = new Worker(new URL('./compile-worker.ts', import.meta.url));
      worker.unref();
      worker.on('message', (msg: { id: number; result?: CompileResult; error?: string }) => {
        const done = this.pending.get(msg.id);
        this.pending.delete(msg.id);
        done?.(msg.result ?? new Error(msg.error ?? 'compile failed'));
      });
      worker.on('error', (err) => {
        for (const done of this.pending.values()) done(err);
        this.pending.clear();
        this.worker = null;
      });
      this.worker = worker;
    }
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      this.worker?.postMessage({ id, dir: this.dir, mode: 'serve', env: { ...process.env } });
    });
  }

  async close(): Promise<void> {
    if (this.timer !== null) clearTimeout(this.timer);
    await this.watcher?.close();
    await this.worker?.terminate();
    this.worker = null;
  }
}
