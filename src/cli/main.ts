// The `switchyard` command: serve, validate, compile, and the account and key verbs.
import { compileCommand, validateCommand } from './config-commands.ts';
import { flag, parseArgs, UsageError } from './args.ts';

const HELP = `switchyard — a config-as-code gateway for AI models

Usage:
  switchyard serve [--config DIR] [--port N]   start the gateway (hot-reloads DIR)
  switchyard validate DIR                      check a config directory; exit 1 on any error
  switchyard compile DIR [--json]              print the compiled routing table (no secrets)
  switchyard accounts create --name NAME [--realname] [--balance YUAN]
  switchyard accounts topup ACCOUNT_ID YUAN [--reason TEXT]
  switchyard accounts list
  switchyard keys create ACCOUNT_ID [--name NAME] [--models a,b*] [--expires ISO]
  switchyard keys disable KEY_ID
  switchyard keys list [ACCOUNT_ID]

Account and key verbs use the store of --config DIR (default: config), i.e. DATABASE_URL or the
embedded data directory.
`;

export async function main(argv: readonly string[]): Promise<number> {
  const args = parseArgs(argv, new Set(['json', 'help', 'realname']));
  const [verb, ...rest] = args.positionals;
  if (verb === undefined || verb === 'help' || args.flags.has('help')) {
    console.log(HELP);
    return 0;
  }
  switch (verb) {
    case 'validate':
      return validateCommand(need(rest[0], 'validate needs a config directory'));
    case 'compile':
      return compileCommand(
        need(rest[0], 'compile needs a config directory'),
        args.flags.has('json'),
      );
    case 'serve': {
      const { serveCommand } = await import('./serve-command.ts');
      const port = flag(args, 'port');
      return serveCommand(
        flag(args, 'config') ?? rest[0] ?? 'config',
        port === null ? null : Number(port),
      );
    }
    case 'accounts':
    case 'keys': {
      const { storeCommand } = await import('./store-commands.ts');
      return storeCommand(verb, rest, args);
    }
    default:
      throw new UsageError(`unknown command "${verb}"`);
  }
}

function need(value: string | undefined, message: string): string {
  if (value === undefined) throw new UsageError(message);
  return value;
}

/** Runs the CLI and sets the exit code: 2 for a usage mistake (with help), 1 for a failure. */
export async function run(argv: readonly string[]): Promise<void> {
  try {
    process.exitCode = await main(argv);
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`switchyard: ${err.message}\n\n${HELP}`);
      process.exitCode = 2;
    } else {
      console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
      process.exitCode = 1;
    }
  }
}

if (import.meta.main) await run(process.argv.slice(2));
