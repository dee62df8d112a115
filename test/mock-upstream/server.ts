// The mock upstream: a real node:http server speaking OpenAI (chat, responses, embeddings,
// images) and Anthropic (messages), scriptable from tests and over HTTP (for the benchmark).

import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  anthropicError,
  anthropicToolName,
  isAnthropicThinking,
  messagesReply,
} from './anthropic-mock.ts';
import { BehaviourQueue, type MockBehaviour } from './behaviour.ts';
import {
  chatReply,
  embeddingsReply,
  imagesReply,
  isOpenAiReasoning,
  modelsReply,
  openAiError,
  openAiToolName,
  responsesReply,
} from './openai-mock.ts';
import { basePlan, toolToCall, type MockPlan, type MockReply } from './plan.ts';

export type { MockBehaviour } from './behaviour.ts';

/** The key every mock accepts unless `keys` says otherwise. */
export const MOCK_DEFAULT_KEY = 'sk-mock-upstream';
/** 2023-06-01 is what the gateway sends; 2026-10-21 is what @anthropic-ai/sdk 1.x sends. */
export const MOCK_ANTHROPIC_VERSIONS = ['2023-06-01', '2026-10-21'];

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

/**
 * Answers that depend only on the plan are built once and reused: a benchmark sends the same
 * request thousands of times, and a cached reply turns each into one socket write.
 */
const REPLY_CACHE_LIMIT = 512;

export async function startMockUpstream(opts: MockUpstreamOptions = {}): Promise<MockUpstream> {
  const keys = new Set(opts.keys ?? [MOCK_DEFAULT_KEY]);
  const record = opts.record ?? true;
  const queue = new BehaviourQueue();
  const calls: MockCall[] = [];
  const cache = new Map<string, MockReply>();
  let count = 0;
  let baseUrl = '';

  const server = createServer((req, res) => {
    readBody(req).then(
      (raw) => handle(req, res, raw),
      () => res.destroy(),
    );
  });
  // Longer than undici's 4 s keep-alive so a pooled client never writes into a closing socket.
  server.keepAliveTimeout = 65_000;

  function handle(req: IncomingMessage, res: ServerResponse, raw: string): void {
    const path = (req.url ?? '/').split('?', 1)[0] ?? '/';
    if (path.startsWith('/__mock/')) {
      control(req.method ?? 'GET', path, raw, res);
      return;
    }
    const body = parseBody(raw);
    count++;
    if (record) calls.push({ path, body, headers: req.headers });
    const anthropic = path === '/v1/messages';
    const fields: Record<string, unknown> = isRecord(body) ? body : {};
    const model = typeof fields.model === 'string' ? fields.model : null;

    const authError = anthropic
      ? checkAnthropicAuth(req.headers, keys)
      : checkBearer(req.headers, keys);
    if (authError !== null) {
      sendError(res, anthropic, authError.status, authError.message, null);
      return;
    }
    const behaviour = queue.take(path, model);
    const respond = (): void => {
      if (behaviour?.stall === true) return; // held open until close()
      if (behaviour?.status !== undefined && behaviour.status >= 300) {
        const headers =
          behaviour.retryAfter !== undefined
            ? { 'retry-after': String(behaviour.retryAfter) }
            : null;
        if (behaviour.body !== undefined) {
          const text =
            typeof behaviour.body === 'string' ? behaviour.body : JSON.stringify(behaviour.body);
          send(res, behaviour.status, text, headers);
        } else {
          sendError(res, anthropic, behaviour.status, `mock scripted ${behaviour.status}`, headers);
        }
        return;
      }
      const reply = route(req.method ?? 'GET', path, fields, behaviour);
      if (reply === null) {
        sendError(res, anthropic, 404, `no mock route for ${req.method} ${path}`, null);
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

  /** The reply for a normal call, a validation message (400), or null (404). */
  function route(
    method: string,
    path: string,
    body: Record<string, unknown>,
    behaviour: MockBehaviour | null,
  ): MockReply | string | null {
    if (method === 'GET' && path === '/v1/models') return modelsReply();
    if (method !== 'POST') return null;
    switch (path) {
      case '/v1/chat/completions': {
        if (typeof body.model !== 'string') return 'you must provide a model parameter';
        if (!Array.isArray(body.messages)) return "Missing required parameter: 'messages'.";
        const tool = toolToCall(body, openAiToolName);
        return cached(path, basePlan(body, behaviour, isOpenAiReasoning(body), tool), chatReply);
      }
      case '/v1/responses': {
        if (typeof body.model !== 'string') return 'you must provide a model parameter';
        return cached(
          path,
          basePlan(body, behaviour, isOpenAiReasoning(body), null),
          responsesReply,
        );
      }
      case '/v1/embeddings':
        if (body.input === undefined) return "Missing required parameter: 'input'.";
        return embeddingsReply(body, behaviour?.omitUsage === true);
      case '/v1/images/generations':
        if (typeof body.prompt !== 'string' || body.prompt.length === 0) {
          return "Missing required parameter: 'prompt'.";
        }
        return imagesReply(body, baseUrl, behaviour?.omitUsage === true);
      case '/v1/messages': {
        if (typeof body.model !== 'string') return 'model: Field required';
        if (typeof body.max_tokens !== 'number') return 'max_tokens: Field required';
        if (!Array.isArray(body.messages)) return 'messages: Field required';
        const tool = toolToCall(body, anthropicToolName);
        return cached(
          path,
          basePlan(body, behaviour, isAnthropicThinking(body), tool),
          messagesReply,
        );
      }
      default:
        return null;
    }
  }

  function cached(path: string, plan: MockPlan, build: (plan: MockPlan) => MockReply): MockReply {
    const key = path + JSON.stringify(plan);
    let reply = cache.get(key);
    if (reply === undefined) {
      if (cache.size >= REPLY_CACHE_LIMIT) cache.clear();
      reply = build(plan);
      cache.set(key, reply);
    }
    return reply;
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

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  baseUrl = `http://${opts.host ?? '127.0.0.1'}:${address.port}`;

  return {
    url: baseUrl,
    port: address.port,
    calls,
    callCount: () => count,
    reset,
    script: (...behaviours) => {
      for (const b of behaviours) queue.add(b);
    },
    close: () =>
      new Promise<void>((resolve) => {
        // Stalled and keep-alive sockets would hold close() open forever.
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () =>
      resolve(
        chunks.length === 1
          ? (chunks[0] as Buffer).toString('utf8')
          : Buffer.concat(chunks).toString('utf8'),
      ),
    );
    req.on('error', reject);
  });
}

function parseBody(raw: string): unknown {
  if (raw.length === 0) return null;
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return null;
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function checkBearer(
  headers: IncomingHttpHeaders,
  keys: Set<string>,
): { status: number; message: string } | null {
  const auth = headers.authorization;
  const key = auth !== undefined && auth.startsWith('Bearer ') ? auth.slice(7) : null;
  if (key === null) return { status: 401, message: "You didn't provide an API key." };
  if (!keys.has(key)) return { status: 401, message: 'Incorrect API key provided.' };
  return null;
}

/**
 * The spec's credential for messages is `x-api-key` with `anthropic-version: 2023-06-01`; the
 * stock @anthropic-ai/sdk 1.x sends `Authorization: Bearer` with version 2026-10-21 instead.
 * Both are accepted, as Anthropic does; any other version, or none, is a 400.
 */
function checkAnthropicAuth(
  headers: IncomingHttpHeaders,
  keys: Set<string>,
): { status: number; message: string } | null {
  const apiKey = headers['x-api-key'];
  const auth = headers.authorization;
  const key =
    typeof apiKey === 'string'
      ? apiKey
      : auth !== undefined && auth.startsWith('Bearer ')
        ? auth.slice(7)
        : null;
  if (key === null || !keys.has(key)) {
    return { status: 401, message: 'invalid x-api-key' };
  }
  const version = headers['anthropic-version'];
  if (typeof version !== 'string' || !MOCK_ANTHROPIC_VERSIONS.includes(version)) {
    return {
      status: 400,
      message: `anthropic-version: header is required and must be one of ${MOCK_ANTHROPIC_VERSIONS.join(', ')}`,
    };
  }
  return null;
}

function sendError(
  res: ServerResponse,
  anthropic: boolean,
  status: number,
  message: string,
  headers: Record<string, string> | null,
): void {
  const body = anthropic ? anthropicError(status, message) : openAiError(status, message);
  send(res, status, JSON.stringify(body), headers);
}

function send(
  res: ServerResponse,
  status: number,
  body: string,
  headers: Record<string, string> | null,
): void {
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    ...headers,
  });
  res.end(body);
}

function write(res: ServerResponse, reply: MockReply, behaviour: MockBehaviour | null): void {
  const cut = behaviour?.cutAfterChunks;
  const gap = behaviour?.chunkDelayMs ?? 0;
  if (!reply.stream) {
    const body = reply.parts[0] ?? '';
    if (cut !== undefined) {
      res.writeHead(reply.status, { 'content-type': 'application/json' });
      res.write(body.slice(0, body.length >> 1), () => res.destroy());
      return;
    }
    send(res, reply.status, body, null);
    return;
  }
  res.writeHead(reply.status, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
  });
  const parts = cut !== undefined ? reply.parts.slice(0, cut) : reply.parts;
  const finish = (): void => {
    if (cut !== undefined) res.destroy();
    else res.end();
  };
  if (gap <= 0) {
    // One write for the whole stream: the client's parser sees the same events either way.
    if (cut !== undefined) res.write(parts.join(''), finish);
    else res.end(parts.join(''));
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
