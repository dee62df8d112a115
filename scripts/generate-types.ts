// Generates generated/config.ts from schemas/ with json-schema-to-typescript; `--check` fails when
// the committed file is stale (run by `npm run check` and CI).
import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { compileFromFile } from 'json-schema-to-typescript';

const root = fileURLToPath(new URL('..', import.meta.url));
const target = `${root}generated/config.ts`;
const banner =
  '/* Generated from schemas/*.schema.json by scripts/generate-types.ts: do not edit.\n' +
  ' * Run `npm run generate` after changing a schema. */';

const body = await compileFromFile(`${root}schemas/config-file.schema.json`, {
  cwd: `${root}schemas`,
  bannerComment: banner,
  additionalProperties: false,
  unreachableDefinitions: true,
  style: { singleQuote: true, printWidth: 100 },
});

if (process.argv.includes('--check')) {
  const current = await readFile(target, 'utf8').catch(() => '');
  if (current !== body) {
    console.error('generated/config.ts is stale: run `npm run generate` and commit the result.');
    process.exit(1);
  }
  console.log('generated/config.ts is fresh.');
} else {
  await writeFile(target, body);
  console.log('wrote generated/config.ts');
}
