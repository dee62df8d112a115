// `--import`ed into a bench process (the bare proxy or a gateway) by `npm run bench:ab -- --stages`:
// stamps each request served at four points, the same for any server in front of undici, with no
// change to src/: its arrival ('request' event), its upstream request made (undici's
// `undici:request:create` diagnostics channel, in the arrival's async context), the upstream's
// response head (`undici:request:headers`) and the first byte written to the client; and two more
// around them: the load generator's send (the time it stamps on the request, load.ts's
// SENT_HEADER, against the same host's clock) and the first write's bytes handed to the socket's
// handle (node corks a response's write to the end of the tick). On Linux it
// also reads how long the main thread waited for a core (run-queue delay, from schedstat) between
// the arrival and the upstream request: a path that long can be preempted by the other processes
// and threads on a 2-core host. Between the upstream request and its head it reads how long the
// event loop was not waiting for I/O (event-loop utilisation's idle time taken from the span): a
// head that waits while the loop works for other requests and streams shows as busy time there
// (wall time out of epoll, preemption inside a callback included: not CPU).
// A gateway that publishes its path's steps (src/telemetry/path-steps.ts) also has each step's end
// stamped, so its path to the upstream request splits into them.
// One row a request, appended to $SWITCHYARD_STAGES_FILE.
// The probe costs a few µs a request on every side (two schedstat reads of ~3 µs on a slow host).
import { AsyncLocalStorage } from 'node:async_hooks';
import { subscribe } from 'node:diagnostics_channel';
import { appendFileSync, openSync, readSync } from 'node:fs';
import { Server, ServerResponse, type IncomingMessage } from 'node:http';
import { Socket } from 'node:net';
import { isMainThread } from 'node:worker_threads';
import { PATH_STEP_CHANNEL } from '../src/telemetry/path-steps.ts';

/** load.ts's SENT_HEADER, not imported: this runs inside the probed servers. */
const SENT_HEADER = 'x-bench-sent';

interface Stamp {
  t0: number;
  /** Run-queue delay of the main thread at arrival (ns), or -1 where schedstat is not readable. */
  wait0: number;
  made: number;
  head: number;
  first: number;
  /** When the first write's bytes went to the socket's handle (node corks a write to the tick's end). */
  sent: number;
  /** µs from the load generator's send (its SENT_HEADER) to the 'request' event; -1: unstamped. */
  fromClientUs: number;
  waitUs: number;
  /** Requests arrived and not yet at their first client write when this one arrived. */
  ahead: number;
  /** The event loop's idle time (ms, cumulative) when the upstream request was made. */
  idle0: number;
  /** µs of the upstream request → head span the loop was not idle; -1 until the head. */
  headBusyUs: number;
  /** "step:µs after arrival" of each path step published before the upstream request, by commas. */
  steps: string;
}

const file = process.env.SWITCHYARD_STAGES_FILE;
if (isMainThread && file !== undefined && file !== '') install(file);

function install(out: string): void {
  const als = new AsyncLocalStorage<Stamp>();
  const byRequest = new WeakMap<object, Stamp>();
  const stamps = new WeakMap<ServerResponse, Stamp>();
  const rows: string[] = [];
  let open = 0;

  // /proc/thread-self/schedstat: "<run ns> <run-queue wait ns> <timeslices>" of this thread.
  let fd = -1;
  try {
    fd = openSync('/proc/thread-self/schedstat', 'r');
  } catch {
    fd = -1;
  }
  const buf = Buffer.alloc(96);
  const queued = (): number => {
    if (fd < 0) return -1;
    const n = readSync(fd, buf, 0, buf.length, 0);
    return Number(buf.toString('latin1', 0, n).split(' ')[1]);
  };

  const emit = Server.prototype.emit as (this: Server, ...a: unknown[]) => boolean;
  Server.prototype.emit = function (this: Server, event: string | symbol, ...args: unknown[]) {
    if (event !== 'request') return emit.call(this, event, ...args);
    const s: Stamp = {
      t0: performance.now(),
      wait0: queued(),
      made: 0,
      head: 0,
      first: 0,
      sent: 0,
      fromClientUs: -1,
      waitUs: -1,
      ahead: open,
      idle0: 0,
      headBusyUs: -1,
      steps: '',
    };
    open++;
    const sentAt = Number((args[0] as IncomingMessage).headers[SENT_HEADER]);
    if (sentAt > 0) s.fromClientUs = (performance.timeOrigin + s.t0 - sentAt) * 1000;
    const res = args[1] as ServerResponse;
    stamps.set(res, s);
    res.once('close', () => {
      // A first write whose bytes never left (the socket went first) still gets its row.
      if (unsent.delete(res)) row(s);
      // A response closed before it wrote anything (its client went away) is open no longer.
      if (s.first !== 0) return;
      s.first = -1;
      open--;
    });
    return als.run(s, () => emit.call(this, event, ...args));
  } as typeof Server.prototype.emit;

  const at = (s: Stamp, t: number): string => (t === 0 ? '-1' : ((t - s.t0) * 1000).toFixed(1));
  const row = (s: Stamp): void => {
    rows.push(
      `${(performance.timeOrigin + s.t0).toFixed(3)}\t${at(s, s.made)}\t${at(s, s.head)}\t${at(s, s.first)}\t${s.waitUs.toFixed(1)}\t${s.ahead}\t${s.headBusyUs.toFixed(1)}\t${s.steps}\t${at(s, s.sent)}\t${s.fromClientUs.toFixed(1)}`,
    );
  };
  // A response's row is written once its first write has left for the kernel (or its socket
  // closed before that): node corks a response's write to the end of the tick, so the bytes leave
  // after whatever else the tick and its microtasks run.
  const unsent = new WeakMap<object, Stamp>();
  const first = (res: ServerResponse): void => {
    const s = stamps.get(res);
    if (s === undefined || s.first !== 0) return;
    s.first = performance.now();
    open--;
    unsent.set(res, s);
  };
  const sockets = Socket.prototype as unknown as {
    _writeGeneric: (this: Socket & { _httpMessage?: object }, ...a: unknown[]) => unknown;
  };
  const writeGeneric = sockets._writeGeneric;
  sockets._writeGeneric = function (this: Socket & { _httpMessage?: object }, ...args: unknown[]) {
    const res = this._httpMessage;
    if (res !== undefined) {
      const s = unsent.get(res);
      if (s !== undefined) {
        unsent.delete(res);
        s.sent = performance.now();
        row(s);
      }
    }
    return writeGeneric.apply(this, args);
  };

  const write = ServerResponse.prototype.write;
  ServerResponse.prototype.write = function (this: ServerResponse, ...args: unknown[]) {
    first(this);
    return (write as (...a: unknown[]) => boolean).apply(this, args);
  } as typeof write;
  const end = ServerResponse.prototype.end;
  ServerResponse.prototype.end = function (this: ServerResponse, ...args: unknown[]) {
    first(this);
    return (end as (...a: unknown[]) => ServerResponse).apply(this, args);
  } as typeof end;

  subscribe(PATH_STEP_CHANNEL, (step) => {
    const s = als.getStore();
    if (s === undefined || s.made !== 0) return;
    const us = ((performance.now() - s.t0) * 1000).toFixed(1);
    s.steps += `${s.steps === '' ? '' : ','}${step as string}:${us}`;
  });
  subscribe('undici:request:create', (message) => {
    const s = als.getStore();
    if (s === undefined || s.made !== 0) return;
    s.made = performance.now();
    s.idle0 = performance.eventLoopUtilization().idle;
    if (s.wait0 >= 0) s.waitUs = (queued() - s.wait0) / 1000;
    byRequest.set((message as { request: object }).request, s);
  });
  subscribe('undici:request:headers', (message) => {
    const s = byRequest.get((message as { request: object }).request);
    if (s === undefined || s.head !== 0) return;
    s.head = performance.now();
    const idleMs = performance.eventLoopUtilization().idle - s.idle0;
    s.headBusyUs = Math.max(0, (s.head - s.made - idleMs) * 1000);
  });

  const flush = (): void => {
    if (rows.length > 0) appendFileSync(out, rows.splice(0).join('\n') + '\n');
  };
  setInterval(flush, 200).unref();
  process.on('exit', flush);
}
