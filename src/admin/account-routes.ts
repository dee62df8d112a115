// Accounts: create, list, read, change status or real-name flag, top up, adjust, and the balance
// statement over a period (opening + topups + adjustments - usage = closing, exactly).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { GatewayError } from '../http/errors.ts';
import type { AdminDeps } from './admin-deps.ts';
import { accountJson, ledgerJson, statementJson } from './admin-json.ts';
import {
  bodyObject,
  instant,
  invalid,
  optionalBoolean,
  queryObject,
  requiredText,
  text,
  yuanAmount,
} from './input.ts';

const idOf = (req: FastifyRequest): string => (req.params as { id: string }).id;

export async function accountOr404(deps: AdminDeps, id: string) {
  const account = await deps.store.getAccount(id);
  if (account === null) throw new GatewayError('not_found', `account "${id}" does not exist`);
  return account;
}

export function accountRoutes(app: FastifyInstance, deps: AdminDeps): void {
  app.post('/api/accounts', async (req, reply) => {
    const body = bodyObject(req.body, ['name', 'realname_verified']);
    const name = requiredText(body.name, 'name');
    const realnameVerified = optionalBoolean(body.realname_verified, 'realname_verified') ?? false;
    const account = await deps.store.createAccount({ name, realnameVerified });
    reply.code(201).send(accountJson(account));
  });

  app.get('/api/accounts', async () => {
    const accounts = await deps.store.listAccounts();
    return { data: accounts.map(accountJson) };
  });

  app.get('/api/accounts/:id', async (req) => accountJson(await accountOr404(deps, idOf(req))));

  app.patch('/api/accounts/:id', async (req) => {
    const id = idOf(req);
    const body = bodyObject(req.body, ['status', 'realname_verified']);
    const status = body.status ?? null;
    if (status !== null && status !== 'active' && status !== 'disabled') {
      throw invalid('status', 'must be "active" or "disabled"');
    }
    const realname = optionalBoolean(body.realname_verified, 'realname_verified');
    if (status === null && realname === null) {
      throw new GatewayError('invalid_parameter_error', 'give status and/or realname_verified');
    }
    let account = await accountOr404(deps, id);
    if (status !== null) account = await deps.store.setAccountStatus(id, status);
    if (realname !== null) account = await deps.store.setAccountRealname(id, realname);
    return accountJson(account);
  });

  app.post('/api/accounts/:id/topup', async (req) => {
    const id = idOf(req);
    const body = bodyObject(req.body, ['amount', 'reason']);
    const amount = yuanAmount(body.amount, 'amount', 'positive');
    const reason = text(body.reason, 'reason', false) ?? 'topup (admin API)';
    const entry = await deps.store.adjustBalance(id, amount, 'topup', reason);
    return { entry: ledgerJson(entry), account: accountJson(await accountOr404(deps, id)) };
  });

  app.post('/api/accounts/:id/adjust', async (req) => {
    const id = idOf(req);
    const body = bodyObject(req.body, ['amount', 'reason']);
    const amount = yuanAmount(body.amount, 'amount', 'nonzero');
    const reason = requiredText(body.reason, 'reason');
    const entry = await deps.store.adjustBalance(id, amount, 'adjust', reason);
    return { entry: ledgerJson(entry), account: accountJson(await accountOr404(deps, id)) };
  });

  app.get('/api/accounts/:id/statement', async (req) => {
    const id = idOf(req);
    const query = queryObject(req.query, ['from', 'to']);
    await accountOr404(deps, id);
    const from = query.from === undefined ? new Date(0) : instant(query.from, 'from');
    // Ledger instants have microseconds and Date.now() floors to the millisecond: one more ms
    // makes a default statement include every row written before the request.
    const to = query.to === undefined ? new Date(Date.now() + 1) : instant(query.to, 'to');
    if (from.getTime() > to.getTime()) throw invalid('to', 'must not be before from');
    return statementJson(await deps.store.statement(id, from, to));
  });
}
