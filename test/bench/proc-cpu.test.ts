// bench/proc-cpu.ts's TurnCpu: a side's CPU counts over its own turns only, not over the others';
// and ServiceTurns: the host's Postgres CPU counts to the side whose turn made it work.
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { cpuPerStream, ServiceTurns, TurnCpu } from '../../bench/proc-cpu.ts';
import { describeWithoutPostgres, PG_URL, pgUnreachable } from '../store/pg-server.ts';

function spin(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

describe.skipIf(process.platform !== 'linux')('TurnCpu', () => {
  it("credits a process's CPU to the side whose turn it was", async () => {
    // Both sides are this process: what tells them apart is whose turn the CPU was spent in.
    const cpu = new TurnCpu<'busy' | 'idle' | 'none'>({ busy: process.pid, idle: process.pid });
    for (let round = 0; round < 2; round++) {
      cpu.turn('busy');
      spin(150);
      cpu.turn('idle');
      await sleep(150);
    }
    cpu.turn(null);
    const busy = cpu.perStream('busy', 3)!;
    const idle = cpu.perStream('idle', 3)!;
    // 300 ms of spinning over 3 streams: ~100,000 µs each, in 10 ms ticks.
    expect(busy.mainUs).toBeGreaterThanOrEqual(80_000);
    // The total is never less than its main thread's, though they are read a tick apart.
    expect(busy.allUs).toBeGreaterThanOrEqual(busy.mainUs);
    expect(idle.mainUs).toBeLessThan(busy.mainUs / 4);
    // A side without a process, or without streams, has no figure.
    expect(cpu.perStream('none', 3)).toBeNull();
    expect(cpu.perStream('busy', 0)).toBeNull();
  });
});

describe('cpuPerStream', () => {
  it("floors the process's total at its parts, read a tick apart", () => {
    const at = (main: number, all: number, helpers: number) => ({
      process: { main, all },
      threads: new Map([
        ['main', main],
        ['V8Worker', helpers],
      ]),
    });
    // The total's reads missed a tick the main thread's caught (a fresh-clone run's figures).
    expect(cpuPerStream(at(0, 0, 0), at(310_000, 300_000, 0), 3)).toEqual({
      mainUs: 103_333,
      allUs: 103_333,
      helpersUs: 0,
      workersUs: 0,
    });
    // Otherwise the total stands as read, beyond its named parts (other threads, exited ones).
    expect(cpuPerStream(at(0, 0, 0), at(300_000, 360_000, 30_000), 3)).toEqual({
      mainUs: 100_000,
      allUs: 120_000,
      helpersUs: 10_000,
      workersUs: 0,
    });
    expect(cpuPerStream(null, at(1, 1, 0), 3)).toBeNull();
  });
});

const unreachable = process.platform === 'linux' ? await pgUnreachable() : null;
if (unreachable !== null) describeWithoutPostgres('ServiceTurns', unreachable);
else
  describe.skipIf(process.platform !== 'linux')('ServiceTurns', () => {
    it("credits the host's Postgres CPU to the side whose turn made it work", async () => {
      // One connection held throughout, as the gateway's pool holds its: a backend that ends
      // between two readings moves its CPU into the postmaster's reaped total only once reaped.
      const client = new pg.Client({ connectionString: PG_URL });
      await client.connect();
      const services = new ServiceTurns<'busy' | 'idle' | 'none'>();
      try {
        for (let round = 0; round < 2; round++) {
          services.turn('busy');
          // ~100-300 ms of the backend's CPU on this host.
          await client.query('SELECT count(*) FROM generate_series(1, 3000000)');
          services.turn('idle');
          await sleep(150);
        }
        services.turn(null);
      } finally {
        await client.end();
      }
      const busy = services.perStream('busy', 2)!;
      const idle = services.perStream('idle', 2)!;
      expect(busy.postgresUs).toBeGreaterThanOrEqual(20_000);
      expect(idle.postgresUs).toBeLessThan(busy.postgresUs / 4);
      expect(busy.redisUs).toBeGreaterThanOrEqual(0);
      // A side that had no turn, or no streams, has no figure.
      expect(services.perStream('none', 2)).toBeNull();
      expect(services.perStream('busy', 0)).toBeNull();
    });
  });
