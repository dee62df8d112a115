// Values as Postgres's COPY text format reads them: one row a line, fields separated by tabs,
// `\N` for null, and a backslash, tab, newline or carriage return inside a value escaped
// (https://www.postgresql.org/docs/current/sql-copy.html, "Text Format"). An upstream's answer id
// or a configured name can hold any of them.

const SPECIAL = /[\\\t\n\r]/;
const SPECIAL_ALL = /[\\\t\n\r]/g;
const ESCAPED: Readonly<Record<string, string>> = {
  '\\': '\\\\',
  '\t': '\\t',
  '\n': '\\n',
  '\r': '\\r',
};

/** A text value, or `\N`. Nearly every value has nothing to escape and is returned as it is. */
export function copyText(value: string | null): string {
  if (value === null) return '\\N';
  if (!SPECIAL.test(value)) return value;
  return value.replace(SPECIAL_ALL, (c) => ESCAPED[c]!);
}

/** An integer (number or bigint), or `\N`. */
export function copyInt(value: number | bigint | null): string {
  return value === null ? '\\N' : String(value);
}

/** A boolean as `t` or `f`. */
export function copyBool(value: boolean): string {
  return value ? 't' : 'f';
}
