import type {
  Collector,
  KeyedProcessContext,
  KeyedProcessFunction,
  KeyedRuntimeContext,
} from "../../api/process-function.js";
import type { ValueState } from "../../state/state.js";

// A keyed job fixture of the runtime's own tests (rescale, restore rule): a running count per key
// in keyed state, so a lost or repeated record shows in the counts of the output.

/** One input record: its index and its key. */
export interface Reading {
  readonly index: number;
  readonly key: string;
}

/** A reading with how many readings of its key came before and including it. */
export interface Counted extends Reading {
  readonly count: number;
}

/** Counts readings per key in `ValueState` and emits each reading with its key's count. */
export class RunningCount implements KeyedProcessFunction<string, Reading, Counted> {
  private count!: ValueState<number>;
  open(context: KeyedRuntimeContext): void {
    this.count = context.getState<number>({ name: "count" });
  }
  processElement(reading: Reading, _context: KeyedProcessContext<string>, out: Collector<Counted>): void {
    const count = (this.count.value() ?? 0) + 1;
    this.count.update(count);
    out.collect({ ...reading, count });
  }
}
