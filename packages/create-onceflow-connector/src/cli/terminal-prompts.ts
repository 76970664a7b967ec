import { createInterface } from "node:readline";
import { ConfigurationError } from "@onceflow/core";

/**
 * Asks questions one line at a time on a readable stream (the terminal, or piped answers).
 *
 * @example
 * ```ts
 * const prompts = terminalPrompts(process.stdin, process.stdout);
 * const name = await prompts.ask("Package name", "onceflow-connector-custom");
 * prompts.close();
 * ```
 */
export interface TerminalPrompts {
  /** Prints `question (default)` and resolves with the answer, or the default for an empty line. */
  ask(question: string, defaultAnswer: string): Promise<string>;
  close(): void;
}

/**
 * Prompts over node:readline. Lines are read through one async iterator, so answers piped in
 * before a question is printed are kept for it. Input that ends before an answer throws a
 * `ConfigurationError` saying to pass the value as a flag (or `--yes`).
 *
 * @example
 * ```ts
 * const kind = await terminalPrompts(process.stdin, process.stdout).ask("Kind (custom, redis)", "custom");
 * ```
 */
export function terminalPrompts(
  input: NodeJS.ReadableStream,
  output: NodeJS.WritableStream,
): TerminalPrompts {
  const lines = createInterface({ input, terminal: false })[Symbol.asyncIterator]();
  let closed = false;
  return {
    async ask(question, defaultAnswer) {
      output.write(`${question} (${defaultAnswer}): `);
      const next = closed ? { done: true as const, value: undefined } : await lines.next();
      if (next.done === true) {
        closed = true;
        output.write("\n");
        throw new ConfigurationError(
          question,
          "the input ended before an answer: pass the values as flags (--name, --kind, --directory) and --yes to take the defaults",
        );
      }
      const answer = String(next.value).trim();
      return answer.length > 0 ? answer : defaultAnswer;
    },
    close() {
      closed = true;
      void lines.return?.();
    },
  };
}
