// The account and key verbs as an operator runs them: the real `switchyard` bin through npx, on
// the example config, with the embedded store in a temporary data directory.
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashKey } from '../../src/store/key-secret.ts';
import { openStore } from '../../src/store/open-store.ts';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

let parent = '';
let dataDir = '';

beforeAll(async () => {
  parent = await mkdtemp(join(tmpdir(), 'switchyard-cli-'));
  dataDir = join(parent, 'store');
});

afterAll(async () => {
  if (parent !== '') await rm(parent, { recursive: true, force: true });
});

function switchyard(...args: string[]): Promise<Run> {
  const env = { ...process.env, SWITCHYARD_DATA_DIR: dataDir, DATABASE_URL: '' };
  return new Promise((resolve) => {
    execFile(
      'npx',
      ['switchyard', ...args, '--config', 'config'],
      { cwd: join(import.meta.dirname, '../..'), env, timeout: 60_000 },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : -1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

describe('switchyard accounts and keys', { timeout: 180_000 }, () => {
  it('creates an account, tops it up exactly, issues a key once and disables it', async () => {
    const created = await switchyard(
      'accounts',
      'create',
      '--name',
      'CLI Team',
      '--realname',
      '--balance',
      '5.5',
    );
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toContain('"CLI Team"');
    expect(created.stdout).toContain('balance ¥5.5');
    expect(created.stdout).toContain('real-name verified');
    const accountId = /acct_[A-Za-z0-9]{16}/.exec(created.stdout)?.[0] ?? '';
    expect(accountId).not.toBe('');

    const topup = await switchyard(
      'accounts',
      'topup',
      accountId,
      '0.000000001',
      '--reason',
      'test',
    );
    expect(topup.code, topup.stderr).toBe(0);
    expect(topup.stdout).toContain('balance ¥5.500000001');

    const key = await switchyard('keys', 'create', accountId, '--name', 'ci', '--models', 'demo-*');
    expect(key.code, key.stderr).toBe(0);
    const plaintext = /sk-sy-[A-Za-z0-9]{40}/.exec(key.stdout)?.[0] ?? '';
    expect(plaintext).not.toBe('');
    expect(key.stdout).toContain('shown only this once');
    const keyId = /key_[A-Za-z0-9]{16}/.exec(key.stdout)?.[0] ?? '';

    const keys = await switchyard('keys', 'list', accountId);
    expect(keys.code, keys.stderr).toBe(0);
    expect(keys.stdout).toContain(keyId);
    expect(keys.stdout).toContain(plaintext.slice(0, 10));
    expect(keys.stdout).not.toContain(plaintext);
    expect(keys.stdout).not.toContain(hashKey(plaintext));

    const disabled = await switchyard('keys', 'disable', keyId);
    expect(disabled.code, disabled.stderr).toBe(0);
    expect(disabled.stdout).toContain(`disabled key ${keyId}`);

    const accounts = await switchyard('accounts', 'list');
    expect(accounts.stdout).toContain(accountId);

    // What the CLI wrote is what the gateway will read from the same data directory.
    const store = await openStore({ url: null, dataDir, heartbeatMs: 0 });
    try {
      expect((await store.getAccount(accountId))?.balanceNano).toBe(5_500_000_001n);
      const found = await store.findKeyByHash(hashKey(plaintext));
      expect(found?.key).toMatchObject({
        id: keyId,
        status: 'disabled',
        allowedModels: ['demo-*'],
      });
    } finally {
      await store.close();
    }
  });

  it('refuses a mistyped amount or verb with exit code 2 and a one-line reason', async () => {
    const amount = await switchyard('accounts', 'topup', 'acct_x', '1.0000000001');
    expect(amount.code).toBe(2);
    expect(amount.stderr).toContain('more than 9 decimals');
    const verb = await switchyard('keys', 'revoke', 'key_x');
    expect(verb.code).toBe(2);
    expect(verb.stderr).toContain('keys disable KEY_ID');
    const unknownAccount = await switchyard('accounts', 'topup', 'acct_nobody', '1');
    expect(unknownAccount.code).toBe(1);
    expect(unknownAccount.stderr).toContain('acct_nobody');
  });

  it('says clearly that the data directory is held while a gateway runs on it', async () => {
    // A store that heartbeats, like a running gateway's.
    const gateway = await openStore({ url: null, dataDir, heartbeatMs: 5000 });
    try {
      const run = await switchyard('accounts', 'list');
      expect(run.code).toBe(1);
      expect(run.stderr).toContain('in use by a running gateway');
      expect(run.stderr).toContain('admin API');
    } finally {
      await gateway.close();
    }
  });
});
