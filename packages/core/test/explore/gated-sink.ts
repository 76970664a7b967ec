import type { Sink } from "../../src/index.js";
import type { ProcessGate } from "./process-gate.js";

const protocolMethods = [
  "initializeState",
  "open",
  "write",
  "writeBatch",
  "snapshotState",
  "notifyCheckpointComplete",
  "notifyCheckpointAborted",
  "finish",
  "close",
] as const;

/**
 * Puts a real sink (FileSink, KafkaSink, PostgresSink) behind a process's gate, call by call: once
 * the process is killed no protocol call of it starts or returns, so a killed process leaves its
 * transactions exactly as they were. Coarser than gating each external call, as the in-memory
 * model sink does, but it needs nothing from the sink.
 *
 * @example
 * ```ts
 * job.fromSource(source).sinkTo(() => gatedSink(new FileSink({ directory }), gate), { uid: "out" });
 * ```
 */
export function gatedSink<IN>(sink: Sink<IN>, gate: ProcessGate): Sink<IN> {
  const gated: Record<string, unknown> = { name: sink.name };
  const methods = sink as unknown as Record<string, unknown>;
  for (const method of protocolMethods) {
    const original = methods[method];
    if (typeof original !== "function") continue;
    gated[method] = (...args: unknown[]) => gate.pass(() => original.apply(sink, args));
  }
  return gated as unknown as Sink<IN>;
}

/**
 * {@link gatedSink} for a sink that is made asynchronously (a connector loaded per process): every
 * protocol call waits for it first. `writeBatch` falls back to `write` per value.
 *
 * @example
 * ```ts
 * job.sinkTo(() => gatedDeferredSink(loadSinkClass().then((Sink) => new Sink(options)), gate), { uid: "out" });
 * ```
 */
export function gatedDeferredSink<IN>(making: Promise<Sink<IN>>, gate: ProcessGate): Sink<IN> {
  making.catch(() => undefined);
  const gated: Record<string, unknown> = {};
  for (const method of protocolMethods) {
    gated[method] = (...args: unknown[]) =>
      gate.pass(async () => {
        const sink = (await making) as unknown as Record<
          string,
          ((...values: unknown[]) => unknown) | undefined
        >;
        const original = sink[method];
        if (original !== undefined) return original.apply(sink, args);
        if (method === "writeBatch") {
          const [values, context] = args as [readonly unknown[], unknown];
          for (const value of values) await sink.write?.call(sink, value, context);
        }
      });
  }
  return gated as unknown as Sink<IN>;
}
