// `switchyard accounts …` and `switchyard keys …`: account and key chores on the store the gateway
// of --config DIR uses (Postgres at DATABASE_URL, or the embedded PGlite data directory).
import { nanoToYuan, type Nano } from '../billing/money.ts';
import { formatDiagnostic, sortDiagnostics } from '../config/diagnostics.ts';
import { compileDir } from '../config/source.ts';
import { instant, modelPatterns, requiredText, yuanAmount } from '../admin/input.ts';
import { GatewayError } from '../http/errors.ts';
import { openStore } from '../store/open-store.ts';
import { DataDirBusyError } from '../store/data-dir-lock.ts';
import { createPgliteDriver } from '../store/pglite-driver.ts';
import { DEFAULT_HEARTBEAT_MS, SqlStore, STALE_AFTER_BEATS } from '../store/sql-store.ts';
import type { Account, ApiKey, Store } from '../store/store.ts';
import { StoreError } from '../store/store.ts';
import { flag, type ParsedArgs } from './args.ts';

/** Each verb's usage line and how many positional arguments it takes at most. */
const USAGE: Record<string, { line: string; maxArgs: number }> = {
  'accounts create': {
    line: 'accounts create --name NAME [--realname] [--balance YUAN]',
    maxArgs: 0,
  },
  'accounts topup': { line: 'accounts topup ACCOUNT_ID YUAN [--reason TEXT]', maxArgs: 2 },
  'accounts list': { line: 'accounts list', maxArgs: 0 },
  'keys create': {
    line: 'keys create ACCOUNT_ID [--name NAME] [--models a,b*] [--expires ISO]',
    maxArgs: 1,
  },
  'keys disable': { line: 'keys disable KEY_ID', maxArgs: 1 },
  'keys list': { line: 'keys list [ACCOUNT_ID]', maxArgs: 1 },
};

/** A mistake on the command line (exit 2) or a refusal worth one clear line (exit 1). */
class CliError extends Error {
  readonly exitCode: number;
  constructor(message: string, exitCode: number) {
    super(message);
    this.name = 'CliError';
    this.exitCode = exitCode;
  }
}

type Action = (store: Store) => Promise<void>;

export async function storeCommand(
  verb: 'accounts' | 'keys',
  rest: string[],
  args: ParsedArgs,
): Promise<number> {
  try {
    // Arguments are checked before the store opens (PGlite takes seconds to start).
    const action = parseAction(verb, rest, args);
    const store = await openGatewayStore(flag(args, 'config') ?? 'config');
    try {
      await action(store);
    } finally {
      await store.close();
    }
    return 0;
  } catch (err) {
    if (err instanceof CliError) {
      console.error(`switchyard: ${err.message}`);
      return err.exitCode;
    }
    // Input checks shared with the admin API name the flag or argument that is wrong.
    if (err instanceof GatewayError) {
      console.error(`switchyard: ${err.message}`);
      return 2;
    }
    if (err instanceof StoreError) {
      console.error(`switchyard: ${err.message}`);
      return 1;
    }
    throw err;
  }
}

function parseAction(verb: 'accounts' | 'keys', rest: string[], args: ParsedArgs): Action {
  const [sub = '', ...params] = rest;
  const spec = USAGE[`${verb} ${sub}`];
  if (spec === undefined) {
    const known = Object.entries(USAGE).filter(([k]) => k.startsWith(verb + ' '));
    const lines = known.map(([, u]) => `switchyard ${u.line}`).join('\n  ');
    throw new CliError(`unknown command "${verb} ${sub}"; one of:\n  ${lines}`, 2);
  }
  const usage = `switchyard ${spec.line}`;
  // The flags a verb takes are the ones its usage line shows, plus --config.
  const allowedFlags = new Set([
    'config',
    ...[...spec.line.matchAll(/--([a-z]+)/g)].map((m) => m[1]),
  ]);
  for (const name of args.flags.keys()) {
    if (!allowedFlags.has(name)) throw new CliError(`unknown flag --${name}; usage: ${usage}`, 2);
  }
  if (params.length > spec.maxArgs) throw new CliError(`too many arguments; usage: ${usage}`, 2);
  const need = (i: number, what: string): string => {
    const v = params[i];
    if (v === undefined || v === '') throw new CliError(`missing ${what}; usage: ${usage}`, 2);
    return v;
  };

  switch (`${verb} ${sub}`) {
    case 'accounts create': {
      const name = requiredText(flag(args, 'name'), '--name');
      const balance = flag(args, 'balance');
      const initial = balance === null ? null : yuanAmount(balance, '--balance', 'positive');
      const realnameVerified = args.flags.get('realname') === true;
      return (store) => createAccount(store, name, realnameVerified, initial);
    }
    case 'accounts topup': {
      const accountId = need(0, 'ACCOUNT_ID');
      const amount = yuanAmount(need(1, 'YUAN'), 'YUAN', 'positive');
      const reason = flag(args, 'reason') ?? 'topup (CLI)';
      return (store) => topup(store, accountId, amount, reason);
    }
    case 'accounts list':
      return listAccounts;
    case 'keys create': {
      const accountId = need(0, 'ACCOUNT_ID');
      const models = flag(args, 'models');
      const allowedModels =
        models === null
          ? null
          : modelPatterns(
              models
                .split(',')
                .map((m) => m.trim())
                .filter((m) => m !== ''),
              '--models',
            );
      const expires = flag(args, 'expires');
      const expiresAt = expires === null ? null : instant(expires, '--expires');
      if (expiresAt !== null && expiresAt.getTime() <= Date.now()) {
        throw new CliError('--expires is in the past; the key would never work', 2);
      }
      const name = flag(args, 'name') ?? '';
      return (store) => createKey(store, accountId, name, allowedModels, expiresAt);
    }
    case 'keys disable': {
      const keyId = need(0, 'KEY_ID');
      return async (store) => {
        const key = await store.disableKey(keyId);
        console.log(`disabled key ${key.id} (${key.keyPrefix}…) of account ${key.accountId}`);
      };
    }
    default: {
      const accountId = params[0] ?? null;
      return (store) => listKeys(store, accountId);
    }
  }
}

/** The store of the gateway configured in dir, refusing an embedded store a gateway holds. */
async function openGatewayStore(dir: string): Promise<Store> {
  const { table, diagnostics } = await compileDir(dir, 'validate');
  if (table === null) {
    for (const d of sortDiagnostics(diagnostics)) {
      if (d.severity === 'error') console.error(formatDiagnostic(d));
    }
    throw new CliError(`${dir}: the configuration has errors (see above)`, 1);
  }
  const { url, dataDir } = table.gateway.store;
  if (url !== null) return openStore({ url, dataDir: null, heartbeatMs: 0 });
  if (dataDir === null) {
    throw new CliError(
      `${dir}: gateway.store has neither a url nor a data_dir, so the store would live in memory ` +
        'and vanish on exit; set DATABASE_URL or SWITCHYARD_DATA_DIR',
      1,
    );
  }
  let driver;
  try {
    driver = await createPgliteDriver(dataDir);
  } catch (err) {
    if (err instanceof DataDirBusyError) {
      throw new CliError(
        `the embedded store in ${dataDir} is in use by a running gateway (process ${err.pid}). ` +
          'PGlite allows one process per data directory: stop the gateway first, or use the ' +
          'admin API (/api/accounts, /api/keys) while it runs, or move to Postgres (DATABASE_URL)',
        1,
      );
    }
    throw err;
  }
  try {
    const holder = await liveInstance(driver);
    if (holder !== null) {
      throw new CliError(
        `the embedded store in ${dataDir} is in use by a running gateway (instance ${holder}). ` +
          'PGlite allows one process per data directory: stop the gateway first, or use the ' +
          'admin API (/api/accounts, /api/keys) while it runs, or move to Postgres (DATABASE_URL)',
        1,
      );
    }
  } catch (err) {
    await driver.close();
    throw err;
  }
  return SqlStore.open(driver, { ownsDriver: true, heartbeatMs: 0 });
}

/**
 * PGlite takes no lock on its directory, so a second process would corrupt it. A gateway
 * heartbeats every 5 s into `instances`; one seen within 15 s (3 beats) holds the directory.
 */
async function liveInstance(
  driver: Awaited<ReturnType<typeof createPgliteDriver>>,
): Promise<string | null> {
  const [table] = await driver.query<{ present: boolean }>(
    "SELECT to_regclass('public.instances') IS NOT NULL AS present",
  );
  if (table?.present !== true) return null;
  const staleSeconds = (DEFAULT_HEARTBEAT_MS * STALE_AFTER_BEATS) / 1000;
  const rows = await driver.query<{ id: string }>(
    `SELECT id FROM instances WHERE heartbeat_at > now() - make_interval(secs => $1)
      ORDER BY heartbeat_at DESC LIMIT 1`,
    [staleSeconds],
  );
  return rows[0]?.id ?? null;
}

const yuan = (nano: Nano): string => `¥${nanoToYuan(nano)}`;

function accountLine(a: Account): string {
  const available = a.balanceNano - a.reservedNano;
  return [
    a.id,
    JSON.stringify(a.name),
    `balance ${yuan(a.balanceNano)}`,
    `available ${yuan(available > 0n ? available : 0n)}`,
    a.status,
    a.realnameVerified ? 'real-name verified' : 'not real-name verified',
  ].join('  ');
}

function keyLine(k: ApiKey): string {
  return [
    k.id,
    `${k.keyPrefix}…`,
    `account ${k.accountId}`,
    JSON.stringify(k.name),
    k.status,
    `models ${k.allowedModels === null ? 'all' : k.allowedModels.join(',')}`,
    `expires ${k.expiresAt === null ? 'never' : k.expiresAt.toISOString()}`,
  ].join('  ');
}

async function createAccount(
  store: Store,
  name: string,
  realnameVerified: boolean,
  initial: Nano | null,
): Promise<void> {
  let account = await store.createAccount({ name, realnameVerified });
  if (initial !== null) {
    await store.adjustBalance(account.id, initial, 'topup', 'initial balance (CLI)');
    account = (await store.getAccount(account.id)) ?? account;
  }
  console.log(`created account ${accountLine(account)}`);
}

async function topup(store: Store, accountId: string, amount: Nano, reason: string): Promise<void> {
  const entry = await store.adjustBalance(accountId, amount, 'topup', reason);
  console.log(
    `topped up ${accountId} by ${yuan(amount)}; balance ${yuan(entry.balanceAfterNano)} ` +
      `(ledger entry ${entry.id})`,
  );
}

async function listAccounts(store: Store): Promise<void> {
  const accounts = await store.listAccounts();
  if (accounts.length === 0) console.log('no accounts');
  for (const a of accounts) console.log(accountLine(a));
}

async function createKey(
  store: Store,
  accountId: string,
  name: string,
  allowedModels: string[] | null,
  expiresAt: Date | null,
): Promise<void> {
  const { plaintext, record } = await store.createKey({
    accountId,
    name,
    allowedModels,
    expiresAt,
  });
  console.log(`created key ${keyLine(record)}`);
  console.log(plaintext);
  console.log('Save this key now: it is shown only this once and cannot be recovered.');
}

async function listKeys(store: Store, accountId: string | null): Promise<void> {
  if (accountId !== null && (await store.getAccount(accountId)) === null) {
    throw new CliError(`account ${accountId} does not exist`, 1);
  }
  const keys = await store.listKeys(accountId);
  if (keys.length === 0) console.log('no keys');
  for (const k of keys) console.log(keyLine(k));
}
