// The pump between an upstream body and the client: first text before commit, the rest from
// 'data' events with backpressure, and every way a body can stop (end, error, abort).
import type { ServerResponse } from 'node:http';
import { PassThrough, Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ChatStreamRelay } from '../../src/protocols/openai/chat-stream-relay.ts';
import { UpstreamPump } from '../../src/relay/stream-pump.ts';

const event = (i: number): string =>
  `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"w${i}"}}]}\n\n`;

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

describe('UpstreamPump', () => {
  it('gives the first whole event as the first text, even when it arrives in pieces', async () => {
    const body = new PassThrough();
    const pump = new UpstreamPump(body, new ChatStreamRelay(true));
    const e0 = event(0);
    body.write(e0.slice(0, 10));
    body.write(e0.slice(10));
    body.write(event(1));
    expect(await pump.first()).toBe(e0);
  });

  it("answers a body that ends before any event with the relay's closing text", async () => {
    const body = new PassThrough();
    const pump = new UpstreamPump(body, new ChatStreamRelay(true));
    body.end(': keep-alive\n\n');
    expect(await pump.first()).toBe('data: [DONE]\n\n');
  });

  it('rejects first() when the body fails before any event', async () => {
    const body = new PassThrough();
    const pump = new UpstreamPump(body, new ChatStreamRelay(true));
    body.destroy(new Error('socket hang up'));
    await expect(pump.first()).rejects.toThrow('socket hang up');
  });

  it('relays the rest in order, then the closing text, which is not counted as an event', async () => {
    const body = new PassThrough();
    const relay = new ChatStreamRelay(true);
    const pump = new UpstreamPump(body, relay);
    body.write(event(0));
    const first = await pump.first();
    const c = client();
    const done = pump.rest(c.raw, new AbortController().signal);
    for (let i = 1; i < 5; i++) body.write(event(i));
    body.end();
    expect(await done).toEqual({ ended: true });
    const rest = [1, 2, 3, 4].map(event).join('');
    expect(first + c.text()).toBe(event(0) + rest + 'data: [DONE]\n\n');
    expect(relay.events).toBe(5);
  });

  it('keeps an error between first() and rest() and reports it, instead of throwing it', async () => {
    const body = new PassThrough();
    const pump = new UpstreamPump(body, new ChatStreamRelay(true));
    body.write(event(0));
    await pump.first();
    body.destroy(new Error('reset'));
    await new Promise((r) => setImmediate(r));
    const end = await pump.rest(client().raw, new AbortController().signal);
    expect(end.ended).toBe(false);
    expect((end as { error: Error }).error.message).toBe('reset');
  });

  it('pauses the upstream while the client pushes back, and loses nothing', async () => {
    const body = new PassThrough({ highWaterMark: 64 });
    const pump = new UpstreamPump(body, new ChatStreamRelay(true));
    body.write(event(0));
    await pump.first();
    const c = client(256, 1);
    let paused = 0;
    const done = pump.rest(c.raw, new AbortController().signal);
    const sent: string[] = [];
    for (let i = 1; i <= 200; i++) {
      sent.push(event(i));
      // Honour the body's own backpressure, as an upstream socket would.
      if (!body.write(event(i))) await new Promise((r) => body.once('drain', r));
      if (body.isPaused()) paused++;
    }
    body.end();
    expect(await done).toEqual({ ended: true });
    await new Promise<void>((r) => (c.raw as unknown as Writable).end(r));
    expect(c.text()).toBe(sent.join('') + 'data: [DONE]\n\n');
    expect(paused).toBeGreaterThan(0);
  });

  it('stops at once when the signal aborts, writing nothing more', async () => {
    const body = new PassThrough();
    const pump = new UpstreamPump(body, new ChatStreamRelay(true));
    body.write(event(0));
    await pump.first();
    const ac = new AbortController();
    const c = client();
    const done = pump.rest(c.raw, ac.signal);
    ac.abort(new Error('client went away'));
    body.write(event(1));
    const end = await done;
    expect(end.ended).toBe(false);
    await new Promise((r) => setImmediate(r));
    expect(c.text()).toBe('');
  });

  it('does not count a closing text that arrived before rest() as upstream output', async () => {
    const body = new PassThrough();
    const relay = new ChatStreamRelay(true);
    const pump = new UpstreamPump(body, relay);
    // The last chunk and the end arrive together: 'end' comes while the body waits for rest().
    body.end(event(0) + event(1));
    expect(await pump.first()).toBe(event(0) + event(1));
    const c = client();
    expect(await pump.rest(c.raw, new AbortController().signal)).toEqual({ ended: true });
    expect(c.text()).toBe('data: [DONE]\n\n');
    expect(relay.events).toBe(2);
  });

  it('reports a body that closes without its end as cut', async () => {
    const body = new PassThrough();
    const pump = new UpstreamPump(body, new ChatStreamRelay(true));
    body.write(event(0));
    await pump.first();
    const done = pump.rest(client().raw, new AbortController().signal);
    body.destroy();
    const end = await done;
    expect(end.ended).toBe(false);
    expect((end as { error: Error }).error.message).toMatch(/closed before its end/);
  });

  it('rejects first() when the relay cannot read a chunk, and stops reading', async () => {
    const body = new PassThrough();
    const relay = new ChatStreamRelay(true);
    relay.push = () => {
      throw new Error('unreadable chunk');
    };
    const pump = new UpstreamPump(body, relay);
    body.write(event(0));
    await expect(pump.first()).rejects.toThrow('unreadable chunk');
    expect(body.destroyed).toBe(true);
  });

  it('ends when the client goes away while the upstream is paused for it', async () => {
    const body = new PassThrough({ highWaterMark: 64 });
    const pump = new UpstreamPump(body, new ChatStreamRelay(true));
    body.write(event(0));
    await pump.first();
    const c = client(64, 1_000_000); // a client that never finishes a write
    const done = pump.rest(c.raw, new AbortController().signal);
    for (let i = 1; i <= 5; i++) body.write(event(i));
    await new Promise((r) => setImmediate(r));
    expect(body.isPaused()).toBe(true);
    (c.raw as unknown as Writable).destroy();
    const end = await done;
    expect(end.ended).toBe(false);
    expect((end as { error: Error }).error.message).toBe('the client went away');
  });
});
