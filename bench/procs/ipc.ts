// The messages between `bench/run.ts` and its child processes (upstream, proxy, gateway, config),
// and the small helpers every child uses to answer them.

export interface ReadyMessage {
  type: 'ready';
  url: string;
  /** The API key to call the child with (the gateway's; the upstream's mock key otherwise). */
  key: string;
}

export interface MemoryMessage {
  type: 'memory';
  rssBytes: number;
  heapUsedBytes: number;
  /** V8's committed heap (used + free pages it keeps), and memory outside it (Buffers, WASM). */
  heapTotalBytes: number;
  externalBytes: number;
  /** True when the heap figure was taken right after a full collection (--expose-gc). */
  afterGc: boolean;
  /** process.hrtime in µs: the clock of a .cpuprofile's timestamps (both CLOCK_MONOTONIC). */
  monotonicUs: number;
}

export interface ResultMessage {
  type: 'result';
  result: unknown;
}

/** The host-stall canary's timer lateness over the windows it was asked about (ms). */
export interface LatenessMessage {
  type: 'lateness';
  samples: number;
  p50: number;
  p99: number;
  max: number;
}

export type ChildMessage = ReadyMessage | MemoryMessage | ResultMessage | LatenessMessage;

export type ParentMessage =
  | { type: 'memory'; gc: boolean }
  | { type: 'stop' }
  /** Windows in process.hrtime µs (CLOCK_MONOTONIC, the same clock in every process). */
  | { type: 'lateness'; windows: [number, number][] };

/** Sends a message to the parent; a child forked without IPC just prints it. */
export function toParent(msg: ChildMessage): void {
  if (process.send !== undefined) process.send(msg);
  else console.log(JSON.stringify(msg));
}

function memory(gc: boolean): MemoryMessage {
  const collect = (globalThis as { gc?: () => void }).gc;
  const afterGc = gc && collect !== undefined;
  if (afterGc) collect();
  const m = process.memoryUsage();
  const monotonicUs = Number(process.hrtime.bigint() / 1000n);
  return {
    type: 'memory',
    rssBytes: m.rss,
    heapUsedBytes: m.heapUsed,
    heapTotalBytes: m.heapTotal,
    externalBytes: m.external,
    afterGc,
    monotonicUs,
  };
}

/**
 * Answers memory requests and stops on 'stop' (or when the parent goes away): `close` runs, then
 * the process exits normally, so --cpu-prof writes its profile.
 */
export function serveParent(
  close: () => Promise<void>,
  onOther?: (msg: ParentMessage) => void,
): void {
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    close().then(
      () => process.exit(0),
      (err: unknown) => {
        console.error(err);
        process.exit(1);
      },
    );
  };
  process.on('message', (msg: ParentMessage) => {
    if (msg.type === 'memory') toParent(memory(msg.gc));
    else if (msg.type === 'stop') stop();
    else onOther?.(msg);
  });
  process.on('disconnect', stop);
  process.on('SIGTERM', stop);
}

/** argv[2] is a JSON object of the child's options. */
export function childArgs<T>(): T {
  return JSON.parse(process.argv[2] ?? '{}') as T;
}
