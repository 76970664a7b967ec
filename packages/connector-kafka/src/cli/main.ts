import { runKafkaCli } from "./program.js";

// The `onceflow-kafka` executable (tsup builds it to dist/cli.js with a shebang).
const code = await runKafkaCli(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
});
process.exitCode = code;
// kafkajs may leave a socket timer behind; the CLI must still exit.
setTimeout(() => process.exit(code), 2000).unref();
