// The model routes are served by node:http ahead of fastify (src/http/model-front.ts, decision
// 0029). What a client sees must not change: authentication before the body, the body limit, the
// content type, the error object with the request id, and the routes fastify still serves.
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ModelFront } from '../../src/http/model-front.ts';
import { startHarness, type Harness } from './harness.ts';

let h: Harness;
let key: string;

beforeAll(async () => {
  h = await startHarness();
  ({ key } = await h.account({ balance: '10' }));
}, 60_000);
afterAll(async () => h?.close());

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * Sends the head of a POST and, unless `body` is null, its body. With `body` null the request is
 * left open: the answer can only come before the body, as a 401 or an announced 413 must.
 */
function post(
  base: string,
  path: string,
  headers: Record<string, string>,
  body: string | null,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, { method: 'POST', headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text });
        req.destroy();
      });
    });
    req.on('error', reject);
    req.flushHeaders();
    if (body !== null) req.end(body);
  });
}

/** A POST to the chat route of the harness's gateway. */
function postChat(headers: Record<string, string>, body: string | null): Promise<Answer> {
  return post(h.gateway.url, '/v1/chat/completions', headers, body);
}

/** A JSON body with the test key. */
const keyed = (): Record<string, string> => ({
  'content-type': 'application/json',
  authorization: `Bearer ${key}`,
});

const chat = JSON.stringify({ model: 'gpt-x', messages: [{ role: 'user', content: 'hi' }] });

function errorOf(a: Answer): { code: string; type: string; request_id: string; message: string } {
  return (JSON.parse(a.body) as { error: never }).error;
}

describe('the model front', () => {
  it('answers 401 before the body is sent: a caller without a valid key costs no body read', async () => {
    const a = await postChat(
      {
        'content-type': 'application/json',
        'content-length': '5000',
        authorization: 'Bearer sk-sy-not-a-key',
      },
      null,
    );
    expect(a.status).toBe(401);
    expect(errorOf(a)).toMatchObject({ code: 'invalid_token', type: 'switchyard_api_error' });
    expect(errorOf(a).request_id).toBe(a.headers['x-request-id']);
  });

  it('checks the key before the content type and the JSON: a bad key is 401 whatever the body', async () => {
    const bad = { authorization: 'Bearer sk-sy-not-a-key' };
    const form = await postChat({ ...bad, 'content-type': 'text/plain' }, 'hello');
    expect(form.status).toBe(401);
    const broken = await postChat({ ...bad, 'content-type': 'application/json' }, '{"model": ');
    expect(broken.status).toBe(401);
    expect(errorOf(broken).code).toBe('invalid_token');
  });

  it('answers 500 with the request id when the gateway itself fails, and goes on serving', async () => {
    const ctx = h.gateway.ctx;
    const observe = ctx.observe;
    ctx.observe = () => {
      throw new Error('observer broke');
    };
    let broken: Answer;
    try {
      broken = await postChat(keyed(), chat);
    } finally {
      ctx.observe = observe;
    }
    expect(broken.status).toBe(500);
    expect(errorOf(broken).code).toBe('internal_error');
    expect(errorOf(broken).request_id).toBe(broken.headers['x-request-id']);
    const next = await postChat(keyed(), chat);
    expect(next.status).toBe(200);
  });

  it('answers 413 for an announced oversized body before it is sent', async () => {
    const a = await postChat(
      {
        'content-type': 'application/json',
        'content-length': String(64 * 1024 * 1024),
        authorization: `Bearer ${key}`,
      },
      null,
    );
    expect(a.status).toBe(413);
    expect(errorOf(a).code).toBe('request_too_large');
  });

  it('answers 413 for a chunked body that grows past the limit', async () => {
    const big = JSON.stringify({
      model: 'gpt-x',
      messages: [{ role: 'user', content: 'x'.repeat(11 * 1024 * 1024) }],
    });
    const a = await postChat(
      {
        'content-type': 'application/json',
        'transfer-encoding': 'chunked',
        authorization: `Bearer ${key}`,
      },
      big,
    );
    expect(a.status).toBe(413);
    expect(errorOf(a).code).toBe('request_too_large');
  });

  it('reads a body as JSON only: 415 for another content type, before the body is read', async () => {
    const calls = h.mock.callCount();
    const auth = { authorization: `Bearer ${key}` };
    const malformed = await postChat({ ...auth, 'content-type': 'json' }, chat);
    expect(malformed.status).toBe(415);
    expect(errorOf(malformed).code).toBe('unsupported_media_type');

    const form = await postChat(
      { ...auth, 'content-type': 'application/x-www-form-urlencoded', 'content-length': '5000' },
      null,
    );
    expect(form.status).toBe(415);
    expect(errorOf(form).message).toBe('send the body as application/json');

    const none = await postChat({ ...auth, 'content-length': '0' }, '');
    expect(none.status).toBe(400);
    expect(errorOf(none).message).toBe('the request body must be a JSON object');

    const empty = await postChat({ ...auth, 'content-type': 'application/json' }, '');
    expect(empty.status).toBe(400);
    expect(errorOf(empty).message).toBe('the request body is empty');
    expect(h.mock.callCount()).toBe(calls);
  });

  it('reads a body however it arrives, and keeps a connection serving after each', async () => {
    // A body that comes whole with the head is taken from the stream's buffer (model-front.ts,
    // bufferedBody); one after the head, in pieces or chunked goes through 'data' and 'end'. All
    // on one keep-alive connection: each way must leave the socket reading the next request.
    const socket = connect(Number(new URL(h.gateway.url).port), '127.0.0.1');
    await once(socket, 'connect');
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (c: string) => (received += c));
    const head = (length: number | null): string =>
      'POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n' +
      `authorization: Bearer ${key}\r\n` +
      (length === null ? 'transfer-encoding: chunked\r\n' : `content-length: ${length}\r\n`) +
      '\r\n';
    const pause = (): Promise<void> => new Promise((r) => setTimeout(r, 30));
    /** Waits for the next whole answer (status line, headers, content-length body). */
    const answer = async (): Promise<{ status: number; body: string }> => {
      for (;;) {
        const end = received.indexOf('\r\n\r\n');
        const length = /content-length: (\d+)/i.exec(received.slice(0, end));
        if (end !== -1 && length !== null && received.length >= end + 4 + Number(length[1])) {
          const body = received.slice(end + 4, end + 4 + Number(length[1]));
          const status = Number(received.slice(9, 12));
          received = received.slice(end + 4 + Number(length[1]));
          return { status, body };
        }
        await once(socket, 'data');
      }
    };
    const n = Buffer.byteLength(chat);
    const ways: Array<[string, () => Promise<void>]> = [
      ['whole with the head', async () => void socket.write(head(n) + chat)],
      [
        'after the head',
        async () => {
          socket.write(head(n));
          await pause();
          socket.write(chat);
        },
      ],
      [
        'in two pieces',
        async () => {
          socket.write(head(n) + chat.slice(0, 10));
          await pause();
          socket.write(chat.slice(10));
        },
      ],
      [
        'chunked',
        async () => {
          socket.write(`${head(null)}${n.toString(16)}\r\n${chat}\r\n`);
          await pause();
          socket.write('0\r\n\r\n');
        },
      ],
      ['whole again', async () => void socket.write(head(n) + chat)],
    ];
    try {
      for (const [way, send] of ways) {
        await send();
        const a = await answer();
        expect({ way, status: a.status }).toEqual({ way, status: 200 });
        expect((JSON.parse(a.body) as { object: string }).object).toBe('chat.completion');
      }
      // A body shorter than its content-length is not taken whole: the answer waits for the rest.
      socket.write(head(n + 5) + chat);
      await pause();
      expect(received).toBe('');
      socket.write('     ');
      expect((await answer()).status).toBe(200);
    } finally {
      socket.destroy();
    }
  });

  it('serves a burst of streams sent together, each in full and billed once (paths take turns)', async () => {
    // 16 connections, then 16 streamed requests written in one go: the gateway starts the first
    // paths at once and the rest in later turns of its loop (path-turns.ts, decision 0060).
    const port = Number(new URL(h.gateway.url).port);
    const sockets = await Promise.all(
      Array.from({ length: 16 }, async () => {
        const socket = connect(port, '127.0.0.1');
        await once(socket, 'connect');
        socket.setEncoding('utf8');
        return socket;
      }),
    );
    const calls = h.mock.callCount();
    const body = JSON.stringify({
      model: 'gpt-x',
      stream: true,
      messages: [{ role: 'user', content: 'hi' }],
    });
    const ids = sockets.map((_, i) => `burst-${Date.now()}-${i}`);
    const answers = sockets.map(
      (socket) =>
        new Promise<string>((resolve, reject) => {
          let text = '';
          socket.on('data', (c: string) => {
            text += c;
            if (text.endsWith('0\r\n\r\n')) resolve(text);
          });
          socket.on('error', reject);
        }),
    );
    try {
      sockets.forEach((socket, i) =>
        socket.write(
          'POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n' +
            `authorization: Bearer ${key}\r\nx-request-id: ${ids[i]}\r\n` +
            `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        ),
      );
      const texts = await Promise.all(answers);
      texts.forEach((text, i) => {
        expect(text.startsWith('HTTP/1.1 200')).toBe(true);
        expect(text).toContain(`x-request-id: ${ids[i]}`);
        expect(text).toContain('data: [DONE]');
      });
      expect(h.mock.callCount() - calls).toBe(16);
      const rows = await Promise.all(ids.map((id) => h.usage(id)));
      expect(rows.map((r) => r.status)).toEqual(Array(16).fill('ok'));
      expect(rows.every((r) => r.costNano > 0n)).toBe(true);
    } finally {
      for (const socket of sockets) socket.destroy();
    }
  });

  it('serves a model route with a query string, a JSON content type with parameters, or none', async () => {
    const a = await post(
      h.gateway.url,
      '/v1/chat/completions?trace=1',
      { 'content-type': 'Application/JSON; charset=utf-8', authorization: `Bearer ${key}` },
      chat,
    );
    expect(a.status).toBe(200);
    expect(a.headers['content-type']).toBe('application/json');
    expect(Number(a.headers['content-length'])).toBe(Buffer.byteLength(a.body));
    expect((JSON.parse(a.body) as { object: string }).object).toBe('chat.completion');
    expect(a.headers['x-request-id']).toMatch(/^req_/);
    const untyped = await postChat({ authorization: `Bearer ${key}` }, chat);
    expect(untyped.status).toBe(200);
  });

  it('keeps the Anthropic error shape on the messages route', async () => {
    const a = await post(
      h.gateway.url,
      '/v1/messages',
      {
        'content-type': 'application/json',
        'x-api-key': key,
        'anthropic-version': '2023-06-01',
        'x-request-id': 'caller-chosen-id-1',
      },
      '{"model": ',
    );
    expect(a.status).toBe(400);
    const body = JSON.parse(a.body) as {
      type: string;
      request_id: string;
      error: { code: string };
    };
    expect(body.type).toBe('error');
    expect(body.request_id).toBe('caller-chosen-id-1');
    expect(a.headers['x-request-id']).toBe('caller-chosen-id-1');
  });

  it('leaves every other method and route to fastify', async () => {
    const get = await fetch(`${h.gateway.url}/v1/chat/completions`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(get.status).toBe(404);
    expect(((await get.json()) as { error: { code: string } }).error.code).toBe('not_found');
    const models = await fetch(`${h.gateway.url}/v1/models`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(models.status).toBe(200);
    expect(models.headers.get('x-request-id')).toMatch(/^req_/);
  });

  it('counts a client that goes away mid-body as a 400, and goes on serving', async () => {
    const route = 'route="POST /v1/chat/completions"';
    const gone = async (): Promise<number> => {
      const text = await (await fetch(`${h.gateway.url}/metrics`)).text();
      let n = 0;
      for (const line of text.split('\n'))
        if (line.startsWith('switchyard_requests_total{') && line.includes(route))
          if (line.includes('status="400"')) n += Number(line.split(' ').pop());
      return n;
    };
    const before = await gone();
    await new Promise<void>((resolve) => {
      const req = request(`${h.gateway.url}/v1/chat/completions`, {
        method: 'POST',
        agent: false,
        headers: {
          'content-type': 'application/json',
          'content-length': '5000',
          authorization: `Bearer ${key}`,
        },
      });
      req.on('error', () => resolve());
      req.write('{"model":"gpt-x","messages":[');
      setTimeout(() => req.destroy(), 100);
    });
    let after = before;
    for (let i = 0; i < 50 && after === before; i++) {
      await new Promise((r) => setTimeout(r, 20));
      after = await gone();
    }
    expect(after).toBe(before + 1);
    const next = await postChat(keyed(), chat);
    expect(next.status).toBe(200);
  });

  it('answers 503 service_unavailable once the gateway is closing', async () => {
    const front = new ModelFront(h.gateway.ctx, 1024);
    const server: Server = createServer((req, res) => {
      if (!front.serve(req, res)) res.writeHead(418).end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const headers = keyed();
      const open = await post(base, '/v1/chat/completions', headers, chat);
      expect(open.status).toBe(200);
      front.close();
      const closing = await post(base, '/v1/chat/completions', headers, chat);
      expect(closing.status).toBe(503);
      expect(closing.headers.connection).toBe('close');
      expect(errorOf(closing).code).toBe('service_unavailable');
      expect(errorOf(closing).request_id).toBe(closing.headers['x-request-id']);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});
