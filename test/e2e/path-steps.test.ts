// A model request's path publishes its steps on the path-step channel (src/telemetry/path-steps.ts)
// while something subscribes, in path order, for `npm run bench:ab -- --stages` to time; a request
// refused on the way publishes the steps it passed and no more.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PATH_STEP_CHANNEL, PATH_STEPS } from '../../src/telemetry/path-steps.ts';
import { startHarness, type Harness } from './harness.ts';

let h: Harness;
let key: string;
const seen: string[] = [];
const listen = (step: unknown): void => {
  seen.push(step as string);
};

beforeAll(async () => {
  h = await startHarness();
  ({ key } = await h.account({ balance: '10' }));
}, 60_000);
afterAll(async () => h?.close());
afterEach(() => {
  unsubscribe(PATH_STEP_CHANNEL, listen);
  seen.length = 0;
});

function chat(model: string, apiKey: string): Promise<Response> {
  return fetch(`${h.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({
      model,
      stream: true,
      max_tokens: 16,
      messages: [{ role: 'user', content: 'hi' }],
    }),
  });
}

describe('path steps', () => {
  it('publishes every step of a streamed chat in path order, the RPM hit where the model has a limit', async () => {
    subscribe(PATH_STEP_CHANNEL, listen);
    const limited = await chat('limited', key);
    expect(limited.status).toBe(200);
    expect(await limited.text()).toContain('data: [DONE]');
    expect(seen).toEqual([...PATH_STEPS]);

    seen.length = 0;
    const plain = await chat('plain', key);
    expect(plain.status).toBe(200);
    await plain.text();
    expect(seen).toEqual(PATH_STEPS.filter((step) => step !== 'rpm'));
  });

  it('stops where a request is refused: a bad key passes the blacklist and no further', async () => {
    subscribe(PATH_STEP_CHANNEL, listen);
    const refused = await chat('plain', 'sk-not-a-key-of-this-gateway-000000000000');
    expect(refused.status).toBe(401);
    expect(seen).toEqual(['front', 'observer', 'blacklist']);
  });
});
