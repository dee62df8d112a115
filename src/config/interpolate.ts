// ${VAR} and ${VAR:-default} in config strings, resolved from the environment at compile time, so
// secrets live in the environment and never in the files.

const REF = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

export interface Interpolated {
  value: string;
  /** Variables referenced without a default that are not set. */
  unset: string[];
}

export function interpolate(text: string, env: Readonly<Record<string, string | undefined>>): Interpolated {
  if (!text.includes('${')) return { value: text, unset: [] };
  const unset: string[] = [];
  const value = text.replace(REF, (_all, name: string, fallback: string | undefined) => {
    const v = env[name];
    if (fallback !== undefined) return v === undefined || v === '' ? fallback : v;
    if (v === undefined) {
      unset.push(name);
      return '';
    }
    return v;
  });
  return { value, unset };
}
