// The temporary blacklist (spec 8.1, the third protection layer): list the restrictions in force,
// restrict a source by hand, lift a restriction. Rule-made and admin-made entries are listed alike.
import type { FastifyInstance } from 'fastify';
import { GatewayError } from '../http/errors.ts';
import type { AdminDeps } from './admin-deps.ts';
import { blacklistJson } from './admin-json.ts';
import {
  blacklistSource,
  bodyObject,
  MAX_BAN_SECONDS,
  positiveInteger,
  requiredText,
} from './input.ts';

export function blacklistRoutes(app: FastifyInstance, deps: AdminDeps): void {
  app.get('/api/blacklist', async () => ({
    data: (await deps.limiter.listBlacklist()).map(blacklistJson),
  }));

  app.post('/api/blacklist', async (req, reply) => {
    const body = bodyObject(req.body, ['source', 'seconds', 'reason']);
    const source = blacklistSource(body.source, 'source');
    const seconds = positiveInteger(body.seconds, 'seconds', MAX_BAN_SECONDS);
    const reason = requiredText(body.reason, 'reason');
    const entry = await deps.limiter.addToBlacklist(source, seconds * 1000, reason);
    reply.code(201);
    return blacklistJson(entry);
  });

  // The source is URL-encoded in the path ("ip%3A203.0.113.7"); fastify decodes it.
  app.delete('/api/blacklist/:source', async (req) => {
    const source = blacklistSource((req.params as { source: string }).source, 'source');
    if (!(await deps.limiter.removeFromBlacklist(source))) {
      throw new GatewayError('not_found', `"${source}" is not blacklisted`);
    }
    return { source, removed: true };
  });
}
