// `switchyard serve`: start the gateway on a config directory and hot-reload it until SIGINT/SIGTERM.
import { ConfigError, formatDiagnostic } from '../config/diagnostics.ts';
import { createGateway } from '../gateway.ts';

export async function serveCommand(dir: string, port: number | null): Promise<number> {
  let gateway;
  try {
    gateway = await createGateway({ configDir: dir, port });
  } catch (err) {
    if (err instanceof ConfigError) {
      for (const d of err.diagnostics) console.error(formatDiagnostic(d));
      console.error(
        `${dir}: the gateway did not start (fix the errors above; \`switchyard validate ${dir}\` checks them)`,
      );
      return 1;
    }
    throw err;
  }
  gateway.ctx.log.info(
    { url: gateway.url, version: gateway.tables.current.version },
    `switchyard listening on ${gateway.url}`,
  );
  await new Promise<void>((resolve) => {
    const stop = (): void => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  await gateway.close();
  return 0;
}
