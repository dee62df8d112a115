// The usage log: filtered listings (newest first, at most 1000 rows) and one request by its id,
// with costs in yuan strings and the price snapshot the request was billed at.
import type { FastifyInstance } from 'fastify';
import { GatewayError } from '../http/errors.ts';
import type { AdminDeps } from './admin-deps.ts';
import { usageJson } from './admin-json.ts';
import { instant, invalid, positiveInteger, queryObject } from './input.ts';

/** The store's own ceiling on one listing. */
const MAX_LIMIT = 1000;

export function usageRoutes(app: FastifyInstance, deps: AdminDeps): void {
  app.get('/api/usage', async (req) => {
    const q = queryObject(req.query, [
      'account_id',
      'key_id',
      'model',
      'client_request_id',
      'from',
      'to',
      'limit',
    ]);
    const from = q.from === undefined ? null : instant(q.from, 'from');
    const to = q.to === undefined ? null : instant(q.to, 'to');
    if (from !== null && to !== null && from.getTime() > to.getTime()) {
      throw invalid('to', 'must not be before from');
    }
    const rows = await deps.store.listUsage({
      accountId: q.account_id ?? null,
      keyId: q.key_id ?? null,
      model: q.model ?? null,
      clientRequestId: q.client_request_id ?? null,
      from,
      to,
      limit: q.limit === undefined ? null : positiveInteger(q.limit, 'limit', MAX_LIMIT),
    });
    return { data: rows.map(usageJson) };
  });

  app.get('/api/usage/:request_id', async (req) => {
    const requestId = (req.params as { request_id: string }).request_id;
    const row = await deps.store.getUsage(requestId);
    if (row === null) {
      throw new GatewayError('not_found', `no usage row for request "${requestId}"`);
    }
    return usageJson(row);
  });
}
