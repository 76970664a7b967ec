import { runCli } from "./program.js";

// The `onceflow` executable (tsup builds it to dist/cli.js with a shebang).
const code = await runCli(process.argv.slice(2));
process.exitCode = code;
// A job may leave a socket or timer behind after it ended or failed; the CLI must still exit.
setTimeout(() => process.exit(code), 2000).unref();
