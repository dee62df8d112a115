// Which models a key may call: exact names, '*' globs, and null for every model.

import { describe, expect, it } from 'vitest';
import { keyAllowsModel } from '../../src/store/model-patterns.ts';

describe('key model permissions', () => {
  it('a key without a list may call every model', () => {
    expect(keyAllowsModel(null, 'deepseek-chat')).toBe(true);
  });

  it('exact names and globs allow only what they match', () => {
    const allowed = ['deepseek-*', 'qwen-max'];
    expect(keyAllowsModel(allowed, 'deepseek-chat')).toBe(true);
    expect(keyAllowsModel(allowed, 'deepseek-')).toBe(true);
    expect(keyAllowsModel(allowed, 'qwen-max')).toBe(true);
    expect(keyAllowsModel(allowed, 'qwen-max-latest')).toBe(false);
    expect(keyAllowsModel(allowed, 'my-deepseek-chat')).toBe(false);
    expect(keyAllowsModel(allowed, 'glm-4')).toBe(false);
  });

  it('dots and other regex characters in names are literal', () => {
    expect(keyAllowsModel(['glm-4.5'], 'glm-4.5')).toBe(true);
    expect(keyAllowsModel(['glm-4.5'], 'glm-4x5')).toBe(false);
    expect(keyAllowsModel(['a+b(1)'], 'a+b(1)')).toBe(true);
  });

  it('an empty list allows nothing', () => {
    expect(keyAllowsModel([], 'deepseek-chat')).toBe(false);
  });

  it('a lone star allows everything', () => {
    expect(keyAllowsModel(['*'], 'anything-at-all')).toBe(true);
  });
});
