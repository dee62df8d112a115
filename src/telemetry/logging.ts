// Logging: pino options for fastify that never write a secret, scrubbers for free text (error
// messages, URLs) and the one access-log line per request.

import { nanoToYuan } from '../billing/money.ts';

export const CENSOR = '[redacted]';

/**
 * Object keys whose values are secrets at any depth of a logged object. Matched exactly: header
 * names arrive lower-cased from Node, field names in the spellings the code base uses.
 */
export const SECRET_KEYS: ReadonlySet<string> = new Set([
  'authorization',
  'proxy-authorization',
  'x-api-key',
  'api-key',
  'x-goog-api-key',
  'cookie',
  'set-cookie',
  'apiKey',
  'apiKeys',
  'api_key',
  'api_keys',
  'key',
  'token',
  'accessToken',
  'access_token',
  'refreshToken',
  'secret',
  'password',
]);

/** Deeper than this a logged object is written as it is (4 covers `req.headers.x` with room). */
const MAX_DEPTH = 4;
/** Top-level keys that have serializers below: the raw request, reply and error are not walked. */
const SERIALIZED_KEYS: ReadonlySet<string> = new Set(['req', 'res', 'err']);

function isPlainObject(v: object): v is Record<string, unknown> {
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** The value itself when nothing in it is a secret key; otherwise a copy with those censored. */
function redactValue(value: object, depth: number): object {
  if (Array.isArray(value)) {
    let copy: unknown[] | null = null;
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      if (typeof v !== 'object' || v === null || depth >= MAX_DEPTH) continue;
      const r = redactValue(v, depth + 1);
      if (r !== v) (copy ??= value.slice())[i] = r;
    }
    return copy ?? value;
  }
  if (!isPlainObject(value)) return value;
  let copy: Record<string, unknown> | null = null;
  for (const key in value) {
    const v = value[key];
    let r: unknown;
    if (SECRET_KEYS.has(key)) {
      if (v === undefined || v === null || v === CENSOR) continue;
      r = CENSOR;
    } else if (typeof v === 'object' && v !== null && depth < MAX_DEPTH) {
      if (depth === 0 && SERIALIZED_KEYS.has(key)) continue;
      r = redactValue(v, depth + 1);
      if (r === v) continue;
    } else {
      continue;
    }
    (copy ??= { ...value })[key] = r;
  }
  return copy ?? value;
}

/**
 * Censors every SECRET_KEYS value in a log object, at any depth up to MAX_DEPTH, copying only
 * what changes (the caller's object is never modified). This replaces pino's `redact`, whose
 * wildcard paths cost ~1.3 µs each per line: 39 of them made an access line 52 µs instead of
 * 2.4 µs; this walk adds ~0.2 µs (bench/telemetry-bench.ts, docs/decisions/0006-telemetry.md).
 */
export function redactLogObject(obj: Record<string, unknown>): Record<string, unknown> {
  return redactValue(obj, 0) as Record<string, unknown>;
}

interface RequestLike {
  method?: unknown;
  url?: unknown;
  id?: unknown;
}

interface ReplyLike {
  statusCode?: unknown;
}

interface ErrorLike {
  name?: unknown;
  message?: unknown;
  stack?: unknown;
  code?: unknown;
  statusCode?: unknown;
}

/** The request as logged: method, URL (secret query values removed) and request id; no headers. */
export function serializeRequest(req: RequestLike): { method?: string; url?: string; id?: string } {
  return {
    method: typeof req.method === 'string' ? req.method : undefined,
    url: typeof req.url === 'string' ? scrubUrl(req.url) : undefined,
    id: typeof req.id === 'string' ? req.id : undefined,
  };
}

export function serializeReply(res: ReplyLike): { statusCode?: number } {
  return { statusCode: typeof res.statusCode === 'number' ? res.statusCode : undefined };
}

/** An error as logged, with anything that looks like a key scrubbed from message and stack. */
export function serializeError(err: ErrorLike): {
  type: string;
  message: string;
  stack: string;
  code?: string;
  statusCode?: number;
} {
  return {
    type: typeof err.name === 'string' ? err.name : 'Error',
    message: typeof err.message === 'string' ? scrubSecrets(err.message) : '',
    stack: typeof err.stack === 'string' ? scrubSecrets(err.stack) : '',
    code: typeof err.code === 'string' ? err.code : undefined,
    statusCode: typeof err.statusCode === 'number' ? err.statusCode : undefined,
  };
}

export interface SwitchyardLoggerOptions {
  level: string;
  formatters: { log: typeof redactLogObject };
  hooks: { streamWrite: typeof scrubSecrets };
  serializers: {
    req: typeof serializeRequest;
    res: typeof serializeReply;
    err: typeof serializeError;
  };
}

/**
 * Options for `fastify({ logger: loggerOptions(level) })` (pino underneath). Two layers: fields
 * named like secrets are censored by name (formatters.log), and anything shaped like a key or a
 * bearer token is scrubbed from the finished line (hooks.streamWrite), which also covers the
 * message fastify takes from an error, where an upstream may have quoted a key.
 */
export function loggerOptions(level: string): SwitchyardLoggerOptions {
  return {
    level,
    formatters: { log: redactLogObject },
    hooks: { streamWrite: scrubSecrets },
    serializers: { req: serializeRequest, res: serializeReply, err: serializeError },
  };
}

/**
 * Replaces every occurrence of each known secret (a channel's upstream key, the caller's key)
 * with CENSOR. Longest first, so a secret that contains another is removed whole.
 */
export function redactSecrets(text: string, secrets: readonly string[]): string {
  let out = text;
  const ordered = secrets.filter((s) => s.length > 0).sort((a, b) => b.length - a.length);
  for (const s of ordered) if (out.includes(s)) out = out.split(s).join(CENSOR);
  return out;
}

// `sk-` keys (OpenAI sk-proj-…, Anthropic sk-ant-…, ours sk-sy-…, DeepSeek), Google `AIza…` keys,
// and whatever follows `Bearer `. 8+ characters after `sk-`, so "sk-learn" survives but keys do not.
const SECRET_PATTERN =
  /(?<![A-Za-z0-9_-])(?:sk-[A-Za-z0-9_-]{8,}|AIza[A-Za-z0-9_-]{30,})|\bBearer\s+[^\s"',;]+/gi;

/** Removes what looks like an API key or a bearer token: for text about to be logged or returned. */
export function scrubSecrets(text: string): string {
  return text.replace(SECRET_PATTERN, (m) =>
    m.length > 6 && m.slice(0, 6).toLowerCase() === 'bearer' ? `Bearer ${CENSOR}` : CENSOR,
  );
}

const SECRET_QUERY =
  /([?&](?:api[_-]?key|key|token|access_token|secret|password|signature|sig)=)[^&#]*/gi;

/** A URL with the values of secret-looking query parameters (`?key=`, `?api_key=`) removed. */
export function scrubUrl(url: string): string {
  if (!url.includes('?')) return url;
  return scrubSecrets(url.replace(SECRET_QUERY, `$1${CENSOR}`));
}

/** Token counts as the usage extractors give them; null when the request got no usage. */
export interface AccessLogUsage {
  inputTokens: number;
  cacheHitTokens: number;
  outputTokens: number;
}

export interface AccessLogFields {
  reqId: string;
  route: string;
  /** Null until the body was parsed (e.g. a request rejected by auth). */
  model: string | null;
  channel: string | null;
  status: number;
  usage: AccessLogUsage | null;
  costNano: bigint | null;
  latencyMs: number;
  accountId: string | null;
  /** The key's id, never the key. */
  keyId: string | null;
}

export interface AccessLogLine {
  reqId: string;
  route: string;
  model: string | null;
  channel: string | null;
  status: number;
  tokens: { input: number; cacheHit: number; output: number };
  /** Exact decimal yuan ("0.000123"), from the bigint; null when nothing was metered. */
  costYuan: string | null;
  latencyMs: number;
  accountId: string | null;
  keyId: string | null;
}

/**
 * The one access-log line per request, as the object to log (`app.log.info(line, 'request')`).
 * It carries reqId itself, so log it on the root logger, not on request.log (which binds reqId).
 */
export function accessLogLine(f: AccessLogFields): AccessLogLine {
  const u = f.usage;
  return {
    reqId: f.reqId,
    route: f.route,
    model: f.model,
    channel: f.channel,
    status: f.status,
    tokens: {
      input: u === null ? 0 : u.inputTokens,
      cacheHit: u === null ? 0 : u.cacheHitTokens,
      output: u === null ? 0 : u.outputTokens,
    },
    costYuan: f.costNano === null ? null : nanoToYuan(f.costNano),
    latencyMs: f.latencyMs,
    accountId: f.accountId,
    keyId: f.keyId,
  };
}
