import type { MessagePort } from "node:worker_threads";
import type { SubtaskCheckpointTimings, SubtaskLiveness } from "../runtime/subtask.js";

/**
 * A call from the coordinating job (main thread) to the subtask of a worker thread it hosts, answered
 * by a {@link HostedReply} with the same `id`. `start` carries the attempt and the ports of the
 * thread's exchange channels (transferred); `run` is answered when the subtask's loop ends.
 *
 * @example
 * ```ts
 * worker.postMessage({ type: "call", id: 3, call: { name: "complete", checkpointId: 7 } } satisfies HostedCall);
 * ```
 */
export interface HostedCall {
  readonly type: "call";
  readonly id: number;
  readonly call:
    | {
        readonly name: "start";
        readonly attemptNumber: number;
        readonly incarnation: number;
        readonly restoredCheckpointId: number | undefined;
        /** The subtask's share of the restored checkpoint, `v8.serialize`d. */
        readonly restored: Uint8Array | undefined;
        readonly to: ReadonlyArray<MessagePort | undefined>;
        readonly from: ReadonlyArray<MessagePort | undefined>;
        readonly capacity: number;
      }
    | { readonly name: "run" }
    | { readonly name: "input-ended" }
    | {
        readonly name: "trigger";
        readonly checkpointId: number;
        readonly checkpointTimestamp: number;
        readonly isFinal: boolean;
        readonly parallelism: number;
      }
    | { readonly name: "complete"; readonly checkpointId: number }
    | { readonly name: "aborted"; readonly checkpointId: number }
    | { readonly name: "stop-reading" }
    | { readonly name: "close"; readonly failed: readonly number[]; readonly stored: number };
}

/** A subtask's share of a checkpoint as a thread posts it: its bytes and where its time went. */
export interface HostedCheckpointShare {
  readonly state: Uint8Array;
  readonly timings: SubtaskCheckpointTimings;
}

/**
 * The answer of a hosted subtask's thread to a {@link HostedCall}: a value (a checkpoint's
 * serialized share and its timings for `trigger`), or the error's code and message.
 *
 * @example
 * ```ts
 * port.postMessage({ type: "reply", id: 3 } satisfies HostedReply);
 * ```
 */
export interface HostedReply {
  readonly type: "reply";
  readonly id: number;
  readonly value?: HostedCheckpointShare | number;
  readonly error?: { readonly code: string; readonly message: string };
}

/**
 * What else a hosted subtask's thread posts: that its job is built (`ready`), or failed to build,
 * and its loop's liveness now and then.
 *
 * @example
 * ```ts
 * port.postMessage({ type: "ready" } satisfies HostedNotice);
 * ```
 */
export type HostedNotice =
  | { readonly type: "ready" }
  | { readonly type: "build-failed"; readonly code: string; readonly message: string }
  | { readonly type: "liveness"; readonly liveness: SubtaskLiveness };
