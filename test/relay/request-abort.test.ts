// A request's abort (src/relay/request-abort.ts): aborted once, with its reason; the one call
// listening is told at once and only once; a call that finished and stopped listening is not.
import { describe, expect, it } from 'vitest';
import { RequestAbort } from '../../src/relay/request-abort.ts';

describe('RequestAbort', () => {
  it('tells the listening call once, with the first reason, and stays aborted', () => {
    const abort = new RequestAbort();
    const told: string[] = [];
    abort.listen(() => told.push(abort.reason!.message));
    expect(abort.aborted).toBe(false);
    expect(abort.reason).toBeNull();
    abort.abort(new Error('the client went away'));
    abort.abort(new Error('the upstream exceeded its total time'));
    expect(told).toEqual(['the client went away']);
    expect(abort.aborted).toBe(true);
    expect(abort.reason?.message).toBe('the client went away');
  });

  it('gives an abort without a reason an error of its own', () => {
    const abort = new RequestAbort();
    abort.abort();
    expect(abort.reason).toBeInstanceOf(Error);
    expect(abort.reason?.message).toBe('the call was aborted');
  });

  it('tells no call that stopped listening, and only the latest of successive attempts', () => {
    const abort = new RequestAbort();
    const told: string[] = [];
    const first = (): number => told.push('first attempt');
    const second = (): number => told.push('second attempt');
    abort.listen(first);
    abort.unlisten(first);
    abort.listen(second);
    abort.unlisten(first); // a late unlisten of the earlier attempt leaves the current one
    abort.abort();
    expect(told).toEqual(['second attempt']);
  });
});
