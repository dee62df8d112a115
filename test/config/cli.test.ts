// The CLI as CI uses it: `switchyard validate` exit codes and located messages, `compile --json`
// without secrets, through the real bin.
import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { BASE } from './helpers.ts';

const run = promisify(execFile);
const BIN = new URL('../../bin/switchyard.js', import.meta.url).pathname;

async function cli(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [BIN, ...args], { env: { ...process.env, ...env } });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

async function dirWith(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'switchyard-cli-'));
  await Promise.all(Object.entries(files).map(([n, t]) => writeFile(join(dir, n), t)));
  return dir;
}

describe('switchyard validate', () => {
  it('passes the example config and the production example', async () => {
    const r = await cli(['validate', 'config']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/config: ok — 2 models, 1 channels, version [0-9a-f]{16}/);
    expect((await cli(['validate', 'examples/production'])).code).toBe(0);
  });

  it('fails with every problem located, for CI', async () => {
    const dir = await dirWith({
      ...BASE,
      'bad.yaml': 'prices:\n  - { model: nobody, input: 1, output: 1 }\nchannels:\n  - id: idle\n    protocol: openai\n    base_url: https://idle.example/v1\n',
    });
    const r = await cli(['validate', dir], { TEST_OPENAI_KEY: 'x', TEST_ANTHROPIC_KEY: 'y' });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('bad.yaml:2:14: error: price for unknown model "nobody"');
    expect(r.stderr).toContain('bad.yaml:4:9: error: channel "idle" serves no model');
    expect(r.stderr).toContain('2 error(s)');
  });
});

describe('switchyard compile --json', () => {
  it('prints the table with prices as exact strings and no secret', async () => {
    const dir = await dirWith(BASE);
    const r = await cli(['compile', dir, '--json'], { TEST_OPENAI_KEY: 'sk-very-secret-openai', TEST_ANTHROPIC_KEY: 'sk-ant-very-secret' });
    expect(r.code).toBe(0);
    const table = JSON.parse(r.stdout) as { version: string; models: { name: string; prices: { input_per_million: string }[] }[] };
    expect(table.models.find((m) => m.name === 'chat-a')?.prices[0]?.input_per_million).toBe('0.1');
    expect(r.stdout).not.toContain('very-secret');
    // The version changes when a secret changes, without printing it.
    const r2 = await cli(['compile', dir, '--json'], { TEST_OPENAI_KEY: 'sk-rotated', TEST_ANTHROPIC_KEY: 'sk-ant-very-secret' });
    expect((JSON.parse(r2.stdout) as { version: string }).version).not.toBe(table.version);
  });
});
