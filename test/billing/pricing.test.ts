// Pricing arithmetic: price schedules, peak windows, campaigns, cache hits and the one rounding.
import { describe, expect, it } from 'vitest';
import { imageCost, tokenCost, tokenReservation } from '../../src/billing/meter.ts';
import { divRound, nanoToYuan, parseScaledDecimal, yuanToNano } from '../../src/billing/money.ts';
import { priceAtEntry } from '../../src/billing/price-at-entry.ts';
import { minuteOfWeek } from '../../src/table/peak-lookup.ts';
import { BASE, compileFiles } from '../config/helpers.ts';

const table = compileFiles({
  ...BASE,
  'campaigns.yaml': `campaigns:
  - id: launch
    starts_at: "2026-01-01T00:00:00+08:00"
    ends_at: "2026-12-01T00:00:00+08:00"
    models: ["chat-*"]
    discount: 0.8
  - id: vip-free
    starts_at: "2026-01-01T00:00:00+08:00"
    ends_at: "2026-12-01T00:00:00+08:00"
    models: [chat-a]
    accounts: [acct_vip]
    discount: 0
`,
}).table!;
const chatA = table.models.get('chat-a')!;

// 2026-11-16 is a Monday. 10:30 Shanghai = 02:30 UTC.
const MON_PEAK = Date.parse('2026-11-16T02:30:00Z');
const MON_NIGHT = Date.parse('2026-11-16T15:00:00Z');

describe('money', () => {
  it('parses and prints exact decimals', () => {
    expect(yuanToNano('12.345678901')).toBe(12_345_678_901n);
    expect(yuanToNano('0.0000000001')).toBeNull();
    expect(nanoToYuan(1n)).toBe('0.000000001');
    expect(nanoToYuan(-2_500_000_000n)).toBe('-2.5');
    expect(parseScaledDecimal('0.1', 3)).toBe(100n);
  });

  it('rounds half away from zero, once', () => {
    expect(divRound(15n, 10n)).toBe(2n);
    expect(divRound(14n, 10n)).toBe(1n);
    expect(divRound(-15n, 10n)).toBe(-2n);
  });
});

describe('price at entry', () => {
  it('a YAML 0.1 compiles to exactly 100 nano-yuan per token (no float)', () => {
    expect(chatA.prices[0]).toMatchObject({
      inputNano: 100n,
      cacheHitNano: 25n,
      outputNano: 2200n,
    });
  });

  it('takes the price schedule entry in force at the instant', () => {
    expect(priceAtEntry(chatA, 'a', Date.parse('2029-12-31T15:59:59Z'))?.price.inputNano).toBe(
      100n,
    );
    expect(priceAtEntry(chatA, 'a', Date.parse('2029-12-31T16:00:00Z'))?.price.inputNano).toBe(
      200n,
    );
  });

  it('applies the peak multiplier only inside the window, in its timezone', () => {
    expect(minuteOfWeek('Asia/Shanghai', MON_PEAK)).toBe(10 * 60 + 30);
    expect(priceAtEntry(chatA, 'a', MON_PEAK)).toMatchObject({
      peakWindowId: 'day',
      peakBp: 15000n,
    });
    expect(priceAtEntry(chatA, 'a', MON_NIGHT)).toMatchObject({
      peakWindowId: null,
      peakBp: 10000n,
    });
  });

  it('knows a clock change that falls on a half hour of UTC (St Johns, Lord Howe)', () => {
    // Regression: the offset was cached per UTC hour, so for the half hour after these changes
    // the gateway priced with the old one (session 21).
    const local = (zone: string, iso: string): number => {
      const parts = new Intl.DateTimeFormat('en-US', {
        timeZone: zone,
        hourCycle: 'h23',
        weekday: 'short',
        hour: 'numeric',
        minute: 'numeric',
      }).formatToParts(new Date(iso));
      const get = (t: string): string => parts.find((p) => p.type === t)!.value;
      const day = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'].indexOf(get('weekday'));
      return day * 1440 + Number(get('hour')) * 60 + Number(get('minute'));
    };
    for (const [zone, iso] of [
      ['America/St_Johns', '2026-03-08T05:45:00Z'],
      ['America/St_Johns', '2026-11-01T04:45:00Z'],
      ['Australia/Lord_Howe', '2026-10-03T15:45:00Z'],
    ] as const) {
      // The hour's start first, as a request in that hour would have been.
      minuteOfWeek(zone, Date.parse(iso) - 40 * 60_000);
      expect(minuteOfWeek(zone, Date.parse(iso)), `${zone} ${iso}`).toBe(local(zone, iso));
    }
  });

  it('applies the best campaign for the account', () => {
    expect(priceAtEntry(chatA, 'acct_other', MON_NIGHT)).toMatchObject({
      campaignId: 'launch',
      campaignBp: 8000n,
    });
    expect(priceAtEntry(chatA, 'acct_vip', MON_NIGHT)).toMatchObject({
      campaignId: 'vip-free',
      campaignBp: 0n,
    });
    expect(
      priceAtEntry(chatA, 'acct_other', Date.parse('2026-12-02T00:00:00Z'))?.campaignId,
    ).toBeNull();
  });
});

describe('metering', () => {
  it('bills input, cache hits and output at their prices, with peak × campaign, rounded once', () => {
    const s = priceAtEntry(chatA, 'acct_other', MON_PEAK)!;
    // (1000×100 + 300×25 + 77×2200) × 1.5 × 0.8 = (100000 + 7500 + 169400) × 1.2 = 332280
    expect(tokenCost({ inputTokens: 1000, cacheHitTokens: 300, outputTokens: 77 }, s)).toBe(
      332_280n,
    );
    // One token at 0.8 × 1.5 of 25 nano = 30 nano exactly; 1 cache token off-peak = 25 × 0.8 = 20.
    expect(tokenCost({ inputTokens: 0, cacheHitTokens: 1, outputTokens: 0 }, s)).toBe(30n);
  });

  it('a free campaign costs nothing', () => {
    const s = priceAtEntry(chatA, 'acct_vip', MON_PEAK)!;
    expect(tokenCost({ inputTokens: 5000, cacheHitTokens: 0, outputTokens: 5000 }, s)).toBe(0n);
  });

  it('the reservation bounds the cost of any usage within it', () => {
    const s = priceAtEntry(chatA, 'acct_other', MON_PEAK)!;
    const bound = tokenReservation(500, 100, s);
    for (const [i, h, o] of [
      [500, 0, 100],
      [0, 500, 100],
      [250, 250, 100],
    ] as const) {
      expect(tokenCost({ inputTokens: i, cacheHitTokens: h, outputTokens: o }, s) <= bound).toBe(
        true,
      );
    }
  });

  it('prices images per image by size tier', () => {
    const t = compileFiles({
      ...BASE,
      'img.yaml':
        'models:\n  - { name: pic, owned_by: x, endpoints: [images_generations], billing: image, channels: [{ channel: openai-main }] }\nprices:\n  - { model: pic, per_image: { "1024x1024": 0.2 } }\n',
    }).table!;
    const s = priceAtEntry(t.models.get('pic')!, 'a', MON_NIGHT)!;
    expect(imageCost('1024x1024', 3, s)).toBe(600_000_000n);
    expect(imageCost('64x64', 1, s)).toBeNull();
  });
});
