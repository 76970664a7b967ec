import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { kafkaClient } from "./kafka.js";

const root = fileURLToPath(new URL("../../..", import.meta.url));
const fixture = fileURLToPath(new URL("../fixtures/k2k-job.ts", import.meta.url));

/** A fixture job in a child process, with its output lines. */
export class ChildJob {
  readonly lines: string[] = [];
  stderr = "";
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private readonly waiters: Array<{ pattern: RegExp; resolve: (line: string) => void }> = [];

  private constructor(readonly process: ChildProcess) {
    let partial = "";
    process.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
      partial += chunk;
      const parts = partial.split("\n");
      partial = parts.pop() ?? "";
      for (const line of parts) {
        this.lines.push(line);
        for (const waiter of [...this.waiters]) {
          if (waiter.pattern.test(line)) {
            this.waiters.splice(this.waiters.indexOf(waiter), 1);
            waiter.resolve(line);
          }
        }
      }
    });
    process.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      this.stderr += chunk;
    });
    this.exited = new Promise((resolve) => process.on("exit", (code, signal) => resolve({ code, signal })));
  }

  /** Starts `script` (default: the Kafka → Kafka fixture) with `env` added to this process's. */
  static start(env: Record<string, string>, script: string = fixture): ChildJob {
    const child = spawn(process.execPath, ["--import", "tsx", script], {
      cwd: root,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    return new ChildJob(child);
  }

  /** Resolves with the first line (seen before or later) matching `pattern`. */
  waitFor(pattern: RegExp, timeoutMs = 60_000): Promise<string> {
    const seen = this.lines.find((line) => pattern.test(line));
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new Error(
              `no line matching ${pattern} within ${timeoutMs} ms; stdout:\n${this.lines.join("\n")}\nstderr:\n${this.stderr}`,
            ),
          ),
        timeoutMs,
      );
      this.waiters.push({
        pattern,
        resolve: (line) => {
          clearTimeout(timer);
          resolve(line);
        },
      });
      void this.exited.then(({ code, signal }) => {
        clearTimeout(timer);
        reject(
          new Error(
            `job exited (${code ?? signal}) before ${pattern}; stdout:\n${this.lines.join("\n")}\nstderr:\n${this.stderr}`,
          ),
        );
      });
    });
  }

  async kill(signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
    this.process.kill(signal);
    await this.exited;
  }
}

/** Writes `values` to `topic` a few at a time, round-robin over partitions, in the background. */
export function produceSlowly(
  topic: string,
  values: string[],
  options: { perTick: number; tickMs: number; partitions: number; brokers?: string[] },
): Promise<void> {
  return (async () => {
    const producer = kafkaClient(options.brokers).producer({
      allowAutoTopicCreation: false,
      idempotent: true,
      maxInFlightRequests: 1,
      retry: { retries: 30 },
    });
    await producer.connect();
    try {
      for (let i = 0; i < values.length; i += options.perTick) {
        const slice = values.slice(i, i + options.perTick);
        await producer.send({
          topic,
          messages: slice.map((value, j) => ({ value, partition: (i + j) % options.partitions })),
        });
        await new Promise((resolve) => setTimeout(resolve, options.tickMs));
      }
    } finally {
      await producer.disconnect();
    }
  })();
}
