// The benchmark report's goal lines: what a reader of `npm run bench` is told, from a results
// object shaped as bench/run.ts writes it. Speed is never asserted; only how figures are judged.
import { describe, expect, it } from 'vitest';
import type { Percentiles, StreamLoopResult } from '../../bench/load.ts';
import { goals, type BenchResults } from '../../bench/report.ts';

const pct = (p50: number): Percentiles => ({ n: 64, mean: p50, p50, p90: p50, p99: p50, max: p50 });

function streams(p50: number, turns?: number[]): StreamLoopResult {
  return {
    concurrency: 8,
    connections: 8,
    streams: 64,
    errors: 0,
    firstError: null,
    eventsPerStream: 104,
    ttft: pct(p50),
    ttlt: pct(130),
    ...(turns === undefined ? {} : { turnTtftP50: turns }),
  };
}

function results(stream: BenchResults['stream']): BenchResults {
  return {
    sides: ['direct', 'proxy', 'gateway'],
    params: { streamConcurrency: 8, pacedRate: 16, pacedGapMs: 20 },
    throughput: {},
    latency: { ratePerSec: 500, results: {}, hostStall: {}, memoryTrims: {} },
    stream,
    memory: {
      afterWarmup: {},
      longRun: { side: 'gateway', requests: 0, samples: [] },
      openStreams: {},
    },
  } as unknown as BenchResults;
}

const backToBack = (r: BenchResults) =>
  goals(r).find((g) => g.goal === 'TTFT p50 within 1 ms of proxy, 8 streams back to back');

describe('the TTFT goal lines', () => {
  it('judge the pooled p50 and show the gateway minus the proxy round by round', () => {
    const g = backToBack(
      results({
        proxy: streams(2.0, [2.0, 2.1, 1.9, 2.0]),
        gateway: streams(2.9, [2.1, 4.5, 2.3, 2.5]),
      }),
    );
    expect(g?.met).toBe(true);
    expect(g?.measured).toBe('0.900 ms (rounds +0.10–+2.40, median +0.45)');
  });

  it('still miss on the pooled figure when most rounds were within the goal', () => {
    const g = backToBack(
      results({
        proxy: streams(2.0, [2.0, 2.0, 2.0]),
        gateway: streams(3.2, [2.5, 2.6, 5.0]),
      }),
    );
    expect(g?.met).toBe(false);
    expect(g?.measured).toBe('1.200 ms (rounds +0.50–+3.00, median +0.60)');
  });

  it("show a 95% interval drawn from the rounds when the turns' streams were kept", () => {
    const proxyTurns = [
      [2.0, 2.2],
      [1.8, 2.0],
      [2.1, 2.3],
    ];
    const withTurns = (p50: number, turns: number[][], add: number): StreamLoopResult => ({
      ...streams(
        p50,
        turns.map((t) => t[0]! + add),
      ),
      turnTtfts: turns.map((t) => t.map((v) => v + add)),
    });
    const g = backToBack(
      results({ proxy: withTurns(2.0, proxyTurns, 0), gateway: withTurns(2.5, proxyTurns, 0.5) }),
    );
    expect(g?.met).toBe(true);
    expect(g?.measured).toBe(
      '0.500 ms (rounds +0.50–+0.50, median +0.50; 95% interval +0.50 to +0.50)',
    );
  });

  it('read results written before the turns were kept, without a spread', () => {
    const g = backToBack(results({ proxy: streams(2.0), gateway: streams(2.4) }));
    expect(g?.met).toBe(true);
    expect(g?.measured).toBe('0.400 ms');
  });
});
