/**
 * Where the testkit writes its one line per run saying which provider and version it chose. The
 * default writes to stderr; pass your own to capture or silence it.
 *
 * @example
 * ```ts
 * const lines: string[] = [];
 * await startKafka({ writer: (line) => lines.push(line) });
 * ```
 */
export type ServiceWriter = (line: string) => void;

/**
 * The default {@link ServiceWriter}: one line on stderr.
 *
 * @example
 * ```ts
 * stderrWriter("onceflow testkit: Kafka 3.9.1 (local) at 127.0.0.1:41234");
 * ```
 */
export const stderrWriter: ServiceWriter = (line) => {
  process.stderr.write(`${line}\n`);
};

// Remembered in the environment, not a module variable, so that test workers forked after the
// globalSetup announced the shared services do not repeat the same line.
const ANNOUNCED = "ONCEFLOW_TESTKIT_ANNOUNCED";

/**
 * Writes `line` unless a line with the same `key` was already written in this run (this process or
 * the one that started it). Returns whether it wrote.
 *
 * @example
 * ```ts
 * announceOnce("kafka|local|3.9.1", "onceflow testkit: Kafka 3.9.1 from local processes", stderrWriter);
 * ```
 */
export function announceOnce(
  key: string,
  line: string,
  writer: ServiceWriter = stderrWriter,
  env: NodeJS.ProcessEnv = process.env,
): boolean {
  const seen = (env[ANNOUNCED] ?? "").split(";").filter((entry) => entry.length > 0);
  if (seen.includes(key)) return false;
  env[ANNOUNCED] = [...seen, key].join(";");
  writer(line);
  return true;
}
