// The model routes (every POST whose JSON body names a model: chat, messages, responses,
// embeddings, …) served by node:http ahead of fastify. At a model's pace a request's path runs
// cold, and fastify's routing, request and reply objects, hooks and body parser cost ~0.5 ms of a
// stream's first token (decision 0029). The order is the one the fastify routes keep: request id,
// authentication before the body is read, the body limit, then the relay, with every error
// through send-error.ts. Every other request goes on to fastify.
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { GatewayContext } from '../relay/context.ts';
import { relayModelRoute, styleOf } from '../relay/relay.ts';
import { pathStep } from '../telemetry/path-steps.ts';
import { authenticate } from './authenticate.ts';
import { ENDPOINTS, type EndpointDef } from './endpoints.ts';
import { GatewayError } from './errors.ts';
import { PathTurns } from './path-turns.ts';
import { requestIdFrom } from './request-id.ts';
import { toGatewayError, writeError } from './send-error.ts';

/** A model request as the relay sees it: its head, and its body read and parsed. */
export interface ModelCall {
  readonly id: string;
  readonly headers: IncomingHttpHeaders;
  /** The parsed JSON; undefined for no body. */
  readonly body: unknown;
  /** The body's length in bytes (the reservation's input bound). */
  readonly bodyBytes: number;
  /**
   * The answer's headers so far (x-request-id, then x-ratelimit-*), written by one writeHead:
   * node's setHeader validates and stores each header and writeHead then merges them again, ~35
   * µs a request when the path runs cold (profile of the paced streams, decision 0029).
   */
  readonly replyHeaders: Record<string, string>;
}

/** Routes the front serves: POST, a per-model endpoint, a JSON body, a key. */
export function servedByFront(def: EndpointDef): boolean {
  return def.method === 'POST' && def.kind !== null && def.body === 'json' && def.auth !== 'none';
}

const ROUTES: ReadonlyMap<string, EndpointDef> = new Map(
  ENDPOINTS.filter(servedByFront).map((def) => [def.path, def]),
);

type BodyKind = 'none' | 'json';

/**
 * What the body is, from the headers alone. Another content type is 415 before anything is read
 * (docs/errors.md); a body sent with no content type at all is read as JSON, as raw HTTP clients
 * send it.
 */
function bodyKindOf(headers: IncomingHttpHeaders): BodyKind {
  const ct = headers['content-type'];
  if (ct === undefined) {
    const length = headers['content-length'];
    return headers['transfer-encoding'] === undefined && (length === undefined || length === '0')
      ? 'none'
      : 'json';
  }
  const semi = ct.indexOf(';');
  const media = (semi === -1 ? ct : ct.slice(0, semi)).trim().toLowerCase();
  if (media === 'application/json') return 'json';
  throw new GatewayError('unsupported_media_type', 'send the body as application/json');
}

/** Reads the whole body, at most `limit` bytes (413 past it, before reading when announced). */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const announced = Number(req.headers['content-length']);
  if (announced > limit) return Promise.reject(new GatewayError('request_too_large'));
  // A client gone while its key was checked: no 'end' or 'error' would ever come.
  if (req.destroyed) return Promise.reject(unreadable());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const done = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onGone);
      req.off('close', onGone);
    };
    const onData = (chunk: Buffer): void => {
      received += chunk.length;
      if (received > limit) {
        done();
        reject(new GatewayError('request_too_large'));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      done();
      if (!Number.isNaN(announced) && received !== announced) {
        reject(
          new GatewayError('invalid_parameter_error', 'the content-length does not match the body'),
        );
        return;
      }
      // One chunk (a small body) is decoded where it lies: bodyOf only makes a string of it.
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, received));
    };
    // An error, or a close before the end: the client went away mid-body.
    const onGone = (): void => {
      done();
      reject(unreadable());
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onGone);
    req.on('close', onGone);
  });
}

/**
 * The body when all of it came with the head, else null. By the time the key is checked node's
 * parser has pushed the bytes that came in the same read into the stream's buffer (its "complete"
 * comes a callback later), so when they are all `content-length` announced, one read() takes them.
 * Through 'data' and 'end' the same 1 kB body took ~22 µs of a stream's first token on a 12k
 * req/s host: a few ticks of the stream's machinery for bytes already here (probe, session 37).
 * resume() then lets the stream end and close as a read one does, after the path has gone on.
 * Only under the stream's high-water mark: past it the parser paused the socket.
 */
function bufferedBody(req: IncomingMessage, limit: number): Buffer | null {
  const announced = Number(req.headers['content-length']);
  const length = req.readableLength;
  if (length !== announced || length === 0 || length >= req.readableHighWaterMark) return null;
  if (length > limit || req.destroyed) return null; // readBody answers these
  const body = req.read() as Buffer | null;
  req.resume();
  return body;
}

function unreadable(): GatewayError {
  return new GatewayError('invalid_parameter_error', 'the request body could not be read');
}

/** The body as the relay takes it; malformed or empty JSON is the client's 400. */
async function bodyOf(
  req: IncomingMessage,
  limit: number,
): Promise<{ body: unknown; bytes: number }> {
  const kind = bodyKindOf(req.headers);
  if (kind === 'none') return { body: undefined, bytes: 0 };
  const raw = bufferedBody(req, limit) ?? (await readBody(req, limit));
  if (raw.length === 0)
    throw new GatewayError('invalid_parameter_error', 'the request body is empty');
  try {
    return { body: JSON.parse(raw.toString('utf8')), bytes: raw.length };
  } catch (err) {
    throw new GatewayError('invalid_parameter_error', `malformed JSON: ${(err as Error).message}`);
  }
}

async function serveModelRoute(
  ctx: GatewayContext,
  def: EndpointDef,
  id: string,
  req: IncomingMessage,
  res: ServerResponse,
  bodyLimit: number,
): Promise<void> {
  pathStep('front');
  const style = styleOf(def);
  const replyHeaders: Record<string, string> = { 'x-request-id': id };
  const obs = ctx.observe(id, def.name, 'POST', req.headers);
  pathStep('observer');
  let status = 200;
  try {
    const caller = await authenticate(ctx, ctx.tables.current, def, req, obs);
    let read: { body: unknown; bytes: number };
    try {
      read = await bodyOf(req, bodyLimit);
      pathStep('body');
    } catch (err) {
      if (err instanceof GatewayError) obs.rejected('validation', err.code);
      throw err;
    }
    const call: ModelCall = {
      id,
      headers: req.headers,
      body: read.body,
      bodyBytes: read.bytes,
      replyHeaders,
    };
    await relayModelRoute(ctx, def, call, res, caller, obs);
  } catch (err) {
    let gw = toGatewayError(err);
    if (gw === null) {
      ctx.log.error({ err, reqId: id }, 'unhandled error');
      gw = new GatewayError('internal_error', `internal error (request id ${id})`);
    }
    status = gw.status;
    if (!res.headersSent && !res.destroyed) writeError(res, gw, id, style, replyHeaders);
  } finally {
    obs.finish(res.headersSent ? res.statusCode : status);
  }
}

/** Serves the model routes; everything else is the fastify app's. */
export class ModelFront {
  private closing = false;
  private readonly ctx: GatewayContext;
  private readonly bodyLimit: number;
  private readonly turns = new PathTurns();

  constructor(ctx: GatewayContext, bodyLimit: number) {
    this.ctx = ctx;
    this.bodyLimit = bodyLimit;
  }

  /** Takes the request when it is a model route (true); false leaves it to fastify. */
  serve(req: IncomingMessage, res: ServerResponse): boolean {
    if (req.method !== 'POST') return false;
    const url = req.url ?? '';
    const query = url.indexOf('?');
    const def = ROUTES.get(query === -1 ? url : url.slice(0, query));
    if (def === undefined) return false;
    if (this.closing) {
      // As fastify's return503OnClosing: the gateway is stopping, the client should go elsewhere.
      const id = requestIdFrom(req.headers['x-request-id']);
      writeError(
        res,
        new GatewayError('service_unavailable', 'the gateway is shutting down'),
        id,
        styleOf(def),
        { 'x-request-id': id, connection: 'close' },
      );
      return true;
    }
    const id = requestIdFrom(req.headers['x-request-id']);
    this.turns.run(() => this.start(def, id, req, res));
    return true;
  }

  /** Starts the request's path: now, or in a later turn of the loop (path-turns.ts). */
  private start(def: EndpointDef, id: string, req: IncomingMessage, res: ServerResponse): void {
    serveModelRoute(this.ctx, def, id, req, res, this.bodyLimit).catch((err: unknown) => {
      // A failure outside the request's own error handling (the observer, the error writer):
      // the client still gets an answer, or its connection is closed, never left waiting.
      this.ctx.log.error({ err, reqId: id }, 'model route failed');
      if (res.headersSent || res.destroyed) res.destroy();
      else
        writeError(
          res,
          new GatewayError('internal_error', `internal error (request id ${id})`),
          id,
          styleOf(def),
          { 'x-request-id': id },
        );
    });
  }

  /** From now on model requests get 503 (the gateway is closing). */
  close(): void {
    this.closing = true;
  }
}
