// How many times `Job.execute()` was called in this process, counted on `globalThis` so that the
// CLI (bundled apart from the library) sees the calls of the copy of the library a module imports.
const EXECUTIONS_KEY = Symbol.for("onceflow.jobExecutions");

interface ExecutionsHolder {
  [EXECUTIONS_KEY]?: number;
}

const holder = globalThis as ExecutionsHolder;

/** Called by `Job.execute()`. */
export function countJobExecution(): void {
  holder[EXECUTIONS_KEY] = (holder[EXECUTIONS_KEY] ?? 0) + 1;
}

/**
 * How many jobs were executed in this process so far: `onceflow run` compares it before and after
 * importing a module, to tell a user whose module ran its job at import.
 */
export function jobExecutionsSoFar(): number {
  return holder[EXECUTIONS_KEY] ?? 0;
}
