// API keys: create (the plaintext is in this one response and nowhere else, ever), list, disable
// and delete. Listings carry the display prefix only; no route has a field for the hash.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { GatewayError } from '../http/errors.ts';
import { accountOr404 } from './account-routes.ts';
import type { AdminDeps } from './admin-deps.ts';
import { keyJson } from './admin-json.ts';
import { bodyObject, invalid, modelPatterns, optionalInstant, queryObject, text } from './input.ts';

const idOf = (req: FastifyRequest): string => (req.params as { id: string }).id;

export function keyRoutes(app: FastifyInstance, deps: AdminDeps): void {
  app.post('/api/accounts/:id/keys', async (req, reply) => {
    const accountId = idOf(req);
    const body = bodyObject(req.body, ['name', 'allowed_models', 'expires_at']);
    const name = text(body.name, 'name', false) ?? '';
    const allowedModels = modelPatterns(body.allowed_models, 'allowed_models');
    const expiresAt = optionalInstant(body.expires_at, 'expires_at');
    if (expiresAt !== null && expiresAt.getTime() <= Date.now()) {
      throw invalid('expires_at', 'is in the past; the key would never work');
    }
    await accountOr404(deps, accountId);
    const created = await deps.store.createKey({ accountId, name, allowedModels, expiresAt });
    // The plaintext must not linger in any cache between the gateway and the operator.
    reply.code(201).header('cache-control', 'no-store');
    return { key: created.plaintext, record: keyJson(created.record) };
  });

  app.get('/api/keys', async (req) => {
    const query = queryObject(req.query, ['account_id']);
    const keys = await deps.store.listKeys(query.account_id ?? null);
    return { data: keys.map(keyJson) };
  });

  app.get('/api/accounts/:id/keys', async (req) => {
    const accountId = idOf(req);
    await accountOr404(deps, accountId);
    return { data: (await deps.store.listKeys(accountId)).map(keyJson) };
  });

  app.post('/api/keys/:id/disable', async (req) => {
    bodyObject(req.body, []);
    return keyJson(await deps.store.disableKey(idOf(req)));
  });

  app.delete('/api/keys/:id', async (req) => {
    const id = idOf(req);
    if (!(await deps.store.deleteKey(id))) {
      throw new GatewayError('not_found', `key "${id}" does not exist`);
    }
    return { id, deleted: true };
  });
}
