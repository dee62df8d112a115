// The built-in demo upstream behind `base_url: builtin:demo`: an in-process OpenAI- and
// Anthropic-compatible supplier on loopback, so `npm start` answers with no account or network.

import { createServer } from 'node:http';
import { DEMO_VOICE } from './demo-voice.ts';
import {
  closeServer,
  isRecord,
  listen,
  originOf,
  parseBody,
  pathOf,
  readBody,
  sendError,
  writeReply,
} from './http-io.ts';
import type { Reply } from './plan.ts';
import { ReplyRouter } from './router.ts';

export interface DemoUpstream {
  /** Base URL ending in /v1, e.g. http://127.0.0.1:41234/v1. */
  url: string;
  close(): Promise<void>;
}

export interface DemoUpstreamOptions {
  /** Default 127.0.0.1: the demo takes any key, so it must not be reachable from elsewhere. */
  host?: string;
  /** Default 0: a free port picked by the system. */
  port?: number;
}

/**
 * Bodies up to 16 kB are remembered with their reply (512 of them, ≤ 8 MB), so a repeated
 * request skips even JSON.parse: the benchmark replays one body thousands of times.
 */
const RAW_CACHE_LIMIT = 512;
const RAW_CACHE_MAX_BODY = 16 * 1024;

export async function startDemoUpstream(opts: DemoUpstreamOptions = {}): Promise<DemoUpstream> {
  const host = opts.host ?? '127.0.0.1';
  const router = new ReplyRouter(DEMO_VOICE);
  const seen = new Map<string, Reply>();

  const server = createServer((req, res) => {
    readBody(req).then(
      (raw) => {
        const method = req.method ?? 'GET';
        const path = pathOf(req);
        const key = raw.length <= RAW_CACHE_MAX_BODY ? `${method} ${path}\n${raw}` : null;
        const known = key !== null ? seen.get(key) : undefined;
        if (known !== undefined) {
          writeReply(res, known);
          return;
        }
        const body = parseBody(raw);
        const reply = router.route(method, path, isRecord(body) ? body : {}, null);
        const anthropic = path === '/v1/messages';
        if (reply === null) {
          sendError(
            res,
            anthropic,
            404,
            `the Switchyard demo has no route ${method} ${path}`,
            null,
          );
        } else if (typeof reply === 'string') {
          sendError(res, anthropic, 400, reply, null);
        } else {
          if (key !== null && reply.reusable) {
            if (seen.size >= RAW_CACHE_LIMIT) seen.clear();
            seen.set(key, reply);
          }
          writeReply(res, reply);
        }
      },
      () => res.destroy(),
    );
  });
  // Longer than undici's 4 s keep-alive so a pooled client never writes into a closing socket.
  server.keepAliveTimeout = 65_000;

  const port = await listen(server, host, opts.port ?? 0);
  const origin = originOf(host, port);
  router.origin = origin;
  return { url: `${origin}/v1`, close: () => closeServer(server) };
}
