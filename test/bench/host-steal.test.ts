// The host's steal time over a side's turns (bench/host-steal.ts): read from /proc/stat's cpu line
// and summed turn by turn, so a run on a contended VM says so beside its figures.
import { describe, expect, it } from 'vitest';
import { parseCpuTicks, StealCount } from '../../bench/host-steal.ts';

const STAT = [
  'cpu  133105 4774 23039 245651 1368 0 9092 46727 0 0',
  'cpu0 66000 2000 11000 123000 600 0 4500 23000 0 0',
  'intr 1 2 3',
].join('\n');

describe('parseCpuTicks', () => {
  it('takes steal and the total of the first eight fields of the aggregate line', () => {
    expect(parseCpuTicks(STAT)).toEqual({
      steal: 46727,
      total: 133105 + 4774 + 23039 + 245651 + 1368 + 0 + 9092 + 46727,
    });
  });

  it('leaves guest time out of the total: the kernel counts it inside user and nice', () => {
    const withGuest = parseCpuTicks('cpu  100 0 0 100 0 0 0 50 40 10\n');
    expect(withGuest).toEqual({ steal: 50, total: 250 });
  });

  it('is null for a line of another shape', () => {
    expect(parseCpuTicks('cpu0 1 2 3 4 5 6 7 8\n')).toBeNull();
    expect(parseCpuTicks('cpu  1 2 3\n')).toBeNull();
    expect(parseCpuTicks('cpu  1 2 x 4 5 6 7 8\n')).toBeNull();
    expect(parseCpuTicks('')).toBeNull();
  });
});

describe('StealCount', () => {
  it('sums the turns and gives stolen time as a share of all the CPU time in them', () => {
    const c = new StealCount();
    c.add({ steal: 10, total: 1000 }, { steal: 30, total: 1200 });
    c.add({ steal: 50, total: 2000 }, { steal: 50, total: 2200 });
    expect(c.percent()).toBe(5);
  });

  it('is unknown when a turn had no reading, or no time passed', () => {
    const missing = new StealCount();
    missing.add({ steal: 0, total: 0 }, { steal: 1, total: 100 });
    missing.add(null, { steal: 1, total: 200 });
    expect(missing.percent()).toBeNull();
    expect(new StealCount().percent()).toBeNull();
  });
});
