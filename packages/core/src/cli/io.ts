/**
 * Where the CLI writes and what it resolves paths against. `main.ts` passes the process's; tests
 * pass their own to capture output.
 *
 * @example
 * ```ts
 * const lines: string[] = [];
 * const io: CliIo = { stdout: (text) => lines.push(text), stderr: (text) => lines.push(text), cwd: "/tmp" };
 * ```
 */
export interface CliIo {
  /** Writes text as is (the CLI adds the newlines). */
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  /** Relative paths (`run <module>`, `<dir>`) are resolved against this folder. */
  readonly cwd: string;
}

/**
 * The IO of the running process.
 *
 * @example
 * ```ts
 * const io = processIo();
 * ```
 */
export function processIo(): CliIo {
  return {
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
    cwd: process.cwd(),
  };
}
