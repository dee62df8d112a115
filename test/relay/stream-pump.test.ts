// The pump between an upstream call and the client, as undici's dispatch handler: the head, the
// first text before commit, the rest from undici's callbacks with backpressure, an error answer
// read whole, and every way a call can stop (end, failure, abort, the client gone). Most cases
// drive it through a stand-in that calls the handler as undici's client does; the last ones
// through a real undici Pool and a local upstream.
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { Pool, type Dispatcher } from 'undici';
import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import { ChatStreamRelay } from '../../src/protocols/openai/chat-stream-relay.ts';
import { UpstreamPump, type PumpEnd } from '../../src/relay/stream-pump.ts';
import { RequestAbort } from '../../src/relay/request-abort.ts';
import { chatEvent, sseUpstream } from './sse-upstream.ts';

const event = chatEvent;

/** A client socket stand-in that keeps what it is given; `highWaterMark` sets when it pushes back. */
function client(highWaterMark = 1 << 20, delayMs = 0): { raw: ServerResponse; text: () => string } {
  const parts: string[] = [];
  const raw = new Writable({
    highWaterMark,
    decodeStrings: false,
    write(chunk: string, _enc, done) {
      parts.push(chunk);
      if (delayMs > 0) setTimeout(done, delayMs);
      else done();
    },
  });
  return { raw: raw as unknown as ServerResponse, text: () => parts.join('') };
}

/**
 * One upstream call as undici's client drives a handler (its legacy interface, the one it calls
 * directly): onConnect with an abort that fails the call with onError at once; onHeaders with a
 * resume; onData whose false pauses delivery until resume, which delivers what waits before it
 * returns; then onComplete or onError, once.
 */
class FakeCall implements Pick<Dispatcher, 'dispatch'> {
  handler: Dispatcher.DispatchHandler | null = null;
  dispatched = 0;
  aborted: Error | null = null;
  pauses = 0;
  private queue: (Buffer | 'end')[] = [];
  private paused = false;
  private done = false;
  /** `queued`: the call waits for a connection until connect(), as in a busy pool. */
  private readonly queued: boolean;
  constructor(queued = false) {
    this.queued = queued;
  }

  dispatch(_options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    this.dispatched++;
    this.handler = handler;
    if (!this.queued) this.connect();
    return true;
  }

  connect(): void {
    this.handler!.onConnect!((err?: Error) => {
      if (this.done) return;
      this.aborted = err ?? new Error('aborted');
      this.fail(this.aborted);
    });
  }

  head(status = 200, headers: Record<string, string> = {}): void {
    const raw = Object.entries(headers).flatMap(([k, v]) => [Buffer.from(k), Buffer.from(v)]);
    const resume = (): void => {
      this.paused = false;
      this.flush();
    };
    if (this.handler!.onHeaders!(status, raw, resume, '') === false) this.paused = true;
  }

  write(text: string): void {
    this.queue.push(Buffer.from(text));
    this.flush();
  }

  end(text = ''): void {
    if (text !== '') this.queue.push(Buffer.from(text));
    this.queue.push('end');
    this.flush();
  }

  fail(err: Error): void {
    if (this.done) return;
    this.done = true;
    this.handler!.onError!(err);
  }

  /** Chunks delivered but not yet read on (waiting behind a pause). */
  get waiting(): number {
    return this.queue.length;
  }

  private flush(): void {
    while (!this.paused && !this.done && this.queue.length > 0) {
      const next = this.queue.shift()!;
      if (next === 'end') {
        this.done = true;
        this.handler!.onComplete!([]);
      } else if (this.handler!.onData!(next) === false) {
        this.paused = true;
        this.pauses++;
      }
    }
  }
}

/** A pump sent through a FakeCall whose head (`status`, `headers`) has come. */
async function started(
  relay = new ChatStreamRelay(true),
  signal = new RequestAbort(),
  status = 200,
  headers: Record<string, string> = {},
): Promise<{ pump: UpstreamPump; call: FakeCall }> {
  const call = new FakeCall();
  const pump = new UpstreamPump(() => relay, signal);
  const sent = pump.send(call as unknown as Dispatcher, { method: 'POST', path: '/' });
  call.head(status, headers);
  await sent;
  return { pump, call };
}

describe('UpstreamPump', () => {
  it('gives the first whole event as the first text, even when it arrives in pieces', async () => {
    const { pump, call } = await started();
    const e0 = event(0);
    call.write(e0.slice(0, 10));
    call.write(e0.slice(10));
    call.write(event(1));
    expect(await pump.first()).toBe(e0);
    // Nothing is read past the first text until the caller commits.
    expect(call.waiting).toBe(1);
  });

  it("answers a body that ends before any event with the relay's closing text", async () => {
    const { pump, call } = await started();
    call.end(': keep-alive\n\n');
    expect(await pump.first()).toBe('data: [DONE]\n\n');
  });

  it('rejects first() when the call fails before any event', async () => {
    const { pump, call } = await started();
    call.fail(new Error('socket hang up'));
    await expect(pump.first()).rejects.toThrow('socket hang up');
  });

  it('builds its relay once the request is dispatched, not before, and streams through it', async () => {
    const call = new FakeCall();
    const order: string[] = [];
    const relay = new ChatStreamRelay(true);
    const pump = new UpstreamPump(() => {
      order.push(`relay built after ${call.dispatched} dispatch`);
      return relay;
    }, new RequestAbort());
    const sent = pump.send(call as unknown as Dispatcher, { method: 'POST', path: '/' });
    expect(order).toEqual(['relay built after 1 dispatch']);
    expect(pump.relay).toBe(relay);
    call.head(200);
    await sent;
    call.write(event(0));
    expect(await pump.first()).toBe(event(0));
    expect(relay.events).toBe(1);
  });

  it('rejects send() when no head comes, and sends nothing when the signal aborted first', async () => {
    const call = new FakeCall();
    const pump = new UpstreamPump(() => new ChatStreamRelay(true), new RequestAbort());
    const sent = pump.send(call as unknown as Dispatcher, { method: 'POST', path: '/' });
    call.fail(new Error('connect ECONNREFUSED'));
    await expect(sent).rejects.toThrow('ECONNREFUSED');

    const ac = new RequestAbort();
    ac.abort(new Error('the client went away'));
    const idle = new FakeCall();
    const late = new UpstreamPump(() => new ChatStreamRelay(true), ac);
    await expect(
      late.send(idle as unknown as Dispatcher, { method: 'POST', path: '/' }),
    ).rejects.toThrow('the client went away');
    expect(idle.dispatched).toBe(0);
  });

  it('drops the call when the signal aborts while the head is awaited', async () => {
    const ac = new RequestAbort();
    const call = new FakeCall();
    const pump = new UpstreamPump(() => new ChatStreamRelay(true), ac);
    const sent = pump.send(call as unknown as Dispatcher, { method: 'POST', path: '/' });
    ac.abort(new Error('the client went away'));
    await expect(sent).rejects.toThrow('the client went away');
    expect(call.aborted?.message).toBe('the client went away');
  });

  it('drops a call that was still waiting for a connection when the signal aborted', async () => {
    const ac = new RequestAbort();
    const call = new FakeCall(true);
    const pump = new UpstreamPump(() => new ChatStreamRelay(true), ac);
    const sent = pump.send(call as unknown as Dispatcher, { method: 'POST', path: '/' });
    ac.abort(new Error('the client went away'));
    await expect(sent).rejects.toThrow('the client went away');
    // The pool hands it a connection later: it is aborted before anything is sent.
    call.connect();
    expect(call.aborted?.message).toBe('the client went away');
  });

  it('skips an informational head and takes the answer after it', async () => {
    const call = new FakeCall();
    const pump = new UpstreamPump(() => new ChatStreamRelay(true), new RequestAbort());
    const sent = pump.send(call as unknown as Dispatcher, { method: 'POST', path: '/' });
    call.head(103, { link: '</x>; rel=preload' });
    expect(pump.status).toBe(0);
    call.head(200);
    await sent;
    expect(pump.status).toBe(200);
    call.write(event(0));
    expect(await pump.first()).toBe(event(0));
  });

  it('reads an error answer whole, with its headers, and never hands it to the relay', async () => {
    const relay = new ChatStreamRelay(true);
    const { pump, call } = await started(relay, undefined, 429, {
      'Retry-After': '7',
      'content-type': 'application/json',
    });
    expect(pump.status).toBe(429);
    expect(pump.header('retry-after')).toBe('7');
    call.write('{"error":{"message":"slow');
    call.end(' down"}}');
    expect(await pump.errorText()).toBe('{"error":{"message":"slow down"}}');
    expect(relay.events).toBe(0);
  });

  it("gives '' for an error answer cut before its end", async () => {
    const { pump, call } = await started(undefined, undefined, 503);
    call.write('{"error":');
    call.fail(new Error('other side closed'));
    expect(await pump.errorText()).toBe('');
  });

  it("gives '' for an error answer whose reading the signal aborts", async () => {
    const ac = new RequestAbort();
    const { pump, call } = await started(undefined, ac, 500);
    call.write('{"error":');
    ac.abort(new Error('the client went away'));
    expect(await pump.errorText()).toBe('');
    expect(call.aborted?.message).toBe('the client went away');
  });

  it('relays the rest in order, then the closing text, which is not counted as an event', async () => {
    const relay = new ChatStreamRelay(true);
    const { pump, call } = await started(relay);
    call.write(event(0));
    const first = await pump.first();
    const c = client();
    const done = pump.rest(c.raw);
    for (let i = 1; i < 5; i++) call.write(event(i));
    call.end();
    expect(await done).toEqual({ ended: true });
    const rest = [1, 2, 3, 4].map(event).join('');
    expect(first + c.text()).toBe(event(0) + rest + 'data: [DONE]\n\n');
    expect(relay.events).toBe(5);
  });

  it('keeps a failure between first() and rest() and reports it, instead of throwing it', async () => {
    const { pump, call } = await started();
    call.write(event(0));
    await pump.first();
    call.fail(new Error('reset'));
    const end = await pump.rest(client().raw);
    expect(end.ended).toBe(false);
    expect((end as { error: Error }).error.message).toBe('reset');
  });

  it('pauses the upstream while the client pushes back, and loses nothing', async () => {
    const { pump, call } = await started();
    call.write(event(0));
    await pump.first();
    const c = client(256, 1);
    const done = pump.rest(c.raw);
    const sent: string[] = [];
    for (let i = 1; i <= 200; i++) {
      sent.push(event(i));
      call.write(event(i));
    }
    call.end();
    expect(await done).toEqual({ ended: true });
    await new Promise<void>((r) => (c.raw as unknown as Writable).end(r));
    expect(c.text()).toBe(sent.join('') + 'data: [DONE]\n\n');
    expect(call.pauses).toBeGreaterThan(1);
  });

  it('stops at once when the signal aborts, writing nothing more, and drops the call', async () => {
    const ac = new RequestAbort();
    const { pump, call } = await started(new ChatStreamRelay(true), ac);
    call.write(event(0));
    await pump.first();
    const c = client();
    const done = pump.rest(c.raw);
    ac.abort(new Error('client went away'));
    call.write(event(1));
    const end = await done;
    expect(end.ended).toBe(false);
    expect(call.aborted?.message).toBe('client went away');
    await new Promise((r) => setImmediate(r));
    expect(c.text()).toBe('');
  });

  it('does not count a closing text that arrived before rest() as upstream output', async () => {
    const relay = new ChatStreamRelay(true);
    const { pump, call } = await started(relay);
    // The last chunk and the end arrive together: the end comes while the pump waits for rest().
    call.end(event(0) + event(1));
    expect(await pump.first()).toBe(event(0) + event(1));
    const c = client();
    expect(await pump.rest(c.raw)).toEqual({ ended: true });
    expect(c.text()).toBe('data: [DONE]\n\n');
    expect(relay.events).toBe(2);
  });

  it('reports a call that fails mid-body as cut', async () => {
    const { pump, call } = await started();
    call.write(event(0));
    await pump.first();
    const done = pump.rest(client().raw);
    call.fail(new Error('other side closed'));
    const end = await done;
    expect(end.ended).toBe(false);
    expect((end as { error: Error }).error.message).toBe('other side closed');
  });

  it('rejects first() when the relay cannot read a chunk, and drops the call', async () => {
    const relay = new ChatStreamRelay(true);
    relay.push = () => {
      throw new Error('unreadable chunk');
    };
    const { pump, call } = await started(relay);
    call.write(event(0));
    await expect(pump.first()).rejects.toThrow('unreadable chunk');
    expect(call.aborted?.message).toBe('unreadable chunk');
  });

  it('stops and drops the call when the relay cannot read a chunk after the commit', async () => {
    const relay = new ChatStreamRelay(true);
    const { pump, call } = await started(relay);
    call.write(event(0));
    await pump.first();
    const c = client();
    const done = pump.rest(c.raw);
    relay.push = () => {
      throw new Error('unreadable chunk');
    };
    call.write(event(1));
    call.write(event(2));
    const end = await done;
    expect((end as { error: Error }).error.message).toBe('unreadable chunk');
    expect(call.aborted?.message).toBe('unreadable chunk');
    expect(c.text()).toBe('');
  });

  /** A committed pump paused for a client that never finishes a write, with chunks waiting. */
  async function pausedForClient(
    signal?: RequestAbort,
  ): Promise<{ call: FakeCall; c: ReturnType<typeof client>; done: Promise<PumpEnd> }> {
    const { pump, call } = await started(new ChatStreamRelay(true), signal);
    call.write(event(0));
    await pump.first();
    const c = client(64, 1_000_000);
    const done = pump.rest(c.raw);
    for (let i = 1; i <= 5; i++) call.write(event(i));
    expect(call.waiting).toBeGreaterThan(0);
    return { call, c, done };
  }

  it('stops and drops the call when the signal aborts while it waits for the client to drain', async () => {
    const ac = new RequestAbort();
    const { call, done } = await pausedForClient(ac);
    ac.abort(new Error('the upstream exceeded its total time'));
    const end = await done;
    expect((end as { error: Error }).error.message).toBe('the upstream exceeded its total time');
    expect(call.aborted?.message).toBe('the upstream exceeded its total time');
  });

  it('ends when the client goes away while the upstream is paused for it', async () => {
    const { c, done } = await pausedForClient();
    (c.raw as unknown as Writable).destroy();
    const end = await done;
    expect(end.ended).toBe(false);
    expect((end as { error: Error }).error.message).toBe('the client went away');
  });

  it('cancel() drops an open call and does nothing once the call has ended', async () => {
    const open = await started();
    open.pump.cancel();
    expect(open.call.aborted?.message).toBe('the upstream call was dropped');

    const ended = await started();
    ended.call.end(event(0));
    await ended.pump.first();
    expect(await ended.pump.rest(client().raw)).toEqual({ ended: true });
    ended.pump.cancel();
    expect(ended.call.aborted).toBeNull();
  });
});

describe('UpstreamPump through undici', () => {
  let upstream: Server | null = null;
  let pool: Pool | null = null;
  afterEach(async () => {
    await pool?.destroy();
    upstream?.closeAllConnections();
    await new Promise<void>((r) => (upstream === null ? r() : upstream.close(() => r())));
    upstream = null;
    pool = null;
  });

  async function serveUpstream(
    handler: (res: ServerResponse) => void | Promise<void>,
  ): Promise<Pool> {
    upstream = createServer((req, res) => {
      req.resume();
      req.on('end', () => void handler(res));
    });
    await new Promise<void>((r) => upstream!.listen(0, '127.0.0.1', r));
    pool = new Pool(`http://127.0.0.1:${(upstream.address() as AddressInfo).port}`);
    return pool;
  }

  const request: Dispatcher.DispatchOptions = {
    method: 'POST',
    path: '/v1/chat/completions',
    headers: { 'content-type': 'application/json' },
    body: '{}',
  };

  it('holds the upstream back while the client reads nothing, then delivers every byte', async () => {
    // ~10 MB: more than loopback's socket buffers hold, so the upstream's writes must wait.
    const events = 100_000;
    const sse = await sseUpstream(events);
    onTestFinished(() => sse.close());
    const p = (pool = new Pool(sse.origin));
    const relay = new ChatStreamRelay(true);
    const pump = new UpstreamPump(() => relay, new RequestAbort());
    await pump.send(p, request);
    const first = await pump.first();
    // A client that takes nothing for 300 ms, then reads.
    const c = client(16 * 1024, 0);
    const slow = c.raw as unknown as Writable;
    slow.cork();
    let heldBack = -1;
    setTimeout(() => {
      // What the pump handed the client meanwhile: its high-water mark and a chunk, not the body.
      heldBack = slow.writableLength;
      slow.uncork();
    }, 300);
    expect(await pump.rest(c.raw)).toEqual({ ended: true });
    expect(heldBack).toBeGreaterThan(0);
    expect(heldBack).toBeLessThan(64 * 1024);
    expect(first + c.text()).toBe(
      Array.from({ length: events }, (_, i) => event(i)).join('') + 'data: [DONE]\n\n',
    );
    expect(relay.events).toBe(events);
    expect(sse.pushedBack()).toBeGreaterThan(0);
  });

  it('reads a 429 whole with its retry-after, and fails send() on a refused connection', async () => {
    const p = await serveUpstream((res) => {
      res.writeHead(429, { 'retry-after': '3', 'content-type': 'application/json' });
      res.end('{"error":{"message":"rate limited"}}');
    });
    const pump = new UpstreamPump(() => new ChatStreamRelay(true), new RequestAbort());
    await pump.send(p, request);
    expect(pump.status).toBe(429);
    expect(pump.header('retry-after')).toBe('3');
    expect(await pump.errorText()).toBe('{"error":{"message":"rate limited"}}');

    const closed = new Pool('http://127.0.0.1:1');
    const refused = new UpstreamPump(() => new ChatStreamRelay(true), new RequestAbort());
    await expect(refused.send(closed, request)).rejects.toThrow();
    await closed.destroy();
  });

  it('reports an upstream cut mid-stream, and a body that stalls past its timeout', async () => {
    let served = 0;
    const p = await serveUpstream((res) => {
      served++;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(event(0));
      if (served === 1) setTimeout(() => res.destroy(), 20);
      // The second one says nothing more and never ends.
    });
    const cut = new UpstreamPump(() => new ChatStreamRelay(true), new RequestAbort());
    await cut.send(p, request);
    await cut.first();
    const end = await cut.rest(client().raw);
    expect(end.ended).toBe(false);

    const stalled = new UpstreamPump(() => new ChatStreamRelay(true), new RequestAbort());
    await stalled.send(p, { ...request, bodyTimeout: 100 });
    await stalled.first();
    const timedOut = await stalled.rest(client().raw);
    expect(timedOut.ended).toBe(false);
    expect((timedOut as { error: Error }).error.name).toBe('BodyTimeoutError');
  });

  it('drops the upstream connection when the signal aborts mid-stream', async () => {
    let closed = false;
    const p = await serveUpstream((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(event(0));
      res.on('close', () => (closed = true));
      const timer = setInterval(() => res.write(event(1)), 5);
      res.on('close', () => clearInterval(timer));
    });
    const ac = new RequestAbort();
    const pump = new UpstreamPump(() => new ChatStreamRelay(true), ac);
    await pump.send(p, request);
    await pump.first();
    const done = pump.rest(client().raw);
    ac.abort(new Error('the client went away'));
    const end = await done;
    expect(end.ended).toBe(false);
    await expect.poll(() => closed).toBe(true);
  });
});
