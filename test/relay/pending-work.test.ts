import { describe, expect, it } from 'vitest';
import { PendingWork } from '../../src/relay/pending-work.ts';

describe('PendingWork (what close() waits for)', () => {
  it('is idle at once when nothing is pending', async () => {
    const work = new PendingWork();
    await expect(work.idle()).resolves.toBeUndefined();
    expect(work.size).toBe(0);
  });

  it('resolves idle() only when the last pending settlement leaves, and again for a new wave', async () => {
    const work = new PendingWork();
    work.enter();
    work.enter();
    let drained = false;
    const waiting = work.idle().then(() => (drained = true));
    work.leave();
    await Promise.resolve();
    expect(drained).toBe(false);
    expect(work.size).toBe(1);
    work.leave();
    await waiting;
    expect(drained).toBe(true);

    work.enter();
    let second = false;
    const again = work.idle().then(() => (second = true));
    await Promise.resolve();
    expect(second).toBe(false);
    work.leave();
    await again;
    expect(second).toBe(true);
  });
});
