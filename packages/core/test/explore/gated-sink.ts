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
