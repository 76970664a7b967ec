import { ConfigurationError } from "@onceflow/core";

// Where a RedisSink keeps its transactions in Redis, and the one Lua script that commits them.
//
//   <keyPrefix>:<sinkId>:staged:<subtaskIndex>:<transactionId>   a list: the records preCommit staged
//   <keyPrefix>:<sinkId>:committed:<transactionId>                 the commit marker (expires after a TTL)
//
// A transaction id is `i<incarnation>-<16 hex digits>`: the incarnation of the process that began it
// (RuntimeContext.incarnation), so that recovery can leave alone what a newer incarnation staged.
// Ids of versions before that are 16 hex digits only; they count as older than every incarnation.
//
// A staged list exists only between preCommit and commit (or abort): anything still there once a job
// is done was left behind. The marker makes commit idempotent: a second commit of the same
// transaction (after a crash, or from an older checkpoint) finds it and does nothing.

/**
 * The key names of one sink (one `sinkId` under one `keyPrefix`).
 *
 * @example
 * ```ts
 * const keys = new RedisSinkKeys("onceflow", "orders");
 * keys.staged(0, "i3-9f2c…"); // "onceflow:orders:staged:0:i3-9f2c…"
 * ```
 */
export class RedisSinkKeys {
  constructor(
    readonly keyPrefix: string,
    readonly sinkId: string,
  ) {
    for (const [setting, value] of [
      ["keyPrefix", keyPrefix],
      ["sinkId", sinkId],
    ] as const) {
      if (!/^[A-Za-z0-9_.-]+$/.test(value)) {
        throw new ConfigurationError(
          setting,
          `must be letters, digits, "_", "." or "-" (it is part of key names and SCAN patterns), got ${JSON.stringify(value)}`,
        );
      }
    }
  }

  /** The staged list of one transaction. */
  staged(subtaskIndex: number, transactionId: string): string {
    return `${this.keyPrefix}:${this.sinkId}:staged:${subtaskIndex}:${transactionId}`;
  }

  /** The commit marker of one transaction. */
  committed(transactionId: string): string {
    return `${this.keyPrefix}:${this.sinkId}:committed:${transactionId}`;
  }

  /** The SCAN pattern of every staged list of this sink. */
  get stagedPattern(): string {
    return `${this.keyPrefix}:${this.sinkId}:staged:*`;
  }

  /**
   * The subtask index and incarnation in a staged key name; `incarnation` is undefined for keys of
   * the format before incarnations were in transaction ids (older than every incarnation). The
   * result is undefined when the key is not one of this sink's staged lists.
   */
  parseStaged(key: string): { subtaskIndex: number; incarnation: number | undefined } | undefined {
    const prefix = `${this.keyPrefix}:${this.sinkId}:staged:`;
    if (!key.startsWith(prefix)) return undefined;
    const match = /^(\d+):(?:i(\d+)-)?[0-9a-f]+$/.exec(key.slice(prefix.length));
    if (match === null) return undefined;
    return {
      subtaskIndex: Number(match[1]),
      incarnation: match[2] === undefined ? undefined : Number(match[2]),
    };
  }
}

/**
 * Commits one transaction atomically (Redis runs a script as one step): KEYS = staged list, commit
 * marker, destination list; ARGV = the number of staged records, the marker's TTL in seconds.
 * Returns 1 when it moved the records now, 0 when the marker says it was committed before, -1 when
 * neither the marker nor the whole staged list is there (the transaction is lost).
 *
 * @example
 * ```ts
 * await client.eval(COMMIT_SCRIPT, { keys: [staged, marker, destination], arguments: ["3", "604800"] });
 * ```
 */
export const COMMIT_SCRIPT = `
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local count = tonumber(ARGV[1])
if redis.call('LLEN', KEYS[1]) ~= count then return -1 end
local records = redis.call('LRANGE', KEYS[1], 0, -1)
for first = 1, #records, 1000 do
  redis.call('RPUSH', KEYS[3], unpack(records, first, math.min(first + 999, #records)))
end
redis.call('SET', KEYS[2], ARGV[1], 'EX', tonumber(ARGV[2]))
redis.call('DEL', KEYS[1])
return 1
`;
