// The mock upstream: the demo core (src/demo) speaking OpenAI (chat, responses, embeddings,
// images) and Anthropic (messages), plus what only tests need: keys, scripted failures, stalls,
// cuts and pacing, call recording, and /__mock control routes (for the benchmark).

import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import {
  closeServer,
  isRecord,
  listen,
  originOf,
  parseBody,
  pathOf,
  readBody,
  send,
  sendError,
  writeReply,
} from '../../src/demo/http-io.ts';
import { ReplyRouter } from '../../src/demo/router.ts';
import { ANTHROPIC_VERSIONS, checkAnthropicAuth, checkBearer } from './auth.ts';
import { BehaviourQueue, type MockBehaviour } from './behaviour.ts';
import { MOCK_VOICE, type MockReply } from './plan.ts';

export type { MockBehaviour } from './behaviour.ts';

/** The key every mock accepts unless `keys` says otherwise. */
export const MOCK_DEFAULT_KEY = 'sk-mock-upstream';
/** 2023-06-01 is what the gateway sends; 2026-10-21 is what @anthropic-ai/sdk 1.x sends. */
export const MOCK_ANTHROPIC_VERSIONS = [...ANTHROPIC_VERSIONS];

export interface MockCall {
  path: string;
  /** The parsed JSON body, or null when it was empty or not JSON. */
  body: unknown;
  headers: IncomingHttpHeaders;
}

export interface MockUpstream {
  /** Base URL without /v1, e.g. http://127.0.0.1:8787; endpoints live under /v1. */
  url: string;
  port: number;
  /** Calls received on /v1 (not the /__mock control routes), oldest first. */
  calls: MockCall[];
  callCount(): number;
  /** Forget calls and queued behaviours. */
  reset(): void;
  /** Queues behaviours; each applies to the next `times` (default 1) matching calls. */
  script(...behaviours: MockBehaviour[]): void;
  close(): Promise<void>;
}

export interface MockUpstreamOptions {
  /** 0 (default) picks a free port. */
  port?: number;
  host?: string;
  /** Accepted API keys (Bearer for OpenAI routes, x-api-key for /v1/messages). */
  keys?: string[];
  /** Keep each call's body and headers in `calls` (default true; the benchmark turns it off). */
  record?: boolean;
}

export async function startMockUpstream(opts: MockUpstreamOptions = {}): Promise<MockUpstream> {
  const keys = new Set(opts.keys ?? [MOCK_DEFAULT_KEY]);
  const record = opts.record ?? true;
  const host = opts.host ?? '127.0.0.1';
  const queue = new BehaviourQueue();
  const router = new ReplyRouter(MOCK_VOICE);
  const calls: MockCall[] = [];
  let count = 0;

  const server = createServer((req, res) => {
    readBody(req).then(
      (raw) => handle(req.method ?? 'GET', pathOf(req), req.headers, res, raw),
      () => res.destroy(),
    );
  });
  // Longer than undici's 4 s keep-alive so a pooled client never writes into a closing socket.
  server.keepAliveTimeout = 65_000;

  function handle(
    method: string,
    path: string,
    headers: IncomingHttpHeaders,
    res: ServerResponse,
    raw: string,
  ): void {
    if (path.startsWith('/__mock/')) {
      control(method, path, raw, res);
      return;
    }
    if (ReplyRouter.isFile(method, path)) {
      // Image URLs are public, like a supplier's signed URLs: no key, not a recorded call.
      writeReply(res, router.route(method, path, {}, null) as MockReply);
      return;
    }
    const body = parseBody(raw);
    count++;
    if (record) calls.push({ path, body, headers });
    const anthropic = path === '/v1/messages';
    const fields: Record<string, unknown> = isRecord(body) ? body : {};
    const model = typeof fields.model === 'string' ? fields.model : null;

    const authError = anthropic ? checkAnthropicAuth(headers, keys) : checkBearer(headers, keys);
    if (authError !== null) {
      sendError(res, anthropic, authError.status, authError.message, null);
      return;
    }
    const behaviour = queue.take(path, model);
    const respond = (): void => {
      if (behaviour?.stall === true) return; // held open until close()
      // An error status, or any status with a scripted body: that answer, as given.
      if (
        behaviour?.status !== undefined &&
        (behaviour.status >= 300 || behaviour.body !== undefined)
      ) {
        const extra =
          behaviour.retryAfter !== undefined
            ? { 'retry-after': String(behaviour.retryAfter) }
            : null;
        if (behaviour.body !== undefined) {
          const text =
            typeof behaviour.body === 'string' ? behaviour.body : JSON.stringify(behaviour.body);
          send(res, behaviour.status, text, extra);
        } else {
          sendError(res, anthropic, behaviour.status, `mock scripted ${behaviour.status}`, extra);
        }
        return;
      }
      const reply = router.route(method, path, fields, behaviour);
      if (reply === null) {
        sendError(res, anthropic, 404, `no mock route for ${method} ${path}`, null);
      } else if (typeof reply === 'string') {
        sendError(res, anthropic, 400, reply, null);
      } else {
        write(res, reply, behaviour);
      }
    };
    if (behaviour?.delayMs !== undefined && behaviour.delayMs > 0)
      setTimeout(respond, behaviour.delayMs);
    else respond();
  }

  function control(method: string, path: string, raw: string, res: ServerResponse): void {
    if (method === 'POST' && path === '/__mock/script') {
      const parsed = parseBody(raw);
      const list = Array.isArray(parsed) ? parsed : [parsed];
      for (const b of list) if (isRecord(b)) queue.add(b as MockBehaviour);
      send(res, 200, JSON.stringify({ queued: queue.size }), null);
    } else if (method === 'GET' && path === '/__mock/calls') {
      send(res, 200, JSON.stringify({ count, calls }), null);
    } else if (method === 'POST' && path === '/__mock/reset') {
      reset();
      send(res, 200, '{"ok":true}', null);
    } else {
      send(res, 404, '{"error":"unknown mock control route"}', null);
    }
  }

  function reset(): void {
    calls.length = 0;
    count = 0;
    queue.clear();
  }

  const port = await listen(server, host, opts.port ?? 0);
  const url = originOf(host, port);
  router.origin = url;

  return {
    url,
    port,
    calls,
    callCount: () => count,
    reset,
    script: (...behaviours) => {
      for (const b of behaviours) queue.add(b);
    },
    close: () => closeServer(server),
  };
}

/** Writes a reply as scripted: cut after n events (half the body), or paced event by event. */
function write(res: ServerResponse, reply: MockReply, behaviour: MockBehaviour | null): void {
  const cut = behaviour?.cutAfterChunks;
  const gap = behaviour?.chunkDelayMs ?? 0;
  if (cut === undefined && (gap <= 0 || !reply.stream)) {
    writeReply(res, reply);
    return;
  }
  if (!reply.stream) {
    const body = reply.parts[0] ?? '';
    res.writeHead(reply.status, { 'content-type': reply.contentType });
    res.write(body.slice(0, body.length >> 1), () => res.destroy());
    return;
  }
  res.writeHead(reply.status, {
    'content-type': reply.contentType,
    'cache-control': 'no-cache',
    connection: 'keep-alive',
  });
  const parts = cut !== undefined ? reply.parts.slice(0, cut) : reply.parts;
  const finish = (): void => {
    if (cut !== undefined) res.destroy();
    else res.end();
  };
  if (gap <= 0) {
    res.write(parts.join(''), finish);
    return;
  }
  let i = 0;
  const next = (): void => {
    if (res.destroyed) return;
    if (i >= parts.length) {
      finish();
      return;
    }
    res.write(parts[i++] as string);
    setTimeout(next, gap);
  };
  next();
}
