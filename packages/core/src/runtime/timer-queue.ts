import type { StateKey } from "../state/keyed-state-backend.js";

/** One registered timer: fire at `time` for `key`. */
export interface Timer {
  readonly time: number;
  readonly key: StateKey;
}

/**
 * The timers of one scope (a key group, or a split) in one time domain: a binary min-heap by time, with a set that makes
 * registering the same (key, time) twice one timer, as in Flink.
 */
export class TimerQueue {
  private readonly heap: Timer[] = [];
  private readonly registered = new Set<string>();

  constructor(timers: readonly Timer[] = []) {
    for (const timer of timers) this.add(timer.time, timer.key);
  }

  get size(): number {
    return this.registered.size;
  }

  add(time: number, key: StateKey): void {
    const id = identity(time, key);
    if (this.registered.has(id)) return;
    this.registered.add(id);
    this.heap.push({ time, key });
    this.siftUp(this.heap.length - 1);
  }

  /** Deleting marks the timer gone; the heap entry is skipped when it surfaces. */
  delete(time: number, key: StateKey): void {
    this.registered.delete(identity(time, key));
  }

  /** The earliest live timer's time, or `undefined`. */
  peekTime(): number | undefined {
    this.dropDeleted();
    return this.heap[0]?.time;
  }

  /** Removes and returns the earliest live timer if it is due at `time`. */
  pollDue(time: number): Timer | undefined {
    this.dropDeleted();
    const head = this.heap[0];
    if (!head || head.time > time) return undefined;
    this.popHead();
    this.registered.delete(identity(head.time, head.key));
    return head;
  }

  /** Live timers, for snapshots. */
  toArray(): Timer[] {
    return this.heap.filter((timer) => this.registered.has(identity(timer.time, timer.key)));
  }

  private dropDeleted(): void {
    while (this.heap.length > 0) {
      const head = this.heap[0]!;
      if (this.registered.has(identity(head.time, head.key))) return;
      this.popHead();
    }
  }

  private popHead(): void {
    const last = this.heap.pop()!;
    if (this.heap.length > 0) {
      this.heap[0] = last;
      this.siftDown(0);
    }
  }

  private siftUp(index: number): void {
    const heap = this.heap;
    let child = index;
    while (child > 0) {
      const parent = (child - 1) >> 1;
      if (heap[parent]!.time <= heap[child]!.time) return;
      [heap[parent], heap[child]] = [heap[child]!, heap[parent]!];
      child = parent;
    }
  }

  private siftDown(index: number): void {
    const heap = this.heap;
    let parent = index;
    for (;;) {
      const left = 2 * parent + 1;
      const right = left + 1;
      let smallest = parent;
      if (left < heap.length && heap[left]!.time < heap[smallest]!.time) smallest = left;
      if (right < heap.length && heap[right]!.time < heap[smallest]!.time) smallest = right;
      if (smallest === parent) return;
      [heap[parent], heap[smallest]] = [heap[smallest]!, heap[parent]!];
      parent = smallest;
    }
  }
}

function identity(time: number, key: StateKey): string {
  return `${typeof key}:${String(key)}@${time}`;
}
