// Which models a key may call: exact names or globs with '*' ('deepseek-*'); null = every model.
// A list compiles to one anchored RegExp, once per list (memoized on the array itself).

const compiled = new WeakMap<readonly string[], RegExp>();

function escapeRegExp(text: string): string {
  return text.replace(/[.+?^${}()|[\]\\]/g, '\\$&');
}

/** One RegExp matching any pattern of the list: '*' matches any run of characters. */
export function compileModelPatterns(patterns: readonly string[]): RegExp {
  const alternatives = patterns.map((p) => escapeRegExp(p).replace(/\*/g, '.*'));
  // An empty list allows nothing: (?!) never matches.
  return alternatives.length === 0 ? /(?!)/ : new RegExp(`^(?:${alternatives.join('|')})$`);
}

export function keyAllowsModel(allowedModels: readonly string[] | null, model: string): boolean {
  if (allowedModels === null) return true;
  let re = compiled.get(allowedModels);
  if (re === undefined) {
    re = compileModelPatterns(allowedModels);
    compiled.set(allowedModels, re);
  }
  return re.test(model);
}
