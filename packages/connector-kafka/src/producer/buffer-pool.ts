/**
 * Buffers the produce path writes into — record batches, Produce requests — taken from this
 * thread's pool and given back once nothing reads them any more (the broker acknowledged the batch,
 * answered the request). Why: at full speed the sink wrote tens of MiB per second
 * into fresh 256 KiB–8 MiB buffers. V8 frees a buffer only when it collects the object that owns
 * it, so they piled up as external memory between full collections — the process's memory swung by
 * tens of MiB with the collector's rhythm, and each swing was a full collection of the heap.
 */

/** The smallest size class: smaller buffers come from Node's own pool and are not worth keeping. */
const MIN_CLASS_BYTES = 64 * 1024;

/**
 * Buffers in power-of-two size classes, each owning its memory (never a slice of Node's shared
 * pool, which another owner could still read), kept up to `maxPooledBytes`.
 *
 * @example
 * ```ts
 * const pool = new BufferPool(16 * 1024 * 1024);
 * const body = pool.take(300_000); // 512 KiB, uninitialized
 * // … write, hand over, wait until nothing reads it …
 * pool.give(body);
 * ```
 */
export class BufferPool {
  private readonly free = new Map<number, Buffer[]>();
  private pooledBytes = 0;

  constructor(private readonly maxPooledBytes: number) {}

  /** An uninitialized buffer of at least `size` bytes (its class: the next power of two, ≥ 64 KiB). */
  take(size: number): Buffer {
    const classBytes = sizeClassOf(size);
    const pooled = this.free.get(classBytes)?.pop();
    if (pooled !== undefined) {
      this.pooledBytes -= classBytes;
      return pooled;
    }
    return Buffer.allocUnsafeSlow(classBytes);
  }

  /**
   * Gives `buffer` (from {@link take}, whole) back for a later `take`. The caller must hold no view
   * of it that is still read: its bytes will be overwritten.
   */
  give(buffer: Buffer): void {
    const classBytes = buffer.length;
    if (classBytes !== sizeClassOf(classBytes) || buffer.byteOffset !== 0) return;
    if (this.pooledBytes + classBytes > this.maxPooledBytes) return;
    let list = this.free.get(classBytes);
    if (list === undefined) {
      list = [];
      this.free.set(classBytes, list);
    }
    list.push(buffer);
    this.pooledBytes += classBytes;
  }

  /** Bytes kept for reuse now. */
  get size(): number {
    return this.pooledBytes;
  }
}

function sizeClassOf(size: number): number {
  let classBytes = MIN_CLASS_BYTES;
  while (classBytes < size) classBytes *= 2;
  return classBytes;
}
