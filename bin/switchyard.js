#!/usr/bin/env node
// The `switchyard` bin: Switchyard runs its TypeScript directly on Node 24 (type stripping).
const major = Number(process.versions.node.split('.')[0]);
if (major < 24) {
  console.error(
    `switchyard needs Node 24 or later (this is ${process.version}); run it through npx or npm, ` +
      'which use the Node 24 that `npm install` brings.',
  );
  process.exit(1);
}
const { run } = await import('../src/cli/main.ts');
await run(process.argv.slice(2));
