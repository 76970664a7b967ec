import { parseArgs } from "node:util";
import type { LogFunction, Logger } from "../observability/logger.js";
import { createDemoJob } from "./demo-pipeline.js";

// The demo's job process: `onceflow demo` starts it, SIGKILLs it, and starts it again.

// Events the parent process reads from the worker's stdout, one JSON object per line.
function eventLogger(): Logger {
  const write =
    (level: string): LogFunction =>
    (first: Record<string, unknown> | string, message?: string) => {
      const fields = typeof first === "string" ? { msg: first } : { ...first, msg: message ?? "" };
      process.stdout.write(`${JSON.stringify({ level, at: Date.now(), ...fields })}\n`);
    };
  const logger: Logger = {
    debug: () => {},
    info: write("info"),
    warn: write("warn"),
    error: write("error"),
    child: () => logger,
  };
  return logger;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      directory: { type: "string" },
      records: { type: "string" },
      rate: { type: "string" },
    },
  });
  if (!values.directory || !values.records || !values.rate) {
    throw new Error("usage: demo-job --directory <dir> --records <n> --rate <records per second>");
  }
  const job = createDemoJob({
    directory: values.directory,
    records: Number(values.records),
    recordsPerSecond: Number(values.rate),
    logger: eventLogger(),
  });
  await job.execute();
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
