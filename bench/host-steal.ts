// The hypervisor's steal time while a side is measured: the share of the machine's CPU time that
// its host ran something else while this VM had work (Linux's `steal` in /proc/stat). The canary
// (procs/canary.ts) sees a stall only when it wakes; steal counts every tick of it, on both cores,
// in every section. On session 56's host it was ~1 tick in 2,000 idle and ~10% of the CPU time
// over its first two full runs, which read direct calls of 8,032 and 4,778 req/s.
import { readFileSync } from 'node:fs';

/** The machine's CPU time so far (clock ticks, all cores): stolen, and in all. */
export interface CpuTicks {
  steal: number;
  total: number;
}

/**
 * The aggregate `cpu` line of /proc/stat: user nice system idle iowait irq softirq steal guest
 * guest_nice. guest and guest_nice are counted inside user and nice already, so the total is the
 * first eight. Null where there is no /proc/stat (not Linux) or its line has another shape.
 */
export function parseCpuTicks(stat: string): CpuTicks | null {
  const end = stat.indexOf('\n');
  const line = end === -1 ? stat : stat.slice(0, end);
  const fields = line.trim().split(/\s+/);
  if (fields[0] !== 'cpu' || fields.length < 9) return null;
  const ticks = fields.slice(1, 9).map(Number);
  if (ticks.some((n) => !Number.isFinite(n))) return null;
  return { steal: ticks[7]!, total: ticks.reduce((a, b) => a + b, 0) };
}

export function cpuTicks(): CpuTicks | null {
  try {
    return parseCpuTicks(readFileSync('/proc/stat', 'latin1'));
  } catch {
    return null;
  }
}

/** Steal summed over one side's turns; a turn with no reading makes the side's figure unknown. */
export class StealCount {
  private steal = 0;
  private total = 0;
  private known = true;

  /** Adds the ticks between two readings taken around one turn. */
  add(before: CpuTicks | null, after: CpuTicks | null): void {
    if (before === null || after === null) {
      this.known = false;
      return;
    }
    this.steal += after.steal - before.steal;
    this.total += after.total - before.total;
  }

  /** Stolen time as a percentage of all the CPU time of the turns; null when not known. */
  percent(): number | null {
    if (!this.known || this.total <= 0) return null;
    return Math.round((1000 * this.steal) / this.total) / 10;
  }
}
