// Body chunks written straight to the socket as whole HTTP/1.1 chunks: the bytes on the wire are
// node's own chunked framing, the fast path is taken where it is safe and only there, and the
// pump's backpressure holds through it.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { chunkSocket, sendWritten, writeChunk } from '../../src/http/chunk-frame.ts';
import { ChatStreamRelay } from '../../src/protocols/openai/chat-stream-relay.ts';
import { UpstreamPump } from '../../src/relay/stream-pump.ts';
import { RequestAbort } from '../../src/relay/request-abort.ts';
import { chatEvent, sseUpstream } from '../relay/sse-upstream.ts';

let server: Server | null = null;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((r) => (server === null ? r() : server.close(() => r())));
  server = null;
});

async function serve(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<number> {
  server = createServer(handler);
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  return (server.address() as AddressInfo).port;
}

/** Sends `request` on a raw socket and returns every byte that comes back until the server closes. */
function exchange(port: number, request: string, holdMs = 0): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    const socket = connect(port, '127.0.0.1', () => socket.write(request));
    if (holdMs > 0) {
      socket.pause();
      setTimeout(() => socket.resume(), holdMs);
    }
    socket.on('data', (b: Buffer) => parts.push(b));
    socket.on('end', () => resolve(Buffer.concat(parts)));
    socket.on('error', reject);
  });
}

/** The body of a chunked response, de-chunked; throws on any framing error. */
function dechunk(wire: Buffer): { head: string; body: string; chunks: number } {
  const split = wire.indexOf('\r\n\r\n');
  const head = wire.subarray(0, split).toString('latin1');
  let at = split + 4;
  const body: Buffer[] = [];
  let chunks = 0;
  for (;;) {
    const eol = wire.indexOf('\r\n', at);
    const size = Number.parseInt(wire.subarray(at, eol).toString('latin1'), 16);
    expect(Number.isNaN(size)).toBe(false);
    at = eol + 2;
    if (size === 0) {
      expect(wire.subarray(at).toString('latin1')).toBe('\r\n');
      return { head, body: Buffer.concat(body).toString('utf8'), chunks };
    }
    body.push(wire.subarray(at, at + size));
    chunks++;
    expect(wire.subarray(at + size, at + size + 2).toString('latin1')).toBe('\r\n');
    at += size + 2;
  }
}

const GET = (version = '1.1'): string =>
  `GET / HTTP/${version}\r\nhost: x\r\nconnection: close\r\n\r\n`;

describe('chunkSocket and writeChunk', () => {
  it('frame body chunks as node does, one chunk per write, after what the response wrote', async () => {
    const seen: (boolean | null)[] = [];
    const port = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      seen.push(chunkSocket(res) !== null); // headers not out yet
      res.write('data: first\n\n');
      const socket = chunkSocket(res);
      seen.push(socket !== null);
      writeChunk(socket!, Buffer.from('data: "ünïcödé"\n\n'));
      writeChunk(socket!, new Uint8Array(0)); // written as nothing, not as the end
      writeChunk(socket!, Buffer.alloc(300, 'x'));
      res.end('data: [DONE]\n\n');
    });
    const { head, body, chunks } = dechunk(await exchange(port, GET()));
    expect(head).toMatch(/transfer-encoding: chunked/i);
    expect(seen).toEqual([false, true]);
    expect(body).toBe(`data: first\n\ndata: "ünïcödé"\n\n${'x'.repeat(300)}data: [DONE]\n\n`);
    expect(chunks).toBe(4);
  });

  it('sendWritten hands the head and first chunk to the kernel now, not at the next tick', async () => {
    const state: { corked: number; queued: number }[] = [];
    const port = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: first\n\n');
      const socket = res.socket!;
      state.push({ corked: socket.writableCorked, queued: socket.writableLength });
      sendWritten(res);
      state.push({ corked: socket.writableCorked, queued: socket.writableLength });
      sendWritten(res); // nothing left: a no-op
      // The chunks after it, and node's own uncork on the next tick, still frame and order right.
      writeChunk(chunkSocket(res)!, Buffer.from('data: second\n\n'));
      res.write('data: third\n\n');
      process.nextTick(() => res.end('data: [DONE]\n\n'));
    });
    const { body, chunks } = dechunk(await exchange(port, GET()));
    expect(state[0]!.corked).toBe(1); // node holds the write until the next tick
    expect(state[1]).toEqual({ corked: 0, queued: 0 });
    expect(body).toBe('data: first\n\ndata: second\n\ndata: third\n\ndata: [DONE]\n\n');
    expect(chunks).toBe(4);
  });

  it('is not used for an HTTP/1.0 client, whose body is not chunked', async () => {
    let socket: unknown = 'unset';
    const port = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: a\n\n');
      socket = chunkSocket(res);
      res.end();
    });
    const wire = (await exchange(port, GET('1.0'))).toString('latin1');
    expect(socket).toBeNull();
    expect(wire.endsWith('\r\n\r\ndata: a\n\n')).toBe(true);
  });

  it('is not used for a pipelined response while the one before it holds the socket', async () => {
    const found: (boolean | null)[] = [];
    let firstRes: ServerResponse | null = null;
    const port = await serve((req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write(`${req.url}:`);
      if (req.url === '/a') {
        firstRes = res;
        return; // held open until /b has been looked at
      }
      found.push(chunkSocket(res) !== null);
      res.end('done');
      firstRes!.end('done');
    });
    const wire = await exchange(
      port,
      'GET /a HTTP/1.1\r\nhost: x\r\n\r\nGET /b HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n',
    );
    expect(found).toEqual([false]);
    const text = wire.toString('latin1');
    expect(text.indexOf('/a:')).toBeLessThan(text.indexOf('/b:'));
  });

  it('keeps the pump’s backpressure: the upstream is held while the client reads nothing, and nothing is lost', async () => {
    // ~10 MB: more than loopback's socket buffers hold on either side.
    const events = 100_000;
    let heldBack = -1;
    const upstream = await sseUpstream(events);
    const pool = new Pool(upstream.origin);
    try {
      const port = await serve((_req, res) => {
        void (async () => {
          const pump = new UpstreamPump(() => new ChatStreamRelay(true), new RequestAbort());
          await pump.send(pool, { method: 'POST', path: '/', body: '{}' });
          const first = await pump.first();
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write(first);
          // While the client reads nothing, what node holds for its socket stays bounded: the
          // pump stops reading the upstream at the first write that asks it to wait.
          setTimeout(() => (heldBack = res.socket!.writableLength), 250);
          await pump.rest(res);
          res.end();
        })();
      });
      const { body } = dechunk(await exchange(port, GET(), 300));
      expect(upstream.pushedBack()).toBeGreaterThan(0);
      expect(heldBack).toBeGreaterThanOrEqual(0);
      expect(heldBack).toBeLessThan(256 * 1024);
      expect(body).toBe(
        Array.from({ length: events }, (_, i) => chatEvent(i)).join('') + 'data: [DONE]\n\n',
      );
    } finally {
      await pool.destroy();
      await upstream.close();
    }
  });
});
