// Authentication of a /v1 request from its headers and socket alone, before its body is read: the
// blacklist, the key, the key's own blacklist source and the messages protocol's version header.
// The fastify routes and the model front (model-front.ts) both call it, so an unauthenticated
// call does no upstream work and costs nothing whichever way it came (spec 5.6).
import type { IncomingMessage } from 'node:http';
import type { GatewayContext } from '../relay/context.ts';
import type { RequestObserver } from '../relay/observer.ts';
import { strike, type Caller } from '../relay/relay.ts';
import type { RoutingTable } from '../table/types.ts';
import { pathStep } from '../telemetry/path-steps.ts';
import type { EndpointDef } from './endpoints.ts';
import { GatewayError } from './errors.ts';
import { canonicalIp } from './ip-address.ts';

/** What authentication reads of a request: fastify's request and node's both have it. */
export type RequestHead = Pick<IncomingMessage, 'headers' | 'socket'>;

const PEER = Symbol('switchyard.peer');

/**
 * The connection's peer address in canonical form, worked out once a connection and kept on its
 * socket: a keep-alive connection's later requests skip `isIP`'s regular expressions, ~13 µs of
 * a paced request's path when cold (session 60). A socket's peer never changes.
 */
function peerOf(socket: RequestHead['socket'] & { [PEER]?: string }): string {
  let peer = socket[PEER];
  if (peer === undefined) {
    peer = canonicalIp(socket.remoteAddress ?? 'unknown');
    socket[PEER] = peer;
  }
  return peer;
}

/** The client's address; X-Forwarded-For is believed only from configured trusted proxies. */
export function clientIp(req: RequestHead, table: RoutingTable): string {
  const peer = peerOf(req.socket);
  const trusted = table.gateway.trustedProxies;
  if (trusted.length === 0 || !trusted.includes(peer)) return peer;
  const xff = req.headers['x-forwarded-for'];
  const list = (Array.isArray(xff) ? xff.join(',') : (xff ?? ''))
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  // Walk from the nearest hop back: the first address that is not a trusted proxy is the client.
  for (let i = list.length - 1; i >= 0; i--) {
    const hop = canonicalIp(list[i]!);
    if (!trusted.includes(hop)) return hop;
  }
  return list[0] === undefined ? peer : canonicalIp(list[0]);
}

function credentialOf(req: RequestHead, def: EndpointDef): string | null {
  const auth = req.headers.authorization;
  if (typeof auth === 'string' && auth.startsWith('Bearer ')) return auth.slice(7).trim() || null;
  if (def.auth === 'anthropic') {
    const k = req.headers['x-api-key'];
    if (typeof k === 'string' && k.length > 0) return k;
  }
  return null;
}

/** 403 temp_blacklisted while `source` is banned. */
async function refuseBanned(
  ctx: GatewayContext,
  source: string,
  who: string,
  obs: RequestObserver,
): Promise<void> {
  const ban = await ctx.limiter.isBlacklisted(source);
  if (ban === null) return;
  obs.rejected('blacklist', 'temp_blacklisted');
  throw new GatewayError(
    'temp_blacklisted',
    `${who} is temporarily restricted until ${new Date(ban.untilMs).toISOString()}`,
  );
}

export async function authenticate(
  ctx: GatewayContext,
  table: RoutingTable,
  def: EndpointDef,
  req: RequestHead,
  obs: RequestObserver,
): Promise<Caller> {
  const ipSource = `ip:${clientIp(req, table)}`;
  await refuseBanned(ctx, ipSource, 'this source', obs);
  pathStep('blacklist');
  const plaintext = credentialOf(req, def);
  const result = plaintext === null ? null : await ctx.keys.authenticate(plaintext, req.socket);
  if (result === null || !result.ok) {
    obs.rejected('auth', 'invalid_token');
    await strike(ctx, table, ipSource, 'auth_failure');
    if (result !== null && !result.ok && result.reason === 'account_disabled')
      throw new GatewayError('account_disabled');
    const why =
      result === null
        ? 'no API key was sent'
        : `the API key is ${result.reason === 'unknown_key' ? 'invalid' : result.reason === 'key_expired' ? 'expired' : 'disabled'}`;
    throw new GatewayError('invalid_token', why);
  }
  pathStep('key');
  const key = result.key;
  const source = table.limits.blacklistSource === 'key' ? `key:${key.id}` : ipSource;
  if (source !== ipSource) await refuseBanned(ctx, source, 'this key', obs);
  // Spec 9.2 pins 2023-06-01; newer SDKs send a later date for the same protocol, which upstreams
  // still receive as 2023-06-01. A missing or malformed version is the client's mistake.
  const version = req.headers['anthropic-version'];
  if (
    def.auth === 'anthropic' &&
    (typeof version !== 'string' || !/^\d{4}-\d{2}-\d{2}$/.test(version) || version < '2023-06-01')
  ) {
    obs.rejected('validation', 'invalid_parameter_error');
    throw new GatewayError(
      'invalid_parameter_error',
      'the anthropic-version header is required (2023-06-01)',
    );
  }
  obs.identify({ accountId: key.accountId, keyId: key.id, model: null });
  return {
    keyId: key.id,
    accountId: key.accountId,
    allowedModels: key.allowedModels,
    realnameVerified: result.realnameVerified,
    source,
  };
}
