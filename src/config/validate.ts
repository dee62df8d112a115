// Checks each file against schemas/config-file.schema.json with ajv and turns every error into a
// Diagnostic at the line and column of the offending value (allErrors: one run reports them all).
import { readFileSync } from 'node:fs';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { Diagnostic } from './diagnostics.ts';
import { escapePointer, type LoadedFile } from './load.ts';

const SCHEMAS = [
  'common',
  'gateway',
  'model',
  'channel',
  'price',
  'peak-window',
  'campaign',
  'limits',
  'reasoning',
  'config-file',
];

let validator: ValidateFunction | null = null;

function getValidator(): ValidateFunction {
  if (validator !== null) return validator;
  const ajv = new Ajv({ allErrors: true, strict: false, allowUnionTypes: true });
  // ajv-formats ships CommonJS whose module.exports is the plugin itself; its types say `.default`.
  const addFormats = addFormatsModule as unknown as (ajv: Ajv, formats: string[]) => Ajv;
  addFormats(ajv, ['date-time']);
  for (const name of SCHEMAS) {
    const url = new URL(`../../schemas/${name}.schema.json`, import.meta.url);
    ajv.addSchema(JSON.parse(readFileSync(url, 'utf8')) as object);
  }
  validator = ajv.getSchema('config-file.schema.json') ?? null;
  if (validator === null) throw new Error('config-file.schema.json did not compile');
  return validator;
}

function describe(e: ErrorObject): { message: string; pointer: string; atKey: boolean } {
  const field = e.instancePath === '' ? 'file' : e.instancePath.slice(1).replace(/\//g, '.');
  switch (e.keyword) {
    case 'additionalProperties': {
      const extra = String((e.params as { additionalProperty: string }).additionalProperty);
      return {
        message: `unknown field "${extra}" in ${field}`,
        pointer: `${e.instancePath}/${escapePointer(extra)}`,
        atKey: true,
      };
    }
    case 'required':
      return {
        message: `${field} is missing required field "${String((e.params as { missingProperty: string }).missingProperty)}"`,
        pointer: e.instancePath,
        atKey: false,
      };
    case 'enum':
      return {
        message: `${field} must be one of: ${((e.params as { allowedValues: unknown[] }).allowedValues).join(', ')}`,
        pointer: e.instancePath,
        atKey: false,
      };
    case 'pattern':
      if (e.instancePath.includes('/api_keys/')) {
        return {
          message: `${field} must be a \${VAR} reference to the environment: API keys are never written in config`,
          pointer: e.instancePath,
          atKey: false,
        };
      }
      return { message: `${field} ${e.message ?? 'is malformed'}`, pointer: e.instancePath, atKey: false };
    default:
      return { message: `${field} ${e.message ?? 'is invalid'}`, pointer: e.instancePath, atKey: false };
  }
}

/** Validates one loaded file; returns its diagnostics (empty when the file is well formed). */
export function validateFile(file: LoadedFile): (Diagnostic & { pointer: string })[] {
  const validate = getValidator();
  if (validate(file.value)) return [];
  const seen = new Set<string>();
  const out: (Diagnostic & { pointer: string })[] = [];
  for (const e of validate.errors ?? []) {
    // A union type (number | string) reports "type" once per branch; the schema's
    // pattern/type pair for decimals reports twice. One line per place and message is enough.
    const { message, pointer, atKey } = describe(e);
    const key = `${pointer}\u0000${message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const pos = (atKey ? file.keyPosition(pointer) : undefined) ?? file.nearest(pointer);
    out.push({ severity: 'error', file: file.file, line: pos.line, col: pos.col, message, pointer });
  }
  return out;
}
