// The tokenizer behind usage estimates loads only when an upstream first reports no usage: its
// tables are 20 MB of heap that a gateway whose upstreams all report usage never needs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inputTokenBound, tokenizerLoaded } from '../../src/relay/estimate.ts';
import { startHarness, type Harness } from '../e2e/harness.ts';

let h: Harness;
let key: string;

beforeAll(async () => {
  h = await startHarness();
  ({ key } = await h.account({ balance: '50', realname: true }));
}, 60_000);
afterAll(async () => h?.close());

describe('usage estimates', () => {
  it('bound a prompt by its bytes, plus a bound per image', () => {
    expect(inputTokenBound(120, 0)).toBe(120);
    expect(inputTokenBound(120, 2)).toBe(120 + 3200);
  });

  it('leave the tokenizer unloaded until an upstream omits usage, then count with it', async () => {
    const asked = async (): Promise<string> => {
      const { response } = await h
        .openai(key)
        .chat.completions.create({
          model: 'gpt-x',
          messages: [{ role: 'user', content: 'count me please' }],
        })
        .withResponse();
      return response.headers.get('x-request-id')!;
    };
    const reported = await h.usage(await asked());
    expect(reported.estimated).toBe(false);
    expect(tokenizerLoaded()).toBe(false);

    h.mock.script({ model: 'gpt-x-up', omitUsage: true });
    const row = await h.usage(await asked());
    expect(tokenizerLoaded()).toBe(true);
    expect(row.estimated).toBe(true);
    // The same o200k count the tokenizer gives the prompt's text.
    const { encode } = await import('gpt-tokenizer');
    expect(row.inputTokens).toBe(encode('count me please').length);
  });
});
