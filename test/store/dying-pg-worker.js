// The Postgres store's worker thread (src/store/pg-worker.js) with one addition for tests: the
// statement `-- die` ends the thread with an uncaught exception, as a bug in it would.
import { parentPort } from 'node:worker_threads';

// Registered before pg-worker.js's own listener, so the throw stops the message reaching it.
parentPort.on('message', (msg) => {
  if (msg.text === '-- die') throw new Error('told to die');
});
await import('../../src/store/pg-worker.js');
