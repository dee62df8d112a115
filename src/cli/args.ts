// A small argv parser for the CLI: positionals, --flag value, --flag=value and boolean --flags.

export interface ParsedArgs {
  positionals: string[];
  flags: Map<string, string | true>;
}

export function parseArgs(argv: readonly string[], booleans: ReadonlySet<string>): ParsedArgs {
  const positionals: string[] = [];
  const flags = new Map<string, string | true>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (!arg.startsWith('--')) {
      positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    if (eq !== -1) {
      flags.set(arg.slice(2, eq), arg.slice(eq + 1));
    } else if (booleans.has(arg.slice(2))) {
      flags.set(arg.slice(2), true);
    } else {
      const next = argv[i + 1];
      if (next === undefined || next.startsWith('--')) throw new UsageError(`${arg} needs a value`);
      flags.set(arg.slice(2), next);
      i++;
    }
  }
  return { positionals, flags };
}

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export function flag(args: ParsedArgs, name: string): string | null {
  const v = args.flags.get(name);
  return typeof v === 'string' ? v : null;
}
