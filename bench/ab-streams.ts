// `npm run bench:ab -- <other checkout>`: the stream sections of `npm run bench` (back to back,
// then at a model's pace) with two gateways side by side in one run: the one in <other checkout>
// (a `git worktree` of the commit to compare with, with node_modules beside it) and this one,
// each with the direct call and the bare proxy, in rotating turns. The TTFT gaps of one change are
// a few tenths of a ms and this host's noise moves them more between runs than that, so a change
// is judged against its base inside one run (decision 0029). `--quick` runs it small.
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { startChild, type BenchChild } from './child.ts';
import {
  chatBody,
  interleavedPacedStreamLoop,
  interleavedStreamLoop,
  type StreamLoopResult,
  type Target,
} from './load.ts';
import type { GatewayArgs } from './procs/gateway.ts';
import type { UpstreamArgs } from './procs/upstream.ts';

setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

const argv = process.argv.slice(2);
const quick = argv.includes('--quick');
const baseDir = argv.find((a) => !a.startsWith('--'));
if (baseDir === undefined) {
  console.error('usage: npm run bench:ab -- <other checkout> [--quick]');
  process.exit(2);
}
// The same sizes as bench/run.ts's stream sections (full) or a few seconds' worth (quick).
const P = quick
  ? { chunks: 20, warmup: 1, turns: 2, turnMs: 500, pacedTurns: 2, pacedTurnMs: 1000 }
  : { chunks: 100, warmup: 8, turns: 8, turnMs: 1000, pacedTurns: 8, pacedTurnMs: 4000 };
/** The gateway's flags and environment as `npm start` serves it (bench/run.ts). */
const FLAGS = ['--max-semi-space-size=16'];
const ENV = { GLIBC_TUNABLES: 'glibc.malloc.trim_threshold=131072' };

type Side = 'direct' | 'proxy' | 'base' | 'this';
const SIDES: readonly Side[] = ['direct', 'proxy', 'base', 'this'];

function show(title: string, results: Record<Side, StreamLoopResult>): void {
  const proxy = results.proxy.ttft.p50;
  console.log(`\n${title}: TTFT p50 / p99, added p50 over the bare proxy (ms)`);
  for (const side of SIDES) {
    const r = results[side];
    const added = r.ttft.p50 - proxy;
    console.log(
      `  ${side.padEnd(7)} ${r.ttft.p50.toFixed(2).padStart(7)} / ${r.ttft.p99.toFixed(2).padStart(7)}` +
        `  ${(added >= 0 ? '+' : '') + added.toFixed(2)}  (${r.streams} streams, ${r.errors} errors)`,
    );
  }
}

const children: BenchChild[] = [];
try {
  const other = (await import(pathToFileURL(join(resolve(baseDir), 'bench', 'child.ts')).href)) as {
    startChild: typeof startChild;
  };
  const upstreamArgs: UpstreamArgs = {
    streamChunks: P.chunks,
    streamGapMs: 1,
    pacedChunks: P.chunks,
    pacedGapMs: 20,
    slowChunks: 10,
    slowGapMs: 250,
  };
  const upstream = await startChild('upstream', 'upstream', upstreamArgs);
  children.push(upstream);
  const gatewayArgs: GatewayArgs = {
    upstream: upstream.url,
    upstreamKey: upstream.key,
    pgUrl: null,
    redisUrl: null,
    slowChannels: 1,
  };
  const [proxy, base, mine] = await Promise.all([
    startChild('proxy', 'proxy', { upstream: upstream.url, key: upstream.key }),
    other.startChild('base', 'gateway', gatewayArgs, FLAGS, ENV),
    startChild('this', 'gateway', gatewayArgs, FLAGS, ENV),
  ]);
  children.push(proxy, base, mine);
  const target = (c: BenchChild): Target => ({ url: c.url, key: c.key });
  const sides = [
    { id: 'direct' as const, target: target(upstream) },
    { id: 'proxy' as const, target: target(proxy) },
    { id: 'base' as const, target: target(base) },
    { id: 'this' as const, target: target(mine) },
  ];
  const between = async (): Promise<void> => {
    collectGarbage();
    await upstream.memory(true);
  };
  const streamed = chatBody('bench-stream', true);
  const backToBack = (slices: number): Promise<Record<Side, StreamLoopResult>> =>
    interleavedStreamLoop(sides, {
      concurrency: 8,
      sliceMs: P.turnMs,
      slices,
      body: streamed,
      between,
    });
  await backToBack(P.warmup);
  show('8 streams back to back', await backToBack(P.turns));
  show(
    '16 streams/s at 50 tokens/s',
    await interleavedPacedStreamLoop(sides, {
      ratePerSec: 16,
      connections: 64,
      sliceMs: P.pacedTurnMs,
      slices: P.pacedTurns,
      body: chatBody('bench-paced', true),
      between,
    }),
  );
} finally {
  for (const c of children.reverse()) await c.stop().catch(() => undefined);
}
