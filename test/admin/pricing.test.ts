// The public price list (GET /api/platform/pricing) as a client reads it: exact decimal strings,
// scheduled price changes, peak windows, and campaigns without the accounts they name.
import { describe, expect, it } from 'vitest';
import { pricingPayload } from '../../src/http/pricing.ts';
import { COMPILED_AT, compileTable } from './helpers.ts';

const table = compileTable();

interface ModelPrices {
  model: string;
  billing: string;
  realname_required: boolean;
  price: { input: string; cache_hit: string; output: string } | null;
  per_image: Record<string, string> | null;
  upcoming: { effective_from: string; input: string; cache_hit: string; output: string }[];
  peak_windows: string[];
  campaigns: string[];
}

interface Payload {
  version: string;
  currency: string;
  unit: string;
  models: ModelPrices[];
  peak_windows: object[];
  campaigns: { id: string; active: boolean }[];
}

const payloadAt = (ms: number): Payload =>
  JSON.parse(JSON.stringify(pricingPayload(table, ms))) as Payload;
const model = (p: Payload, name: string): ModelPrices => {
  const m = p.models.find((x) => x.model === name);
  if (m === undefined) throw new Error(`no model ${name} in the price list`);
  return m;
};

describe('public price list', () => {
  it('lists the price in force as exact yuan-per-1M-token strings, with the change to come', () => {
    const p = payloadAt(COMPILED_AT);
    expect(p).toMatchObject({
      version: table.version,
      currency: 'CNY',
      unit: 'yuan per 1M tokens',
    });
    expect(model(p, 'chat-a')).toEqual({
      model: 'chat-a',
      owned_by: 'acme',
      endpoints: ['chat', 'responses'],
      billing: 'token',
      realname_required: false,
      price: { input: '0.1', cache_hit: '0.025', output: '2.2' },
      per_image: null,
      upcoming: [
        {
          effective_from: '2029-12-31T16:00:00.000Z',
          input: '0.2',
          cache_hit: '0.2',
          output: '3.001',
        },
      ],
      peak_windows: ['weekday-morning'],
      campaigns: ['vip-half-price', 'spring-sale'],
    });
  });

  it('switches to the scheduled price once it takes effect', () => {
    const chat = model(payloadAt(Date.parse('2030-06-01T00:00:00Z')), 'chat-a');
    expect(chat.price).toEqual({ input: '0.2', cache_hit: '0.2', output: '3.001' });
    expect(chat.upcoming).toEqual([]);
    expect(chat.campaigns).toEqual([]);
  });

  it('prices image models per size in yuan, down to one nano-yuan', () => {
    const paint = model(payloadAt(COMPILED_AT), 'paint-1');
    expect(paint).toMatchObject({ billing: 'image', realname_required: true });
    expect(paint.per_image).toEqual({ '1024x1024': '0.2', '512x512': '0.000000001' });
  });

  it('shows peak windows with their multiplier as a string', () => {
    expect(payloadAt(COMPILED_AT).peak_windows).toEqual([
      {
        id: 'weekday-morning',
        timezone: 'Asia/Shanghai',
        days: ['mon', 'tue', 'wed', 'thu', 'fri'],
        ranges: ['09:00-12:00'],
        multiplier: '1.5',
      },
    ]);
  });

  it('lists running and upcoming campaigns, never ended ones nor the accounts a campaign names', () => {
    const p = payloadAt(COMPILED_AT);
    expect(p.campaigns).toEqual([
      {
        id: 'vip-half-price',
        starts_at: '2025-12-31T16:00:00.000Z',
        ends_at: '2026-12-31T16:00:00.000Z',
        models: ['chat-a'],
        discount: '0.5',
        active: true,
        selected_accounts_only: true,
      },
      {
        id: 'spring-sale',
        starts_at: '2027-02-28T16:00:00.000Z',
        ends_at: '2027-03-07T16:00:00.000Z',
        models: ['chat-*', 'paint-1'],
        discount: '0.8',
        active: false,
        selected_accounts_only: false,
      },
    ]);
    const text = JSON.stringify(p);
    expect(text).not.toContain('acct_SecretCustomer01');
    expect(text).not.toContain('long-gone');
    expect(text).not.toContain('"accounts"');
  });

  it('marks an upcoming campaign active once it starts', () => {
    const during = payloadAt(Date.parse('2027-03-02T00:00:00Z'));
    expect(during.campaigns).toEqual([
      expect.objectContaining({ id: 'spring-sale', active: true }),
    ]);
  });
});
