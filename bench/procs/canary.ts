// The host-stall canary: an idle process that asks to wake every TICK_MS and records how late each
// wake-up came. Whatever delays it (the other processes on the two cores, another tenant of the
// VM, the hypervisor) delays every side's requests too, so its lateness during a side's windows is
// the floor under that side's latency tail: the report prints it beside the p99s.
import { monotonicUs, percentiles } from '../load.ts';
import { serveParent, toParent, type ParentMessage } from './ipc.ts';

/** 2 ms: fine enough to see a stall of a few ms, 500 wake-ups a second (~1% of one core). */
const TICK_MS = 2;
/** 15 minutes of ticks; older samples are overwritten (the benchmark asks within seconds). */
const CAPACITY = (15 * 60 * 1000) / TICK_MS;

const atUs = new Float64Array(CAPACITY);
const lateMs = new Float32Array(CAPACITY);
let count = 0;

let expected = monotonicUs() + TICK_MS * 1000;
const tick = (): void => {
  const now = monotonicUs();
  const i = count % CAPACITY;
  atUs[i] = now;
  lateMs[i] = Math.max(0, (now - expected) / 1000);
  count++;
  expected = now + TICK_MS * 1000;
  setTimeout(tick, TICK_MS);
};
setTimeout(tick, TICK_MS);

function lateness(windows: [number, number][]): number[] {
  const out: number[] = [];
  const n = Math.min(count, CAPACITY);
  for (let k = 0; k < n; k++) {
    const t = atUs[k]!;
    for (const [from, to] of windows) {
      if (t >= from && t <= to) {
        out.push(lateMs[k]!);
        break;
      }
    }
  }
  return out;
}

serveParent(
  async () => undefined,
  (msg: ParentMessage) => {
    if (msg.type !== 'lateness') return;
    const samples = lateness(msg.windows);
    const p = percentiles(samples);
    toParent({ type: 'lateness', samples: p.n, p50: p.p50, p99: p.p99, max: p.max });
  },
);
toParent({ type: 'ready', url: '', key: '' });
