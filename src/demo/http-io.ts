// The node:http plumbing shared by the demo upstream and the test mock built on it: read a body,
// write a reply or a provider-shaped error, listen on a port, close without waiting on sockets.

import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { anthropicError } from './anthropic-replies.ts';
import { openAiError } from './openai-replies.ts';
import type { Reply } from './plan.ts';

export function readBody(req: IncomingMessage): Promise<string> {
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

/** The parsed JSON body, or null when it is empty or not JSON. */
export function parseBody(raw: string): unknown {
  if (raw.length === 0) return null;
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return null;
  }
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The path without its query string. */
export function pathOf(req: IncomingMessage): string {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

export function send(
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

/** An error in the format of the protocol the path belongs to (/v1/messages is Anthropic's). */
export function sendError(
  res: ServerResponse,
  anthropic: boolean,
  status: number,
  message: string,
  headers: Record<string, string> | null,
): void {
  const body = anthropic ? anthropicError(status, message) : openAiError(status, message);
  send(res, status, JSON.stringify(body), headers);
}

/** A whole reply in one write: the client's parser sees the same SSE events either way. */
export function writeReply(res: ServerResponse, reply: Reply): void {
  if (reply.stream) {
    // Chunked, as suppliers stream: no content-length on an event stream.
    res.writeHead(reply.status, {
      'content-type': reply.contentType,
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
  } else {
    res.writeHead(reply.status, {
      'content-type': reply.contentType,
      'content-length': reply.bytes.length,
    });
  }
  res.end(reply.bytes);
}

/** Listens and returns the port (the one picked when `port` is 0). */
export function listen(server: Server, host: string, port: number): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** Closes at once: stalled and keep-alive sockets would otherwise hold close() open forever. */
export function closeServer(server: Server): Promise<void> {
  return new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
}

/** `http://host:port`, with IPv6 hosts in brackets. */
export function originOf(host: string, port: number): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}
