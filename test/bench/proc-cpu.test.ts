// bench/proc-cpu.ts's TurnCpu: a side's CPU counts over its own turns only, not over the others'.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { TurnCpu } from '../../bench/proc-cpu.ts';

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
    // The process's total is read just after its main thread's, so a 10 ms tick that falls
    // between the two reads at a turn's start counts in the total's start and not the thread's:
    // the total's difference can trail the thread's by a tick, two with the kernel's own rounding
    // of the total (10,000 µs a tick over 3 streams; a fresh-clone run read 100,000 and 103,333).
    expect(busy.allUs).toBeGreaterThanOrEqual(busy.mainUs - (2 * 10_000) / 3);
    expect(idle.mainUs).toBeLessThan(busy.mainUs / 4);
    // A side without a process, or without streams, has no figure.
    expect(cpu.perStream('none', 3)).toBeNull();
    expect(cpu.perStream('busy', 0)).toBeNull();
  });
});
