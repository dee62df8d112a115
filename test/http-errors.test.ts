// Every code of the error registry is documented in docs/errors.md (STYLE 2).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERRORS } from '../src/http/errors.ts';

describe('error registry', () => {
  it('documents every code with its HTTP status in docs/errors.md', () => {
    const doc = readFileSync(new URL('../docs/errors.md', import.meta.url), 'utf8');
    for (const [code, def] of Object.entries(ERRORS)) {
      expect(doc, code).toMatch(new RegExp(`\\| \`${code}\` \\| ${def.status} \\|`));
    }
  });
});
