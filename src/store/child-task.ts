// A one-off task in a child process that says when its work is done, so the parent need not wait
// for the child to leave by an empty event loop: node's exit can deadlock there (nodejs/node#54918,
// seen in session 52 with pglite-init.ts's child: its main thread draining V8's tasks while the one
// helper thread waited in a compile for a collection only the main thread could run). Once the
// task is done its results are on disk; a child still there `graceMs` later is ended.
import { fork } from 'node:child_process';

/** What a child task says when its work is done (the child side calls reportDone). */
const DONE = 'child-task:done';

/** How long a child that reported its work done may take to exit before it is ended. */
export const EXIT_GRACE_MS = 5_000;

export interface ChildTaskResult {
  /** The child reported its work done (whether it then exited by itself or was ended). */
  done: boolean;
  /** Its exit code; null when it was ended by a signal. */
  code: number | null;
  /** It was still there `graceMs` after it reported done, and was killed. */
  ended: boolean;
  stderr: string;
}

/** Runs `module` in a child node process with `args` and waits for it to finish or report done. */
export function runChildTask(
  module: string,
  args: string[],
  graceMs = EXIT_GRACE_MS,
): Promise<ChildTaskResult> {
  const child = fork(module, args, { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  return new Promise((resolve, reject) => {
    let done = false;
    let ended = false;
    let timer: NodeJS.Timeout | null = null;
    child.on('message', (msg: unknown) => {
      if (msg !== DONE || done) return;
      done = true;
      timer = setTimeout(() => {
        ended = true;
        child.kill('SIGKILL');
      }, graceMs);
    });
    child.once('error', (err) => {
      if (timer !== null) clearTimeout(timer);
      reject(err);
    });
    // 'close', not 'exit': stderr is read to its end.
    child.once('close', (code: number | null) => {
      if (timer !== null) clearTimeout(timer);
      resolve({ done, code, ended, stderr });
    });
  });
}

/** In the child: the task's work is done and kept; the parent may end this process. */
export function reportDone(): Promise<void> {
  const send = process.send?.bind(process);
  if (send === undefined) return Promise.resolve();
  return new Promise((resolve) => send(DONE, () => resolve()));
}
