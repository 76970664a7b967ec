import { type Command, InvalidArgumentError } from "commander";
import { type DemoOptions, runDemo } from "../../demo/run-demo.js";
import type { CliIo } from "../io.js";

interface DemoFlags {
  seed?: number;
  kills?: number;
  records?: number;
}

/**
 * Reads a non-negative integer option; commander reports the error with the option's name.
 *
 * @example
 * ```ts
 * program.option("--seed <n>", "random seed", parseCount);
 * ```
 */
export function parseCount(text: string): number {
  const value = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(value)) {
    throw new InvalidArgumentError("must be a non-negative integer.");
  }
  return value;
}

/**
 * Adds `demo` to the program: runs the exactly-once demo with kills and checks its output.
 *
 * @example
 * ```ts
 * addDemoCommand(program, processIo());
 * ```
 */
export function addDemoCommand(
  program: Command,
  io: CliIo,
  demo: (options: DemoOptions) => Promise<unknown> = runDemo,
): void {
  program
    .command("demo")
    .description("run a job, kill it several times, and check that its output is exactly once")
    .option("--seed <n>", "seed of the random kill points, to repeat a run", parseCount)
    .option("--kills <n>", "how many times to kill the job", parseCount)
    .option("--records <n>", "how many input records", parseCount)
    .action(async (flags: DemoFlags) => {
      const options: DemoOptions = {
        ...(flags.seed !== undefined ? { seed: flags.seed } : {}),
        ...(flags.kills !== undefined ? { kills: flags.kills } : {}),
        ...(flags.records !== undefined ? { records: flags.records } : {}),
        print: (line) => io.stdout(`${line}\n`),
      };
      await demo(options);
    });
}
