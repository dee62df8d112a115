// Every validation rule, one fixture per mistake, each with the place the user must edit.
import { describe, expect, it } from 'vitest';
import { BASE, compileFiles, errors, type Files } from './helpers.ts';

function withFile(name: string, text: string): Files {
  return { ...BASE, [name]: text };
}

function only(files: Files, mode: 'validate' | 'serve' = 'validate') {
  const result = compileFiles(files, { mode });
  return { ...result, errors: errors(result.diagnostics) };
}

describe('validate: a correct config', () => {
  it('compiles with no diagnostics', () => {
    const { table, diagnostics } = compileFiles(BASE);
    expect(diagnostics).toEqual([]);
    expect(table?.models.size).toBe(2);
  });
});

describe('validate: schema shape', () => {
  it('reports an unknown field at the key, with file, line and column', () => {
    const r = only(withFile('extra.yaml', 'limits:\n  rpm:\n    defualt: 10\n'));
    expect(r.table).toBeNull();
    expect(r.errors).toEqual([
      expect.objectContaining({ file: 'extra.yaml', line: 3, col: 5, message: expect.stringContaining('unknown field "defualt"') }),
    ]);
  });

  it('reports a wrong type and a missing required field in one run', () => {
    const r = only(
      withFile('bad.yaml', 'channels:\n  - id: x\n    protocol: grpc\n    base_url: http://x/v1\n  - protocol: openai\n'),
    );
    expect(r.errors).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ file: 'bad.yaml', line: 3, col: 15, message: expect.stringContaining('must be one of: openai, anthropic') }),
        expect.objectContaining({ file: 'bad.yaml', line: 5, message: expect.stringContaining('missing required field "id"') }),
      ]),
    );
  });

  it('refuses a peak range ending past 24:00 (23:00-24:30 ran 30 minutes into the next day)', () => {
    const window = (range: string): string =>
      `peak_windows:\n  - id: late\n    timezone: UTC\n    days: [sun]\n    ranges: ["${range}"]\n    multiplier: 2\n`;
    expect(only(withFile('w3.yaml', window('23:00-24:30'))).errors).toEqual([
      expect.objectContaining({ file: 'w3.yaml', line: 5 }),
    ]);
    expect(only(withFile('w3.yaml', window('23:00-24:00'))).errors).toEqual([]);
  });

  it('reports YAML syntax errors with their place', () => {
    const r = only(withFile('broken.yaml', 'models:\n  - name: [unclosed\n'));
    expect(r.errors[0]).toMatchObject({ file: 'broken.yaml', line: expect.any(Number) });
    expect(r.errors[0]?.message).toMatch(/^YAML:/);
  });

  it('rejects an API key written in the file instead of ${VAR}', () => {
    const text = BASE['channels.yaml']!.replace('["${TEST_ANTHROPIC_KEY}"]', '["sk-ant-literal"]');
    const r = only(withFile('channels.yaml', text));
    expect(r.errors).toEqual([
      expect.objectContaining({ file: 'channels.yaml', line: 16, col: 16, message: expect.stringContaining('API keys are never written in config') }),
    ]);
  });
});

describe('validate: what only the whole config shows', () => {
  it('a model whose channel does not exist', () => {
    const r = only(withFile('m2.yaml', 'models:\n  - name: ghost\n    owned_by: x\n    endpoints: [chat]\n    channels: [{ channel: nowhere }]\nprices:\n  - { model: ghost, input: 1, output: 1 }\n'));
    expect(r.errors).toEqual([
      expect.objectContaining({ file: 'm2.yaml', line: 5, message: 'model "ghost" names channel "nowhere", which does not exist' }),
    ]);
  });

  it('a channel that serves no model', () => {
    const r = only(withFile('c2.yaml', 'channels:\n  - id: idle\n    protocol: openai\n    base_url: https://idle.example/v1\n'));
    expect(r.errors).toEqual([expect.objectContaining({ file: 'c2.yaml', line: 2, message: 'channel "idle" serves no model' })]);
  });

  it('a model without a price', () => {
    const r = only(withFile('m2.yaml', 'models:\n  - name: free-lunch\n    owned_by: x\n    endpoints: [chat]\n    channels: [{ channel: openai-main }]\n'));
    expect(r.errors).toEqual([expect.objectContaining({ file: 'm2.yaml', line: 2, message: 'model "free-lunch" has no price' })]);
  });

  it('a price for no model', () => {
    const r = only(withFile('p2.yaml', 'prices:\n  - { model: nobody, input: 1, output: 1 }\n'));
    expect(r.errors).toEqual([expect.objectContaining({ file: 'p2.yaml', line: 2, message: 'price for unknown model "nobody"' })]);
  });

  it('an endpoint opened on a channel whose protocol cannot serve it', () => {
    const r = only(withFile('m2.yaml', 'models:\n  - name: embed-on-claude\n    owned_by: x\n    endpoints: [embeddings]\n    channels: [{ channel: claude }]\nprices:\n  - { model: embed-on-claude, input: 1, output: 0 }\n'));
    expect(r.errors).toEqual([
      expect.objectContaining({ file: 'm2.yaml', line: 4, message: expect.stringContaining('endpoint "embeddings" is open for model "embed-on-claude" but none of its channels') }),
    ]);
    expect(r.diagnostics.some((d) => d.severity === 'warning' && d.message.includes('cannot serve embeddings'))).toBe(true);
  });

  it('duplicate ids', () => {
    const r = only(withFile('dup.yaml', 'channels:\n  - id: claude\n    protocol: anthropic\n    base_url: https://dup.example/v1\n'));
    expect(r.errors).toEqual([expect.objectContaining({ file: 'dup.yaml', line: 2, message: expect.stringContaining('duplicate channel id "claude" (first declared at channels.yaml:') })]);
  });

  it('overlapping peak windows', () => {
    const r = only(withFile('w2.yaml', 'peak_windows:\n  - id: late-morning\n    days: [fri]\n    ranges: ["11:00-13:00"]\n    multiplier: 2\n'));
    expect(r.errors).toEqual([expect.objectContaining({ file: 'w2.yaml', line: 2, message: 'peak window "late-morning" overlaps peak window "day" for the same models' })]);
  });

  it('overlapping peak windows across timezones', () => {
    // 09:00-12:00 Shanghai is 01:00-04:00 UTC.
    const r = only(withFile('w2.yaml', 'peak_windows:\n  - id: utc-night\n    timezone: UTC\n    days: [mon]\n    ranges: ["03:00-03:30"]\n    multiplier: 2\n'));
    expect(r.errors.map((e) => e.message)).toEqual(['peak window "utc-night" overlaps peak window "day" for the same models']);
  });

  it('windows on disjoint models do not overlap', () => {
    const r = only(withFile('w2.yaml', 'peak_windows:\n  - id: claude-day\n    ranges: ["09:00-10:00"]\n    multiplier: 2\n    models: [claude-x]\n'));
    expect(r.errors.map((e) => e.message)).toEqual(['peak window "claude-day" overlaps peak window "day" for the same models']);
    const disjoint = { ...BASE, 'windows.yaml': BASE['windows.yaml']!.replace('multiplier: 1.5', 'multiplier: 1.5\n    models: [chat-a]') };
    expect(only({ ...disjoint, 'w2.yaml': 'peak_windows:\n  - id: claude-day\n    ranges: ["09:00-10:00"]\n    multiplier: 2\n    models: [claude-x]\n' }).errors).toEqual([]);
  });

  it('a campaign that ends before it starts', () => {
    const r = only(withFile('k2.yaml', 'campaigns:\n  - id: backwards\n    starts_at: "2026-05-01T00:00:00Z"\n    ends_at: "2026-04-01T00:00:00Z"\n    models: [chat-a]\n    discount: 0\n'));
    expect(r.errors).toEqual([expect.objectContaining({ file: 'k2.yaml', line: 4, col: 14, message: expect.stringContaining('campaign "backwards" ends') })]);
  });

  it('an unknown reasoning effort mapping', () => {
    const text = BASE['reasoning.yaml']!.replace('max:', 'extreme:');
    const r = only(withFile('reasoning.yaml', text));
    expect(r.errors.map((e) => [e.line, e.message])).toEqual(
      expect.arrayContaining([
        [6, 'unknown reasoning effort "extreme": use low, high or max'],
        [4, 'reasoning family "r1" has no mapping for effort "max"'],
      ]),
    );
  });

  it('a reasoning model whose family has no mapping', () => {
    const r = only(withFile('reasoning.yaml', 'reasoning: []\n'));
    expect(r.errors).toEqual([expect.objectContaining({ file: 'models.yaml', line: 4, message: 'model "chat-a" is in family "r1", which has no reasoning mapping' })]);
  });

  it('a price with more decimals than the unit holds', () => {
    const r = only(withFile('prices.yaml', BASE['prices.yaml']!.replace('input: 0.1', 'input: 0.0001')));
    expect(r.errors).toEqual([expect.objectContaining({ file: 'prices.yaml', line: 3, col: 12, message: 'input price "0.0001" must be a non-negative decimal with at most 3 decimals' })]);
  });

  it('a ${VAR} that is unset: a warning in validate, an error in serve', () => {
    const files = withFile('gw.yaml', 'gateway:\n  admin:\n    token: ${SWITCHYARD_TEST_UNSET_VAR}\n');
    const v = compileFiles(files, { mode: 'validate' });
    expect(v.table).not.toBeNull();
    expect(v.diagnostics).toEqual([
      expect.objectContaining({ severity: 'warning', file: 'gw.yaml', line: 3, message: 'environment variable SWITCHYARD_TEST_UNSET_VAR is not set' }),
    ]);
    const s = compileFiles(files, { mode: 'serve' });
    expect(s.table).toBeNull();
    expect(errors(s.diagnostics)).toHaveLength(1);
  });

  it('reports every problem at once', () => {
    const r = only({
      ...BASE,
      'a.yaml': 'prices:\n  - { model: nobody, input: 1, output: 1 }\n',
      'b.yaml': 'channels:\n  - id: idle\n    protocol: openai\n    base_url: https://idle.example/v1\n',
      'c.yaml': 'campaigns:\n  - { id: bad, starts_at: "2026-05-01T00:00:00Z", ends_at: "2026-04-01T00:00:00Z", models: [chat-a], discount: 0 }\n',
    });
    expect(r.errors.map((e) => e.file).sort()).toEqual(['a.yaml', 'b.yaml', 'c.yaml']);
  });
});
