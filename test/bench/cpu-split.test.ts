// `npm run bench:cpu` end to end, small: each side's row has its requests a second, its ratio to
// the proxy and its CPU a request split by thread (the gateway's main thread among them). No speed
// is asserted.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SCRIPT = fileURLToPath(new URL('../../bench/cpu-split.ts', import.meta.url));

function run(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [SCRIPT, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    child.stdout.on('data', (c: Buffer) => (text += c.toString()));
    child.stderr.on('data', (c: Buffer) => (text += c.toString()));
    child.on('exit', (exit) => resolve({ code: exit, output: text }));
  });
}

const ROW =
  /^(\w+)\s+(\d+)\s+(\d+\.\d{3})\s+(-|[\d.]+ \(([^)]*)\)) \+ [\d.]+ \+ [\d.]+ = ([\d.]+)$/m;

describe('npm run bench:cpu', () => {
  it.runIf(process.platform === 'linux')(
    'splits the CPU of a request by process and thread for the proxy and the gateway',
    async () => {
      const { code, output } = await run(['--rounds=2', '--warmup=500']);
      expect(code, output).toBe(0);
      const rows = new Map<string, RegExpExecArray>();
      for (const line of output.split('\n')) {
        const m = ROW.exec(line);
        if (m !== null) rows.set(m[1]!, m);
      }
      expect([...rows.keys()]).toEqual(['proxy', 'gateway']);
      for (const m of rows.values()) {
        expect(Number(m[2])).toBeGreaterThan(0);
        expect(Number(m[6])).toBeGreaterThan(0);
      }
      expect(rows.get('proxy')![3]).toBe('1.000');
      expect(rows.get('gateway')![5]).toMatch(/\bmain [\d.]+/);
    },
    120_000,
  );
});
