import { deserialize } from "node:v8";
import type { MessagePort } from "node:worker_threads";
import { isOnceflowError } from "../errors/onceflow-error.js";
import type { OperatorSnapshot } from "../runtime/operators/stream-operator.js";
import type { OperatorCreationContext, StreamNode } from "../runtime/stream-graph.js";
import type { Subtask } from "../runtime/subtask.js";
import type { HostedAttempt, SubtaskOperators } from "../runtime/subtask-host.js";
import type { HostedCall, HostedNotice, HostedReply } from "./hosted-messages.js";
import { closeChannels, createThreadOperators, type ExchangePorts } from "./thread-exchange-operators.js";
import type { ThreadJob } from "./thread-job.js";

/** What a thread needs of its job to host a subtask that the main thread's job coordinates. */
interface HostableJob extends ThreadJob {
  startHostedSubtask(
    attempt: HostedAttempt,
    wire: (
      nodes: readonly StreamNode[],
      context: OperatorCreationContext,
      wake: () => void,
    ) => SubtaskOperators,
  ): Promise<Subtask>;
}

/**
 * Serves the calls of the main thread's job to this thread's subtask (see `HostedCall`): starts
 * it with the attempt's state and exchange channels, runs its loop, relays checkpoint triggers and
 * notifications, and closes it. One attempt per thread: a restart starts new threads.
 */
export function serveHostedSubtask(
  port: MessagePort,
  job: ThreadJob,
  statusIntervalMs: number,
  onMessage: (listener: (message: unknown) => void) => void,
): void {
  // Copied, never transferred: a detached ArrayBuffer slows every typed-array access in this
  // thread's optimized code for the rest of its life (see `ChannelMessage`).
  const post = (message: HostedReply | HostedNotice): void => port.postMessage(message);
  if (typeof (job as Partial<HostableJob>).startHostedSubtask !== "function") {
    post({
      type: "build-failed",
      code: "CONFIGURATION",
      message:
        "the job module's @onceflow/core cannot host a subtask for the main thread (a keyBy exchange in threads needs the same version in the module and the launcher)",
    });
    return;
  }
  const hostable = job as HostableJob;
  let subtask: Subtask | undefined;
  let ports: ExchangePorts | undefined;
  let failLoop: ((error: unknown) => void) | undefined;
  const failure = new Promise<never>((_, reject) => {
    failLoop = reject;
  });
  failure.catch(() => undefined);
  let livenessTimer: NodeJS.Timeout | undefined;

  const handlers = {
    start: async (call: Extract<HostedCall["call"], { name: "start" }>) => {
      ports = { to: call.to, from: call.from, capacity: call.capacity };
      const exchangePorts = ports;
      const restored =
        call.restored === undefined
          ? undefined
          : (deserialize(call.restored) as Record<string, OperatorSnapshot> | undefined);
      subtask = await hostable.startHostedSubtask(
        {
          attemptNumber: call.attemptNumber,
          incarnation: call.incarnation,
          restoredCheckpointId: call.restoredCheckpointId,
          restoredOf: () => restored,
        },
        (nodes, context, wake) =>
          createThreadOperators(nodes, context, wake, exchangePorts, (error) => failLoop?.(error)),
      );
      const started = subtask;
      livenessTimer = setInterval(
        () => post({ type: "liveness", liveness: started.liveness() }),
        statusIntervalMs,
      );
      return undefined;
    },
    run: async () => {
      // A channel's receiving side that fails (a keyed function threw) fails the loop too.
      await Promise.race([running().run(), failure]);
      return undefined;
    },
    "input-ended": async () => {
      await running().whenInputEnded();
      return undefined;
    },
    trigger: async (call: Extract<HostedCall["call"], { name: "trigger" }>) => {
      const { state, timings } = await running().triggerCheckpoint(
        {
          checkpointId: call.checkpointId,
          checkpointTimestamp: call.checkpointTimestamp,
          isFinal: call.isFinal,
        },
        call.parallelism,
      );
      // The share's timings travel with its bytes, so the coordinator reports the thread's phases.
      return { state: new Uint8Array(state.buffer, state.byteOffset, state.byteLength), timings };
    },
    complete: async (call: Extract<HostedCall["call"], { name: "complete" }>) => {
      await running().notifyCheckpointComplete(call.checkpointId);
      return undefined;
    },
    aborted: async (call: Extract<HostedCall["call"], { name: "aborted" }>) => {
      await running().notifyCheckpointAborted(call.checkpointId);
      return undefined;
    },
    "stop-reading": async () => {
      await running().stopReading();
      return undefined;
    },
    close: async (call: Extract<HostedCall["call"], { name: "close" }>) => {
      clearInterval(livenessTimer);
      const failures = subtask === undefined ? [] : await subtask.close(call.failed, call.stored);
      if (ports !== undefined) closeChannels(ports);
      return failures.length;
    },
  };

  const running = (): Subtask => {
    if (subtask === undefined) throw new Error("the subtask of this thread has not started");
    return subtask;
  };

  onMessage((raw) => {
    const message = raw as HostedCall | { type: "terminate" };
    if (message.type === "terminate") {
      subtask?.terminate();
      return;
    }
    if (message.type !== "call") return;
    const { id, call } = message;
    const handler = handlers[call.name] as (call: HostedCall["call"]) => Promise<HostedReply["value"]>;
    handler(call)
      .then(
        (value) => post({ type: "reply", id, ...(value === undefined ? {} : { value }) }),
        (error: unknown) =>
          post({
            type: "reply",
            id,
            error: {
              code: isOnceflowError(error) ? error.code : "JOB_FAILED",
              message: error instanceof Error ? error.message : String(error),
            },
          }),
      )
      // Closed: nothing more comes. The thread ends once the subtask's last handles are gone,
      // instead of waiting for the main thread's grace-period terminate (the process's exit waits
      // for its threads).
      .finally(() => {
        if (call.name === "close") port.unref();
      });
  });
  post({ type: "ready" });
}
