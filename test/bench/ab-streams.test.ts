// `npm run bench:ab -- <checkout> --quick` end to end, with this checkout as its own base: both
// stream sections print a TTFT for every side and no stream fails. No speed is asserted.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SCRIPT = fileURLToPath(new URL('../../bench/ab-streams.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

describe('npm run bench:ab', () => {
  it('compares two gateways with the direct call and the bare proxy, stream sections only', async () => {
    const { code, output } = await new Promise<{ code: number | null; output: string }>(
      (resolve) => {
        const child = spawn(process.execPath, [SCRIPT, ROOT, '--quick'], {
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let text = '';
        child.stdout.on('data', (c: Buffer) => (text += c.toString()));
        child.stderr.on('data', (c: Buffer) => (text += c.toString()));
        child.on('exit', (exit) => resolve({ code: exit, output: text }));
      },
    );
    expect(code, output).toBe(0);
    for (const section of ['8 streams back to back', '16 streams/s at 50 tokens/s']) {
      const block = output.slice(output.indexOf(section)).split('\n').slice(1, 5);
      expect(block.map((l) => l.trim().split(/\s+/)[0])).toEqual([
        'direct',
        'proxy',
        'base',
        'this',
      ]);
      for (const line of block) {
        expect(line).toMatch(
          /^\s+\w+\s+\d+\.\d\d \/\s+\d+\.\d\d\s+[+-]\d+\.\d\d\s+\(\d+ streams, 0 errors\)(\s+cpu\/stream main -?\d+ µs, all threads -?\d+ µs)?$/,
        );
        expect(Number(/\((\d+) streams/.exec(line)?.[1])).toBeGreaterThan(0);
      }
    }
  }, 120_000);
});
