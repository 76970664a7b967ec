import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const fixtures = fileURLToPath(new URL("./fixtures/", import.meta.url));
const root = fileURLToPath(new URL("../..", import.meta.url));

export interface FixtureRun {
  readonly child: ChildProcess;
  /** Resolves with the line when stdout prints a line starting with `prefix`. */
  waitFor(prefix: string, timeoutMs?: number): Promise<string>;
  /** Resolves with the exit code (or signal). */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output(): string;
}

/** Starts a fixture job (default: generator → PostgresSink) in a child process (`node --import tsx`). */
export function runFixture(env: Record<string, string>, fixture = "generator-to-postgres.ts"): FixtureRun {
  const child = spawn(process.execPath, ["--import", "tsx", `${fixtures}${fixture}`], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  const waiters: Array<{ prefix: string; resolve: (line: string) => void }> = [];
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
    out += chunk;
    for (const line of out.split("\n")) {
      for (const waiter of [...waiters]) {
        if (line.startsWith(waiter.prefix)) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve(line);
        }
      }
    }
  });
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
    err += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    exited,
    output: () => `--- stdout\n${out}\n--- stderr\n${err}`,
    waitFor(prefix, timeoutMs = 60_000) {
      return new Promise<string>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`no '${prefix}' within ${timeoutMs} ms\n${out}\n${err}`)),
          timeoutMs,
        );
        exited.then(({ code, signal }) => {
          clearTimeout(timer);
          reject(new Error(`fixture exited (${code ?? signal}) before '${prefix}'\n${out}\n${err}`));
        });
        waiters.push({
          prefix,
          resolve: (line) => {
            clearTimeout(timer);
            resolve(line);
          },
        });
      });
    },
  };
}
