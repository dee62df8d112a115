// `npm run bench:ab -- <checkout> --quick --stages --this-flags=… --this-on=pglite+redis` end to
// end, with this checkout as its own base: both stream sections print a TTFT and the CPU a stream
// by thread kind for every side and no stream fails, the stage probe's medians for the proxy and
// both gateways (back to back, also over each turn's first wave) and each gateway's path split
// into its steps, only 'this' gateway's process
// got the extra flag, and only it ran on Redis; with --profiles, each section's CPU profiles of
// both gateways' main threads side by side. No speed is asserted. Without Redis (outside CI)
// the run keeps both gateways embedded.
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { GATEWAY_NODE_FLAGS, REDIS_URL } from '../../bench/gateway-env.ts';
import { redisForTests } from '../redis-reachable.ts';

const SCRIPT = fileURLToPath(new URL('../../bench/ab-streams.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

const redisUp = await redisForTests(REDIS_URL, 'bench:ab test', '--this-on is not tested');

/** Runs bench:ab with this checkout as its own base; its exit code and everything it printed. */
function runAb(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [SCRIPT, ROOT, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let text = '';
    child.stdout.on('data', (c: Buffer) => (text += c.toString()));
    child.stderr.on('data', (c: Buffer) => (text += c.toString()));
    child.on('exit', (exit) => resolve({ code: exit, output: text }));
  });
}

describe('npm run bench:ab', () => {
  it('compares two gateways with the direct call and the bare proxy, stream sections only', async () => {
    const { code, output } = await runAb([
      '--quick',
      '--stages',
      '--this-flags=--no-warnings',
      '--preload=20',
      '--profiles=200',
      ...(redisUp ? ['--this-on=pglite+redis'] : []),
    ]);
    expect(code, output).toBe(0);
    // --preload: the proxy and both gateways, each sent its own non-streamed requests first.
    expect(
      output.match(/^preload: \w+ 20 non-streamed requests at \d+ req\/s, 0 errors$/gm),
    ).toEqual([
      expect.stringContaining('preload: proxy '),
      expect.stringContaining('preload: base '),
      expect.stringContaining('preload: this '),
    ]);
    const flags = /^node flags: base (.*); this (.*)$/m.exec(output);
    expect(flags?.[1]).toContain(GATEWAY_NODE_FLAGS.join(' '));
    expect(flags?.[1]).not.toContain('--no-warnings');
    expect(flags?.[2]).toContain([...GATEWAY_NODE_FLAGS, '--no-warnings'].join(' '));
    if (redisUp)
      expect(output).toMatch(/^backends: base PGlite \+ in-memory limits; this PGlite \+ Redis$/m);
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
          /^\s+\w+\s+\d+\.\d\d \/\s+\d+\.\d\d\s+[+-]\d+\.\d\d\s+\(\d+ streams, 0 errors\)(\s+cpu\/stream main -?\d+ µs, all threads -?\d+ µs \(V8 helpers -?\d+, workers -?\d+\))?$/,
        );
        expect(Number(/\((\d+) streams/.exec(line)?.[1])).toBeGreaterThan(0);
      }
      const lines = output.slice(output.indexOf(section)).split('\n');
      // Back to back, each turn's first wave (the burst after a side's idle spell) and the rest
      // of its streams apart.
      const backToBack = section.startsWith('8 streams');
      for (const [i, name] of ['first wave', 'later waves'].entries()) {
        const wave = lines[5 + i] ?? '';
        if (backToBack)
          expect(wave).toMatch(
            new RegExp(
              `^ {2}${name} of each turn, TTFT p50 \\(added over the proxy\\): direct \\d+\\.\\d\\d \\([+-]\\d+\\.\\d\\d\\), proxy \\d+\\.\\d\\d \\(\\+0\\.00\\), base \\d+\\.\\d\\d \\([+-]\\d+\\.\\d\\d\\), this \\d+\\.\\d\\d \\([+-]\\d+\\.\\d\\d\\)$`,
            ),
          );
        else expect(wave).not.toContain('wave');
      }
      // This checkout's p50 over the base's, with the interval drawn from the rounds.
      const ab = lines[backToBack ? 7 : 5] ?? '';
      expect(ab).toMatch(
        /^ {2}this − base: TTFT p50 [+-]\d+\.\d\d ms \(95% interval [+-]\d+\.\d\d to [+-]\d+\.\d\d\)$/,
      );
      // The host's steal over each side's turns, so a contended VM shows beside the figures.
      const steal = lines[backToBack ? 8 : 6] ?? '';
      expect(steal).toMatch(
        process.platform === 'linux'
          ? /^ {2}host steal over each side's turns \(% of the CPU time\): direct \d+\.\d, proxy \d+\.\d, base \d+\.\d, this \d+\.\d$/
          : /^ {2}host steal over each side's turns \(% of the CPU time\): direct –, proxy –, base –, this –$/,
      );
      // The host's Postgres and Redis CPU over each side's turns: what a gateway on them adds
      // to the 2 cores beside its own process.
      const services = lines[backToBack ? 9 : 7] ?? '';
      if (process.platform === 'linux')
        expect(services).toMatch(
          /^ {2}host's Postgres \+ Redis CPU over each side's turns \(µs a stream\): direct -?\d+ \+ -?\d+, proxy -?\d+ \+ -?\d+, base -?\d+ \+ -?\d+, this -?\d+ \+ -?\d+$/,
        );
      else expect(services).toMatch(/^ {2}stages/);
      const at = lines.findIndex((l) => l.startsWith('  stages (medians'));
      const stages = lines.slice(at + 1, at + 4);
      expect(stages.map((l) => l.trim().split(/\s+/)[0])).toEqual(['proxy', 'base', 'this']);
      for (const line of stages) {
        expect(line).toMatch(
          /^\s+\w+\s+client's send to arrival -?\d+, to upstream \d+, upstream to head \d+ \(loop busy \d+\), head to first write \d+, arrival to first write \d+, its bytes to the kernel \d+ \((\d+) requests; \d+ alone/,
        );
        expect(Number(/\((\d+) requests/.exec(line)?.[1])).toBeGreaterThan(0);
      }
      // The load generator's own wait before it wrote each request, by side.
      expect(lines[at + 4]).toMatch(
        /^ {2}load generator, send to its write of the head \(medians, µs\): proxy \d+, base \d+, this \d+$/,
      );
      // Back to back, the same stages over each turn's first wave.
      const waves = lines.slice(at + 5, at + 9);
      if (section.startsWith('8 streams')) {
        expect(waves[0]).toBe("  stages of each turn's first 8 streams (medians, µs)");
        expect(waves.slice(1).map((l) => l.trim().split(/\s+/)[0])).toEqual([
          'proxy',
          'base',
          'this',
        ]);
        for (const line of waves.slice(1))
          expect(line).toMatch(
            /^\s+\w+\s+to upstream \d+, upstream to head \d+ \(loop busy \d+\), arrival to first write \d+, arrivals spread \d+ \([1-9]\d* requests in [1-9]\d* turns\)$/,
          );
      } else expect(waves.join('\n')).not.toContain('first 8 streams');
      // Each gateway's path to its upstream request split into the steps it publishes.
      const stepsAt = lines.findIndex((l) => l.startsWith("  steps of each gateway's path"));
      expect(stepsAt).toBe(at + (backToBack ? 9 : 5));
      const steps = lines.slice(stepsAt + 1, stepsAt + 3);
      expect(steps.map((l) => l.trim().split(/\s+/)[0])).toEqual(['base', 'this']);
      for (const line of steps)
        expect(line).toMatch(
          /^\s+\w+\s+front -?\d+, observer -?\d+, blacklist -?\d+, key -?\d+, body -?\d+, validated -?\d+, (rpm -?\d+, )?reserved -?\d+, planned -?\d+, upstream -?\d+ \([1-9]\d* requests\)$/,
        );
    }
    // --profiles: after the run, each section's main-thread time of both gateways, a stream, by
    // place and by function, with this − base.
    const profiles = output.slice(output.indexOf("gateways' CPU profiles")).split('\n');
    expect(profiles[0]).toBe("gateways' CPU profiles (a sample every 200 µs)");
    for (const section of ['8 streams back to back', '16 streams/s at 50 tokens/s']) {
      const at = profiles.findIndex((l) => l.startsWith(`  ${section}, CPU profiles`));
      const head = new RegExp(
        `^ {2}${section.replace('/', '\\/')}, CPU profiles \\(µs a stream; base [1-9]\\d* streams, this [1-9]\\d* streams\\): main thread busy base ([1-9]\\d*), this ([1-9]\\d*); worker threads base \\d+, this \\d+$`,
      ).exec(profiles[at] ?? '');
      expect(head, profiles.join('\n')).not.toBeNull();
      expect(profiles[at + 1]).toBe(
        '       base    this  this−base  main thread, by file or package',
      );
      const byFunction = profiles.indexOf(
        '       base    this  this−base  main thread, by function',
        at,
      );
      const rows = [...profiles.slice(at + 2, byFunction), profiles[byFunction + 1] ?? ''];
      expect(rows.length).toBeGreaterThan(1);
      for (const row of rows) expect(row).toMatch(/^ +\d+ +\d+ +[+-]\d+ {2}\S/);
    }
  }, 120_000);

  it('with --processes=2 runs both sections twice, with fresh processes, and sums the runs', async () => {
    const { code, output } = await runAb(['--quick', '--processes=2']);
    expect(code, output).toBe(0);
    expect(output.match(/^processes \d of 2$/gm)).toEqual(['processes 1 of 2', 'processes 2 of 2']);
    const abLines = [...output.matchAll(/^ {2}this − base: TTFT p50 ([+-]\d+\.\d\d) ms /gm)];
    expect(abLines).toHaveLength(4); // two sections in each of two runs
    const summary = output.slice(output.indexOf('this − base over 2 runs'));
    expect(summary.split('\n')[0]).toBe(
      'this − base over 2 runs, each with its processes started afresh (ms):',
    );
    const titles = ['8 streams back to back', '16 streams/s at 50 tokens/s'];
    titles.forEach((title, i) => {
      const line = summary.split('\n')[1 + i] ?? '';
      // Each run's own figure, in run order, then their mean and the interval over the runs.
      const runs = [abLines[i]![1], abLines[2 + i]![1]];
      expect(line).toMatch(
        new RegExp(
          `^  ${title.replace('/', '\\/')}: \\${runs[0]}, \\${runs[1]}; mean [+-]\\d+\\.\\d\\d \\(95% interval [+-]\\d+\\.\\d\\d to [+-]\\d+\\.\\d\\d\\)$`,
        ),
      );
    });
  }, 240_000);

  it('refuses a --processes that is not a whole number of runs', () => {
    const r = spawnSync(process.execPath, [SCRIPT, ROOT, '--processes=0'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--processes takes a whole number of runs, 1 or more, not "0"');
  });

  it('refuses a --profiles interval under 50 µs, before starting anything', () => {
    const r = spawnSync(process.execPath, [SCRIPT, ROOT, '--profiles=10'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--profiles takes a sampling interval of 50 µs or more, not "10"');
  });

  it('refuses a --this-on that names no store and limiter, before starting anything', () => {
    const r = spawnSync(process.execPath, [SCRIPT, ROOT, '--this-on=redis'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--this-on takes <pg|pglite>+<redis|memory>, not "redis"');
  });
});
