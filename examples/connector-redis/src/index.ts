// The public API of onceflow-connector-redis: everything users import is exported here.
export type { RedisClient, RedisSinkOptions, RedisTransaction } from "./redis-sink.js";
export { listStagedTransactions, RedisSink } from "./redis-sink.js";
