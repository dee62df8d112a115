// Logging: pino options for fastify that never write a secret, scrubbers for free text (error
// messages, URLs) and the one access-log line per request.

import { nanoToYuan } from '../billing/money.ts';

export const CENSOR = '[redacted]';

/** Object keys whose values are secrets wherever they appear (pino redacts them by path). */
const SECRET_KEYS = [
  'authorization',
  'apiKey',
  'apiKeys',
  'api_key',
  'token',
  'key',
  'secret',
  'password',
  'cookie',
] as const;

/** Header names with a dash, which pino paths must write in brackets. */
const SECRET_HEADERS = [
  'x-api-key',
  'api-key',
  'x-goog-api-key',
  'proxy-authorization',
  'set-cookie',
] as const;

/**
 * Redaction paths: each secret key at the top level and one or two objects down (`*.apiKey`,
 * `req.headers.authorization` as `*.*.authorization`). pino paths have no "any depth" wildcard,
 * so a secret three objects down is not caught: log flat objects.
 */
export const REDACT_PATHS: readonly string[] = [
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  ...SECRET_KEYS.flatMap((k) => [k, `*.${k}`, `*.*.${k}`]),
  ...SECRET_HEADERS.flatMap((h) => [`*["${h}"]`, `*.*["${h}"]`]),
];

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

/**
 * Scrubs every string argument of a log call: redaction works on object paths, but fastify logs
 * an error's message as the line's `msg`, where an upstream may have quoted a key.
 */
function scrubLogArguments(
  this: unknown,
  args: unknown[],
  method: (...args: never[]) => void,
): void {
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (typeof a === 'string') args[i] = scrubSecrets(a);
  }
  Reflect.apply(method, this, args);
}

export interface SwitchyardLoggerOptions {
  level: string;
  redact: { paths: string[]; censor: string };
  hooks: { logMethod: typeof scrubLogArguments };
  serializers: {
    req: typeof serializeRequest;
    res: typeof serializeReply;
    err: typeof serializeError;
  };
}

/** Options for `fastify({ logger: loggerOptions(level) })` (pino underneath). */
export function loggerOptions(level: string): SwitchyardLoggerOptions {
  return {
    level,
    redact: { paths: [...REDACT_PATHS], censor: CENSOR },
    hooks: { logMethod: scrubLogArguments },
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

/** Removes strings that look like API keys or bearer tokens; for messages about to be logged or returned. */
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
