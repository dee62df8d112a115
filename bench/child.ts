// Starts one benchmark process (bench/procs/*.ts) with node's own binary and talks to it over IPC:
// wait for its URL, ask for its memory, stop it and wait for a clean exit.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type {
  ChildMessage,
  LatenessMessage,
  MemoryMessage,
  ParentMessage,
  ReadyMessage,
} from './procs/ipc.ts';

export interface BenchChild {
  name: string;
  url: string;
  key: string;
  pid: number;
  memory(gc: boolean): Promise<MemoryMessage>;
  /** The canary's timer lateness within the windows (process.hrtime µs); canary only. */
  lateness(windows: [number, number][]): Promise<LatenessMessage>;
  /** The child's one `result` message (the config child sends one and exits). */
  result(): Promise<unknown>;
  stop(): Promise<void>;
}

const READY_TIMEOUT_MS = 60_000;

function waitFor<T extends ChildMessage['type']>(
  proc: ChildProcess,
  type: T,
  timeoutMs: number,
): Promise<Extract<ChildMessage, { type: T }>> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`no '${type}' message from child ${proc.pid} in ${timeoutMs} ms`));
    }, timeoutMs);
    const onMessage = (msg: ChildMessage): void => {
      if (msg.type !== type) return;
      cleanup();
      resolve(msg as Extract<ChildMessage, { type: T }>);
    };
    const onExit = (code: number | null): void => {
      cleanup();
      reject(new Error(`child ${proc.pid} exited (${code}) before '${type}'`));
    };
    const cleanup = (): void => {
      clearTimeout(timer);
      proc.off('message', onMessage);
      proc.off('exit', onExit);
    };
    proc.on('message', onMessage);
    proc.on('exit', onExit);
  });
}

/** Forks `bench/procs/<proc>.ts` with `args` as JSON and waits for its ready message. */
export async function startChild(
  name: string,
  proc: string,
  args: unknown,
  execArgv: string[] = [],
  env: Record<string, string> = {},
): Promise<BenchChild> {
  const file = fileURLToPath(new URL(`./procs/${proc}.ts`, import.meta.url));
  const child = fork(file, [JSON.stringify(args)], {
    execPath: process.execPath,
    execArgv: ['--expose-gc', ...execArgv],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, ...env },
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const send = (msg: ParentMessage): void => {
    if (child.connected) child.send(msg);
  };
  // A one-shot child (config) sends its result and exits: listen before it can arrive.
  const oneShot = proc === 'config' ? waitFor(child, 'result', 600_000) : null;
  oneShot?.catch(() => undefined);
  let ready: ReadyMessage = { type: 'ready', url: '', key: '' };
  if (oneShot === null) ready = await waitFor(child, 'ready', READY_TIMEOUT_MS);
  return {
    name,
    url: ready.url,
    key: ready.key,
    pid: child.pid ?? -1,
    async memory(gc) {
      const reply = waitFor(child, 'memory', 10_000);
      send({ type: 'memory', gc });
      return reply;
    },
    async lateness(windows) {
      const reply = waitFor(child, 'lateness', 10_000);
      send({ type: 'lateness', windows });
      return reply;
    },
    async result() {
      if (oneShot === null) throw new Error(`${name} sends no result`);
      return (await oneShot).result;
    },
    async stop() {
      if (child.exitCode !== null) return;
      send({ type: 'stop' });
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
