// A child task that fails before its work is done: it says why on stderr and exits with 3.
process.stderr.write('no room for the data directory\n');
process.exitCode = 3;
