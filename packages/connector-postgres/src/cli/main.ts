import { runPostgresCli } from "./program.js";

// The `onceflow-postgres` executable (tsup builds it to dist/cli.js with a shebang).
process.exitCode = await runPostgresCli(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
});
